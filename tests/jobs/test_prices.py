"""Prices per region: each region's own table, per-SKU Spot figures, and "unknown" (never another
region's figure, a flat Spot discount or a partial sum) wherever a figure is missing."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from pydantic import ValidationError
from rich.console import Console

from jobs.core.catalog import CATALOG_DIR, Catalog, Price, PriceTable, load_catalog
from jobs.spec.template import JobTemplate
from jobs.training.cost import DEFAULT_REGION, estimate
from jobs.training.facts import JobFacts, template_facts
from vtx.views.output import catalog_table, machines_table, print_cost

REPO = Path(__file__).resolve().parents[2]


def _job(pools: dict, region: str | None = None, strategy: str | None = None) -> JobFacts:
    doc: dict = {"name": "priced", "image": "t", "pools": pools}
    if region:
        doc["region"] = region
    if strategy:
        doc["scheduling"] = {"strategy": strategy}
    return template_facts(JobTemplate.model_validate(doc))


def _with_table(table: dict) -> Catalog:
    """The real catalog with its table for ``table['region']`` replaced by ``table``."""
    cat = load_catalog()
    others = tuple(t for t in cat.price_tables if t.region != table["region"])
    priced = PriceTable.model_validate({"name": "test", "currency": "USD", **table})
    return cat.model_copy(update={"price_tables": (*others, priced)})


def _printed(render: object) -> str:
    console = Console(width=200, record=True, file=io.StringIO())
    if callable(render):
        render(console)
    else:
        console.print(render)
    return console.export_text()


SPOT_TABLE = {
    "region": "europe-west4",
    "as_of": "2026-11-23",
    "source": "https://example.invalid/pricing",
    "spot_source": "https://example.invalid/spot",
    "machines": {
        "g2-standard-8": {
            "usd_per_h": 1.0,
            "basis": "verified",
            "spot_usd_per_h": 0.3,
            "spot_basis": "verified",
        },
        "n1-standard-4": {"usd_per_h": 0.25, "basis": "verified"},
    },
    "accelerators": {
        "NVIDIA_L4": {
            "usd_per_h": 0.5,
            "basis": "verified",
            "spot_usd_per_h": 0.2,
            "spot_basis": "verified",
        }
    },
}


def test_every_catalog_region_has_its_own_table_naming_only_what_it_offers() -> None:
    cat = load_catalog()
    assert sorted(t.region for t in cat.price_tables) == sorted(cat.regions)
    for table in cat.price_tables:
        region = cat.regions[table.region]
        for machine in table.machines:
            assert cat.machines[machine].family in region.families, (table.name, machine)
        assert set(table.accelerators) <= set(region.accelerators), table.name
        assert table.as_of and table.source.startswith("https://"), table.name


def test_every_figure_needs_its_basis() -> None:
    with pytest.raises(ValidationError, match="spot_usd_per_h and spot_basis"):
        Price.model_validate({"usd_per_h": 1.0, "basis": "verified", "spot_usd_per_h": 0.3})
    with pytest.raises(ValidationError, match="usd_per_h and basis"):
        Price.model_validate({"basis": "recalled"})


def test_catalog_files_point_only_at_public_sources_not_outside_the_repository() -> None:
    for path in sorted(CATALOG_DIR.rglob("*.yaml")):
        assert "../" not in path.read_text(), path
    assert (REPO / "docs" / "vertex-facts.md").is_file()


def test_a_region_is_never_priced_with_another_regions_figures() -> None:
    job = _job({"chief": {"machine": "n1-standard-4"}}, region="europe-west4")
    assert load_catalog().price_table("europe-west4") is not None
    result = estimate(job)
    assert result.table is not None and result.table.region == "europe-west4"
    assert result.on_demand_usd_per_h is None and result.missing == ["n1-standard-4"]
    unlisted = estimate(_job({"chief": {"machine": "n1-standard-4"}}), "me-west1")
    assert unlisted.table is None and unlisted.on_demand_usd_per_h is None


def test_a_job_without_a_region_is_priced_in_the_default_region_and_says_so() -> None:
    result = estimate(_job({"chief": {"machine": "n1-standard-4"}}))
    assert result.region == DEFAULT_REGION and result.region_assumed
    assert result.on_demand_usd_per_h == pytest.approx(0.2185)
    assert "(assumed: no region given)" in _printed(lambda c: print_cost(c, result, "plan"))


def test_spot_uses_the_published_figure_per_sku() -> None:
    cat = _with_table(SPOT_TABLE)
    job = _job({"chief": {"machine": "g2-standard-8", "replicas": 1}}, "europe-west4", "spot")
    result = estimate(job, catalog=cat)
    assert result.on_demand_usd_per_h == pytest.approx(1.5)
    # 0.5 = 0.3 + 0.2 as published: not 1.5 x any flat factor.
    assert result.spot_usd_per_h == pytest.approx(0.5) == result.usd_per_h
    assert result.usd_at_timeout == pytest.approx(0.5 * 24 * 7)
    assert result.spot_missing == [] and result.spot_bases == {"verified"}


def test_a_total_that_needs_an_unknown_price_is_unknown_not_a_partial_sum() -> None:
    cat = _with_table(SPOT_TABLE)
    pools = {
        "chief": {"machine": "g2-standard-8"},
        "workers": {"machine": "n1-standard-4", "replicas": 2},
    }
    result = estimate(_job(pools, "europe-west4", "spot"), catalog=cat)
    chief, workers = result.pools
    assert chief.spot_usd_per_h == pytest.approx(0.5) and workers.spot_usd_per_h is None
    assert result.spot_usd_per_h is None and result.usd_per_h is None
    assert result.on_demand_usd_per_h == pytest.approx(1.5 + 2 * 0.25)
    text = _printed(lambda c: print_cost(c, result, "plan"))
    total = next(line for line in text.splitlines() if line.startswith("│ total"))
    assert total.split("│")[-2].strip() == "unknown", total
    assert "$0.50" not in total
    assert "No Spot price for n1-standard-4 in europe-west4" in text
    assert "This job (Spot price in europe-west4): unknown;" in text


def test_cost_output_names_region_table_date_source_and_the_price_that_applies() -> None:
    result = estimate(_job({"chief": {"machine": "n1-standard-4"}}), "us-central1")
    text = _printed(lambda c: print_cost(c, result, "plan"))
    table = result.table
    assert table is not None
    assert f"plan in us-central1; table {table.name}, as of {table.as_of}" in text
    assert table.source in text
    assert "on-demand $/h *" in text and "Spot $/h *" not in text
    assert "* the price this job pays (strategy STANDARD)" in text
    spot = estimate(_job({"chief": {"machine": "n1-standard-4"}}, strategy="spot"), "us-central1")
    assert "Spot $/h *" in _printed(lambda c: print_cost(c, spot, "plan"))


def test_flex_start_prices_are_unknown_with_on_demand_shown_beside() -> None:
    result = estimate(_job({"chief": {"machine": "n1-standard-4"}}, strategy="flex_start"))
    assert result.price_kind == "FLEX_START" and result.usd_per_h is None
    text = _printed(lambda c: print_cost(c, result, "plan"))
    assert "FLEX_START (Dynamic Workload Scheduler) is billed at its own prices" in text
    assert "$0.22/h" in text


def test_catalog_tables_show_each_regions_figure_or_unknown() -> None:
    cat = load_catalog()
    everywhere = _printed(catalog_table(cat, "NVIDIA_TESLA_T4", None))
    assert "us-central1: 0.4025 (recalled) / unknown" in everywhere
    assert "unknown in us-east4, us-west1, europe-west4" in everywhere
    europe = _printed(machines_table(cat, "europe-west4"))
    assert "n1-standard-4" in europe and "unknown in europe-west4" in europe
    assert "0.2185" not in europe
    priced = _printed(machines_table(_with_table(SPOT_TABLE), "europe-west4"))
    assert "europe-west4: 1.0000 (verified) / 0.3000 (verified)" in priced
