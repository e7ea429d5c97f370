"""Cost and quota estimates from the price table."""

from __future__ import annotations

import pytest

from jobs.core.catalog import Price
from jobs.custom_jobs.facts import template_facts
from jobs.pricing.estimates import budget_warning, estimate
from jobs.spec.gcloud import load_template
from jobs.spec.template import JobTemplate
from tests.conftest import TEMPLATES
from tests.jobs.core.price_tables import (
    DISK_TABLE,
    SPOT_TABLE,
    US_CENTRAL1_TABLE,
    disk_job,
    with_table,
)


def _usd(price: Price) -> float:
    assert price.usd_per_h is not None
    return price.usd_per_h


def test_multi_pool_cost_adds_machines_accelerators_and_replicas() -> None:
    cat = with_table(US_CENTRAL1_TABLE)
    table = cat.price_table("us-central1")
    assert table is not None
    job = template_facts(load_template(TEMPLATES / "a100x16-fsdp.yaml"))
    result = estimate(job, "us-central1", catalog=cat)
    node = _usd(table.machines["a2-ultragpu-8g"]) + 8 * _usd(table.accelerators["NVIDIA_A100_80GB"])
    reduction = 4 * _usd(table.machines["n1-highcpu-16"])
    assert [p.role for p in result.pools] == ["chief", "workers", "reduction_server"]
    assert result.on_demand_usd_per_h == pytest.approx(2 * node + reduction)
    assert result.usd_per_h == result.on_demand_usd_per_h  # strategy: standard
    assert result.usd_at_timeout == pytest.approx(2 * node * 48 + reduction * 48)
    assert result.quota == {
        "aiplatform.googleapis.com/custom_model_training_cpus": 96 * 2 + 16 * 4,
        "aiplatform.googleapis.com/custom_model_training_nvidia_a100_80gb_gpus": 16,
    }
    assert result.missing == [] and result.table is table and not result.region_assumed


def test_spot_jobs_use_the_preemptible_quota_and_an_unknown_spot_price_stays_unknown() -> None:
    job = template_facts(load_template(TEMPLATES / "l4-spot-lora.yaml"))
    result = estimate(job, "us-central1", catalog=with_table(US_CENTRAL1_TABLE))
    assert result.price_kind == "Spot"
    # The table has on-demand figures but no Spot figure: no flat discount stands in for one.
    assert result.on_demand_usd_per_h == pytest.approx(0.75 + 0.5)
    assert result.spot_usd_per_h is None
    assert result.usd_per_h is None and result.usd_at_timeout is None
    assert result.spot_missing == ["NVIDIA_L4", "g2-standard-8"] == result.unpriced
    assert (
        "aiplatform.googleapis.com/custom_model_training_preemptible_nvidia_l4_gpus" in result.quota
    )


def test_missing_prices_and_other_regions_are_reported_not_guessed() -> None:
    template = JobTemplate.model_validate(
        {
            "name": "h200",
            "image": "t",
            "region": "europe-west4",
            "pools": {"chief": {"machine": "a3-ultragpu-8g"}},
        }
    )
    result = estimate(template_facts(template))
    assert result.region == "europe-west4" and result.table is not None
    assert result.table.region == "europe-west4"
    assert result.missing == ["NVIDIA_H200_141GB", "a3-ultragpu-8g"]
    assert result.on_demand_usd_per_h is None  # not $0, not a partial sum


def test_a_budget_under_the_timeout_caps_cost_names_the_timeout_that_fits() -> None:
    doc = {
        "name": "b",
        "image": "t",
        "region": "europe-west4",
        "pools": {"chief": {"machine": "n1-standard-4", "replicas": 1}},
        "scheduling": {"timeout": "10h"},
    }
    cost = estimate(template_facts(JobTemplate.model_validate(doc)), catalog=with_table(SPOT_TABLE))
    assert budget_warning(cost, None) is None
    assert budget_warning(cost, 2.5) is None  # $0.25/h for 10 h: exactly the budget
    warning = budget_warning(cost, 1.0)
    assert warning is not None
    assert "budget.max_cost_usd $1.00 is under the cost at the timeout cap (10h): $2.50" in warning
    assert warning.endswith("scheduling.timeout: 4h fits it")
    assert "201m fits it" in (budget_warning(cost, 0.84) or "")  # 201.6 min: whole, rounded down


def test_a_budget_without_a_price_is_said_to_be_unenforced() -> None:
    doc = {
        "name": "b",
        "image": "t",
        "region": "europe-west4",
        "pools": {"chief": {"machine": "n1-standard-4"}},
        "scheduling": {"strategy": "spot"},
    }
    cost = estimate(template_facts(JobTemplate.model_validate(doc)), catalog=with_table(SPOT_TABLE))
    warning = budget_warning(cost, 3)
    assert warning is not None and warning.startswith(
        "budget.max_cost_usd $3.00 is not enforced: no Spot price for n1-standard-4 in test"
    )


# ---- boot disks --------------------------------------------------------------------------------


def test_boot_disks_are_a_line_of_their_own_and_in_the_price_when_known() -> None:
    result = estimate(disk_job({"size_gb": 200}), catalog=with_table(DISK_TABLE))
    chief, workers = result.pools
    # The chief's default disk (pd-ssd, 100 GB) and three 200 GB ones, each GB billed as a GiB.
    assert (chief.disk_type, chief.disk_size_gb, chief.disks) == ("pd-ssd", 100, 1)
    assert chief.disk_usd_per_h == pytest.approx(100 * 0.00025)
    assert workers.disk_usd_per_h == pytest.approx(3 * 200 * 0.00025)
    assert result.disk_usd_per_h == pytest.approx(0.175)
    # The machines' columns stay the machines'; the job's price adds the disks.
    assert result.on_demand_usd_per_h == pytest.approx(4 * 0.25)
    assert result.usd_per_h == pytest.approx(1.0 + 0.175)
    assert result.usd_at_timeout == pytest.approx(1.175 * 24 * 7)
    assert not result.excludes_disks and result.disks_unknown_because is None


def test_an_unknown_disk_figure_leaves_the_known_price_excluding_disks_not_unknown() -> None:
    # pd-standard has no known SKU wording: its line is unknown and says so, and the price the
    # machines already had is kept, marked as excluding the disks.
    result = estimate(disk_job({"type": "pd-standard"}), catalog=with_table(DISK_TABLE))
    assert result.pools[0].disk_usd_per_h == pytest.approx(0.025)
    assert result.pools[1].disk_usd_per_h is None and result.disk_usd_per_h is None
    assert result.usd_per_h == pytest.approx(1.0) and result.excludes_disks
    assert result.disks_unknown_because == (
        "pd-standard: no figure in test (no real SKU wording is known for pd-standard boot disks)"
    )
    assert result.unknown_because is None
    # A table without disk figures (the shipped ones) says `vtx prices refresh` reads pd-ssd's.
    plain = estimate(
        disk_job({}), catalog=with_table(US_CENTRAL1_TABLE | {"machines": DISK_TABLE["machines"]})
    )
    assert plain.excludes_disks and "`vtx prices refresh` reads it" in (
        plain.disks_unknown_because or ""
    )


def test_a_spot_jobs_boot_disk_is_unknown_and_flex_start_uses_the_disk_figure() -> None:
    spot = DISK_TABLE | {
        "machines": {
            "n1-standard-4": {
                "usd_per_h": 0.25,
                "basis": "verified",
                "spot_usd_per_h": 0.1,
                "spot_basis": "verified",
            }
        },
        "spot_source": "https://example.invalid/spot",
    }
    result = estimate(disk_job({}, "SPOT"), catalog=with_table(spot))
    assert result.price_kind == "Spot" and result.disk_usd_per_h is None
    assert result.usd_per_h == pytest.approx(0.4) and result.excludes_disks
    assert "which SKU bills a Spot job's boot disk" in (result.disks_unknown_because or "")
    assert result.disk_usd_per_h_for("FLEX_START") == pytest.approx(0.1)
