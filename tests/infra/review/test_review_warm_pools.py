"""`vtx review` lists each persistent resource (warm pool) of a stack: its region, network, key,
labels, pools and what it costs per hour, busy or idle."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from infra.policy.values import UNKNOWN
from infra.review.builder import build_report, warm_pools_section
from infra.review.render_markdown import to_markdown
from infra.review.sources import ReviewResource, from_offline
from tests.conftest import REPO
from vtx.commands.review import Format, render_review
from vtx.views.warm_pools import review_price

# Made-up figures for the test, in a refreshed table of the dev stack's region: the pool's
# replica is its VM and its 100 GB pd-ssd boot disk ($0.73 per GiB-month is $0.001 per GiB-hour).
L4_VM_USD_PER_H = 0.8 + 0.7 + 100 * 0.73 / 730
TABLE = {
    "name": "billing-training-europe-west4-2026-11-28",
    "region": "europe-west4",
    "currency": "USD",
    "as_of": "2026-11-28",
    "source": "a test's own figures",
    "machines": {"g2-standard-8": {"usd_per_h": 0.8, "basis": "catalog"}},
    "accelerators": {"NVIDIA_L4": {"usd_per_h": 0.7, "basis": "catalog"}},
    "disks": {"pd-ssd": {"usd_per_gib_month": 0.73, "basis": "catalog"}},
}


def test_dev_lists_its_warm_pool_without_a_price_where_its_region_has_none(offline) -> None:
    _, report = offline["dev"]
    (warm,) = report.warm_pools
    assert warm["resource"] == "warm-l4" and warm["region"] == "europe-west4"
    assert warm["network"].startswith("peered VPC (projects/")
    pool = "l4: g2-standard-8, 1 x NVIDIA_L4, pd-ssd, 1 replica (autoscaling to 2)"
    assert warm["pools"] == [pool]
    assert "cost-center=ml-research" in warm["labels"] and "team=ml-platform" in warm["labels"]
    assert warm["per_hour"] == "not priced"  # the fixture's report is built without a pricer
    assert offline["prod"][1].warm_pools == []


def test_review_prices_the_pool_busy_or_idle_from_the_regions_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VTX_PRICES_DIR", str(tmp_path))
    (tmp_path / f"{TABLE['name']}.yaml").write_text(yaml.safe_dump(TABLE))
    text, code = render_review("dev", fmt=Format.json)
    assert code == 0
    (warm,) = json.loads(text)["warm_pools"]
    assert warm["usd_per_h"] == pytest.approx(L4_VM_USD_PER_H)
    assert warm["max_usd_per_h"] == pytest.approx(2 * L4_VM_USD_PER_H)
    assert warm["per_hour"] == "$1.60/h (up to $3.20/h scaled out)"
    markdown, _ = render_review("dev", fmt=Format.md)
    table = markdown.split("## Persistent resources (warm pools)")[1].split("\n## ")[0]
    assert "| warm-l4 | europe-west4 | peered VPC" in table and "$1.60/h" in table


def test_a_pool_whose_boot_disk_has_no_figure_is_priced_excluding_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As a job's price is (jobs/pricing/estimates.py): the VMs' figure, saying what it leaves
    out and why, rather than an unknown price."""
    monkeypatch.setenv("VTX_PRICES_DIR", str(tmp_path))
    table = {k: v for k, v in TABLE.items() if k != "disks"}
    (tmp_path / f"{TABLE['name']}.yaml").write_text(yaml.safe_dump(table))
    text, _ = render_review("dev", fmt=Format.json)
    (warm,) = json.loads(text)["warm_pools"]
    assert warm["usd_per_h"] == pytest.approx(0.8 + 0.7)
    assert warm["per_hour"].startswith(
        "$1.50/h (up to $3.00/h scaled out) excluding boot disks (pool 'l4' pd-ssd: no figure in "
        f"{TABLE['name']}"
    )


def test_without_a_price_the_review_says_why() -> None:
    text, _ = render_review("dev", fmt=Format.md)
    table = text.split("## Persistent resources (warm pools)")[1].split("\n## ")[0]
    assert "unknown: pool 'l4': no on-demand price for NVIDIA_L4" in table


def test_a_pool_a_preview_cannot_see_yet_is_computed_and_unpriced() -> None:
    inputs = {
        "name": "warm",
        "location": "europe-west4",
        "resourcePools": [{"id": "l4", "machineSpec": {"machineType": UNKNOWN}}],
        "pscInterfaceConfig": {"networkAttachment": "projects/p/regions/r/networkAttachments/a"},
    }
    resource = ReviewResource(
        "urn:w", "gcp:vertex/aiPersistentResource:AiPersistentResource", "warm", inputs, {}, "x"
    )

    def never(_: object) -> object:
        raise AssertionError("a resource with computed pools is not priced")

    (row,) = warm_pools_section([resource], never)  # type: ignore[arg-type]
    assert row["pools"] == ["(computed)"] and row["per_hour"] == "unknown (computed)"
    assert row["network"].startswith("PSC interface (")


def test_the_section_is_in_the_markdown_of_every_stack(offline) -> None:
    for stack in ("dev", "prod"):
        assert "## Persistent resources (warm pools)" in to_markdown(offline[stack][1])


def test_a_teams_budget_row_counts_the_warm_pools_billed_to_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Prod's team budgets filter on vtx-team: a warm pool labelled nlp is in nlp's budget, its
    month at the floor spent whether or not a job runs."""
    monkeypatch.setenv("VTX_PRICES_DIR", str(tmp_path / "prices"))
    (tmp_path / "prices").mkdir()
    (tmp_path / "prices" / f"{TABLE['name']}.yaml").write_text(yaml.safe_dump(TABLE))
    doc = yaml.safe_load((REPO / "Pulumi.prod.yaml").read_text())
    warm = {
        "id": "warm-l4",
        "labels": {"vtx-team": "nlp"},
        "pools": [{"id": "l4", "machine": "g2-standard-8", "accelerator": "NVIDIA_L4"}],
    }
    doc["config"]["vtx:platform"]["persistent_resources"] = [warm]
    config = tmp_path / "Pulumi.prod-warm.yaml"
    config.write_text(yaml.safe_dump(doc))
    report = build_report(from_offline("prod-warm", config), review_price)
    nlp, vision = report.teams
    assert nlp["warm_pools"] == ["warm-l4: $1.60/h"]
    assert nlp["warm_usd_per_month"] == pytest.approx(L4_VM_USD_PER_H * 730)
    assert nlp["warm_month"] == "$1,168/month"
    assert (vision["warm_pools"], vision["warm_month"]) == (["-"], "-")
    row = next(line for line in to_markdown(report).splitlines() if line.startswith("| nlp |"))
    assert "warm-l4: $1.60/h | $1,168/month |" in row
