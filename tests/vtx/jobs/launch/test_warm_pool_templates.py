"""`persistent_resource:` in a template: rendered as persistentResourceId, checked against the
stack's declared resource by `vtx validate --stack-file`, and priced by `vtx cost` as nothing
beyond the resource's own price."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from tests.conftest import TEST_DATA
from vtx.cli import app

runner = CliRunner(env={"COLUMNS": "200"})
RESOURCE = {
    "name": "projects/123456789012/locations/us-central1/persistentResources/warm-l4",
    "region": "us-central1",
    "pools": [
        {
            "id": "l4",
            "machine_type": "g2-standard-8",
            "accelerator_type": "NVIDIA_L4",
            "accelerator_count": 1,
            "replica_count": 1,
            "max_replica_count": 2,
        }
    ],
}


def _stack(tmp_path: Path) -> Path:
    stack = json.loads((TEST_DATA / "stack-dev.json").read_text())
    stack["persistent_resources"] = {"warm-l4": RESOURCE}
    path = tmp_path / "stack.json"
    path.write_text(json.dumps(stack))
    return path


def _template(tmp_path: Path, machine: str = "g2-standard-8", **more: object) -> Path:
    doc = {
        "name": "warm",
        "image": "trainer",
        "command": ["python", "-m", "trainer"],
        "persistent_resource": "warm-l4",
        "pools": {"chief": {"machine": machine, "accelerator": "NVIDIA_L4"}},
        **more,
    }
    path = tmp_path / "warm.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def vtx(*args: object) -> tuple[int, str]:
    result = runner.invoke(app, [str(a) for a in args])
    return result.exit_code, result.output


def test_render_writes_persistent_resource_id(tmp_path: Path) -> None:
    code, out = vtx(
        "render", _template(tmp_path), "--stack-file", _stack(tmp_path), "--format", "json"
    )
    assert code == 0, out
    assert json.loads(out)["jobSpec"]["persistentResourceId"] == "warm-l4"


def test_validate_accepts_a_job_a_pool_holds(tmp_path: Path) -> None:
    code, out = vtx("validate", _template(tmp_path), "--stack-file", _stack(tmp_path))
    assert code == 0, out


def test_validate_refuses_a_job_no_pool_holds_naming_the_closest_and_the_change(
    tmp_path: Path,
) -> None:
    code, out = vtx(
        "validate", _template(tmp_path, "g2-standard-16"), "--stack-file", _stack(tmp_path)
    )
    assert code == 1, out
    flat = " ".join(out.split())
    assert "no resource pool of persistent resource 'warm-l4' holds g2-standard-16" in flat
    assert "the closest is pool 'l4' (g2-standard-8, 1 x NVIDIA_L4, pd-ssd, 1 replica" in flat
    assert "set pools.chief.machine to g2-standard-8" in flat


def test_validate_refuses_too_many_replicas_spot_and_an_unknown_resource(tmp_path: Path) -> None:
    template = _template(
        tmp_path,
        scheduling={"strategy": "spot"},
        pools={
            "chief": {"machine": "g2-standard-8", "accelerator": "NVIDIA_L4"},
            "workers": {"machine": "g2-standard-8", "accelerator": "NVIDIA_L4", "replicas": 2},
        },
    )
    code, out = vtx("validate", template, "--stack-file", _stack(tmp_path))
    flat = " ".join(out.split())
    assert code == 1, out
    assert "the job asks 3 replicas of pool 'l4'" in flat
    assert "which has at most 2" in flat
    assert "spot on a persistent resource" in flat
    code, out = vtx("validate", _template(tmp_path), "--stack-file", TEST_DATA / "stack-dev.json")
    assert code == 1 and "has no persistent resource 'warm-l4'" in " ".join(out.split())


def test_cost_says_the_job_adds_nothing_and_what_the_resource_costs(tmp_path: Path) -> None:
    code, out = vtx("cost", _template(tmp_path), "--stack-file", _stack(tmp_path))
    assert code == 0, out
    flat = " ".join(out.split())
    assert "this job adds nothing to the bill beyond the resource's own price" in flat
    assert "This job (persistent resource price in us-central1): $0.00/h" in flat
    assert "busy or idle" in flat
    assert "pool l4: g2-standard-8, 1 x NVIDIA_L4, pd-ssd, 1 replica (autoscaling to 2)" in flat


def test_validate_places_each_ladder_rung_on_the_pool_it_names(tmp_path: Path) -> None:
    """A rung on the warm pool is checked against it too, not only the base."""
    spot_first = {
        "scheduling": {"strategy": "spot"},
        "capacity": {
            "ladder": [
                {
                    "persistent_resource": "warm-l4",
                    "set": {
                        "scheduling.strategy": "standard",
                        "pools.chief.machine": "g2-standard-16",
                    },
                }
            ]
        },
    }
    doc = yaml.safe_load(_template(tmp_path).read_text())
    del doc["persistent_resource"]
    path = tmp_path / "ladder.yaml"
    path.write_text(yaml.safe_dump({**doc, **spot_first}))
    code, out = vtx("validate", path, "--stack-file", _stack(tmp_path))
    flat = " ".join(out.split())
    assert code == 1, out
    assert "capacity.ladder[0]: pools.chief" in flat
    assert "no resource pool of persistent resource 'warm-l4' holds g2-standard-16" in flat
    fits = {
        **spot_first,
        "capacity": {
            "ladder": [
                {"persistent_resource": "warm-l4", "set": {"scheduling.strategy": "standard"}}
            ]
        },
    }
    path.write_text(yaml.safe_dump({**doc, **fits}))
    code, out = vtx("validate", path, "--stack-file", _stack(tmp_path))
    assert code == 0, out


# Made-up figures in a refreshed us-central1 table (the shipped one has no G2 or L4 figure).
TABLE = {
    "name": "billing-training-us-central1-2026-11-28",
    "region": "us-central1",
    "currency": "USD",
    "as_of": "2026-11-28",
    "source": "a test's own figures",
    "machines": {"g2-standard-8": {"usd_per_h": 0.8, "basis": "catalog"}},
    "accelerators": {"NVIDIA_L4": {"usd_per_h": 0.7, "basis": "catalog"}},
}


def test_cost_says_what_the_meter_charges_the_job_and_its_budget_against_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bill is the resource's, but the run's meter charges the job its share of the pool
    (its one replica of the pool's one: $1.50/h, the disk's figure unknown), so a budget means
    something on a warm pool: ten hours of it are over $1."""
    monkeypatch.setenv("VTX_PRICES_DIR", str(tmp_path / "prices"))
    (tmp_path / "prices").mkdir()
    (tmp_path / "prices" / f"{TABLE['name']}.yaml").write_text(yaml.safe_dump(TABLE))
    template = _template(tmp_path, budget={"max_cost_usd": 1}, scheduling={"timeout": "10h"})
    code, out = vtx("cost", template, "--stack-file", _stack(tmp_path))
    assert code == 0, out
    flat = " ".join(out.split())
    assert "This job (persistent resource price in us-central1): $0.00/h" in flat  # the bill
    assert (
        "charges this job its share of warm pool warm-l4: 1 of 1 replica, $1.50/h excluding "
        "boot disks (pool 'l4' pd-ssd: no figure in billing-training-us-central1-2026-11-28"
    ) in flat
    assert (
        "warning: budget.max_cost_usd $1.00 is under the cost at the timeout cap (10h): $15.00"
    ) in flat


def test_an_unpriced_pool_leaves_the_budget_unenforced_not_free(tmp_path: Path) -> None:
    template = _template(tmp_path, budget={"max_cost_usd": 1}, scheduling={"timeout": "10h"})
    code, out = vtx("cost", template, "--stack-file", _stack(tmp_path))
    assert code == 0, out
    flat = " ".join(out.split())
    assert "share of warm pool warm-l4: unknown (pool 'l4': no on-demand price for" in flat
    assert "warning: budget.max_cost_usd $1.00 is not enforced" in flat


def test_the_launch_plan_says_the_share_too(tmp_path: Path) -> None:
    template = _template(tmp_path, scheduling={"timeout": "10h"})
    code, out = vtx("launch", template, "--stack-file", _stack(tmp_path), "--dry-run")
    assert code == 0, out
    assert "its share of warm pool warm-l4: unknown (pool 'l4'" in " ".join(out.split())
