"""`vtx pool list` and `vtx pool status NAME` against the local platform: a persistent resource
created through the real SDK, a vtx run held on it, then its state, its pool's replicas used and
idle, its $/h (from the local stand-in's refreshed tables) and the run on it. Waits are on
states, never on time."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from jobs.core.stack import StackOutputs
from tests.jobs.core.price_tables import stand_in_for_the_platform
from tests.jobs.local.local_helpers import init_sdk, wait_for
from vtx.cli import app

pytestmark = pytest.mark.slow(cost_s=15)
runner = CliRunner(env={"COLUMNS": "200"})
RID = "warm-cli"
T4_POOL = {
    "id": "t4",
    "machine_spec": {
        "machine_type": "n1-standard-4",
        "accelerator_type": "NVIDIA_TESLA_T4",
        "accelerator_count": 1,
    },
    "replica_count": 1,
    "autoscaling_spec": {"min_replica_count": 1, "max_replica_count": 2},
}


def vtx(*args: str) -> str:
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def status(fmt: str = "json") -> Any:
    return json.loads(vtx("pool", "status", RID, "--stack", "local", "--format", fmt))


@pytest.fixture
def warm(local_platform: StackOutputs):
    """A T4 resource (one VM up, autoscaling to two), created through the SDK, deleted after."""
    from google.cloud.aiplatform.persistent_resource import PersistentResource

    init_sdk(local_platform)
    resource = PersistentResource.create(
        persistent_resource_id=RID, resource_pools=[T4_POOL], labels={"team": "nlp"}
    )
    yield resource
    resource.delete()


def _launch_held(tmp_path: Path, gate: Path) -> None:
    hold = f"import os, time\nwhile not os.path.exists({str(gate)!r}): time.sleep(0.05)"
    template = tmp_path / "held.yaml"
    template.write_text(
        yaml.safe_dump(
            {
                "name": "held",
                "image": "trainer",
                "command": ["python", "-c", hold],
                "persistent_resource": RID,
                "pools": {
                    "chief": {
                        "machine": "n1-standard-4",
                        "accelerator": "NVIDIA_TESLA_T4",
                        "accelerator_count": 1,
                    }
                },
                "scheduling": {"timeout": "10m"},
            }
        )
    )
    vtx("launch", str(template), "--stack", "local", "-y", "--run-id", "held-on-warm")


def test_list_and_status_show_replicas_cost_and_the_run_on_it(
    warm, local_platform: StackOutputs, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VTX_PRICES_DIR", str(tmp_path / "prices"))
    vtx("prices", "refresh", "--stack", "local", "--region", local_platform.region)

    idle = status()
    assert idle["state"] == "RUNNING" and idle["id"] == RID
    (pool,) = idle["pools"]
    assert {k: pool[k] for k in ("id", "machine", "replicas", "max_replicas", "used", "idle")} == {
        "id": "t4",
        "machine": "n1-standard-4, 1 x NVIDIA_TESLA_T4, pd-ssd, 1 replica (autoscaling to 2)",
        "replicas": 1,
        "max_replicas": 2,
        "used": 0,
        "idle": 1,
    }
    assert idle["runs"] == [] and idle["labels"] == {"team": "nlp"}
    per_h = idle["cost"]["usd_per_h"]
    assert per_h is not None and per_h > 0, idle["cost"]
    # a replica is its VM and its boot disk (the SDK's default 100 GB pd-ssd), both priced
    assert pool["boot_disk"] == "100 GB pd-ssd" and pool["boot_disk_usd_per_h"] > 0, pool
    assert per_h == pytest.approx(pool["vm_usd_per_h"] + pool["boot_disk_usd_per_h"])
    assert idle["cost"]["boot_disks_unknown_because"] is None
    assert idle["cost"]["max_usd_per_h"] == pytest.approx(2 * per_h)

    gate = tmp_path / "open"
    _launch_held(tmp_path, gate)
    try:
        _busy(per_h)
    finally:  # the resource is deleted after the test, once no job runs on it
        gate.touch()
        wait_for(lambda: status()["runs"] == [])
    _window_counts_the_run(per_h)


def _window_counts_the_run(per_h: float) -> None:
    """Over the last day: the ended run's replica-hours are busy (from the listing's job times),
    the rest of the pool's one replica x the resource's time up is idle, at the pool's price."""
    found = json.loads(
        vtx("pool", "status", RID, "--stack", "local", "--format", "json", "--window", "24h")
    )
    window = found["window"]
    (pool,) = window["pools"]
    assert window["jobs"] == 1 and window["jobs_not_counted"] == []
    assert pool["busy_replica_h"] > 0 and pool["idle_replica_h"] >= 0
    assert pool["busy_replica_h"] + pool["idle_replica_h"] == pytest.approx(window["up_h"])
    assert window["idle_usd"] == pytest.approx(pool["idle_replica_h"] * per_h)
    text = vtx("pool", "status", RID, "--stack", "local", "--window", "24h")
    assert "the last 1d 00h: up" in text and "1 job(s) ran on it" in text


def _used_one() -> dict | None:
    found = status()
    return found if found["pools"][0]["used"] == 1 else None


def _busy(per_h: float) -> None:
    busy = wait_for(_used_one)
    assert busy["pools"][0]["idle"] == 0
    (run,) = busy["runs"]
    assert run["run_id"] == "held-on-warm" and run["replicas"] == 1
    assert busy["cost"]["usd_per_h"] == per_h  # billed the same, busy or idle

    listed = json.loads(vtx("pool", "list", "--stack", "local", "--format", "json"))
    assert [r["id"] for r in listed] == [RID] and listed[0]["runs"][0]["run_id"] == "held-on-warm"
    table = vtx("pool", "list", "--stack", "local")
    row = next(line for line in table.splitlines() if RID in line)
    assert "RUNNING" in row and f"${per_h:.2f}/h" in row
    text = vtx("pool", "status", RID, "--stack", "local")
    assert "replicas: 1 used, 0 idle" in text and "held-on-warm" in text
    assert "billed busy or idle" in text


def test_the_controller_holds_a_budget_on_the_pool_at_the_runs_share(
    local_platform: StackOutputs, tmp_path: Path
) -> None:
    """A CPU resource made with the SDK, not declared by the stack: the controller's meter reads
    it from the platform and charges the run its one replica of the pool's two at the stand-in
    $2/h, so a budget a moment of it crosses stops the run (metered at $0/h, it would run its ten
    minutes)."""
    from google.cloud.aiplatform.persistent_resource import PersistentResource

    init_sdk(local_platform)
    cpu = {"id": "cpu", "machine_spec": {"machine_type": "n1-standard-4"}, "replica_count": 2}
    resource = PersistentResource.create(persistent_resource_id=CPU_RID, resource_pools=[cpu])
    template = tmp_path / "spendy.yaml"
    template.write_text(
        yaml.safe_dump(
            {
                "name": "spendy",
                "image": "trainer",
                "command": ["python", "-c", "import time; time.sleep(600)"],
                "persistent_resource": CPU_RID,
                "pools": {"chief": {"machine": "n1-standard-4"}},
                "scheduling": {"timeout": "1h"},
                "budget": {"max_cost_usd": 0.000003},
            }
        )
    )
    try:
        with stand_in_for_the_platform({"us-central1": (2.0, 0.5)}, "2099-01-02"):
            vtx("launch", str(template), "--stack", "local", "-y", "--run-id", "budget-on-warm")
            document = wait_for(lambda: _stopped("budget-on-warm"))
    finally:
        wait_for(lambda: all(r.used_replica_count == 0 for r in _pools(resource)))
        resource.delete()
    assert "crossed budget.max_cost_usd $0.000003" in document["controller"]["stopped_by_budget"]
    (attempt,) = document["attempts"]
    assert attempt["usd_per_h"] > 0 and attempt["price"] == "persistent resource"
    assert attempt["warm_pool_share"].startswith(
        f"share of warm pool {CPU_RID}: 1 of 2 replicas, $"
    )


CPU_RID = "warm-budget"


def _stopped(run_id: str) -> dict | None:
    found = json.loads(vtx("status", run_id, "--stack", "local", "--format", "json"))
    return found if (found.get("controller") or {}).get("outcome") else None


def _pools(resource: Any) -> list:
    """The resource's pools as the platform answers now (usedReplicaCount included)."""
    from google.cloud.aiplatform.persistent_resource import PersistentResource

    return PersistentResource(resource.resource_name).gca_resource.resource_pools


def test_a_window_that_is_not_a_duration_says_what_to_write(local_platform: StackOutputs) -> None:
    result = runner.invoke(app, ["pool", "status", RID, "--stack", "local", "--window", "a day"])
    assert result.exit_code == 2
    assert "--window 'a day' is not a duration: write 24h" in result.output


def test_a_resource_that_does_not_exist_is_one_error_line(local_platform: StackOutputs) -> None:
    result = runner.invoke(app, ["pool", "status", "absent", "--stack", "local"])
    assert result.exit_code == 1
    assert "PersistentResource" in result.output and "absent" in result.output
    assert "Traceback" not in result.output


def test_list_says_so_when_there_is_none(local_platform: StackOutputs) -> None:
    assert "no persistent resource in vtx-local" in vtx("pool", "list", "--stack", "local")
