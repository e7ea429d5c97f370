"""The catalog, machines and cost tables as the CLI prints them."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from jobs.core.catalog import load_catalog
from jobs.pricing.estimates import DEFAULT_REGION, estimate
from tests.jobs.core.price_tables import SPOT_TABLE, priced_job, with_table
from vtx.views.catalog import catalog_table, machines_table
from vtx.views.costs import print_cost


def _printed(render: object) -> str:
    console = Console(width=200, record=True, file=io.StringIO())
    if callable(render):
        render(console)
    else:
        console.print(render)
    return console.export_text()


def test_a_job_without_a_region_is_priced_in_the_default_region_and_says_so() -> None:
    result = estimate(priced_job({"chief": {"machine": "n1-standard-4"}}))
    assert result.region == DEFAULT_REGION and result.region_assumed
    assert result.on_demand_usd_per_h == pytest.approx(0.2185)
    assert "(assumed: no region given)" in _printed(lambda c: print_cost(c, result, "plan"))


def test_a_total_that_needs_an_unknown_price_is_unknown_not_a_partial_sum() -> None:
    cat = with_table(SPOT_TABLE)
    pools = {
        "chief": {"machine": "g2-standard-8"},
        "workers": {"machine": "n1-standard-4", "replicas": 2},
    }
    result = estimate(priced_job(pools, "europe-west4", "spot"), catalog=cat)
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
    result = estimate(priced_job({"chief": {"machine": "n1-standard-4"}}), "us-central1")
    text = _printed(lambda c: print_cost(c, result, "plan"))
    table = result.table
    assert table is not None
    assert f"plan in us-central1; table {table.name}, as of {table.as_of}" in text
    assert table.source in text
    assert "on-demand $/h *" in text and "Spot $/h *" not in text
    assert "* the price this job pays (strategy STANDARD)" in text
    spot = estimate(
        priced_job({"chief": {"machine": "n1-standard-4"}}, strategy="spot"), "us-central1"
    )
    assert "Spot $/h *" in _printed(lambda c: print_cost(c, spot, "plan"))


def test_flex_start_prices_are_unknown_with_on_demand_shown_beside() -> None:
    result = estimate(priced_job({"chief": {"machine": "n1-standard-4"}}, strategy="flex_start"))
    assert result.price_kind == "FLEX_START" and result.usd_per_h is None
    text = _printed(lambda c: print_cost(c, result, "plan"))
    assert "FLEX_START (Dynamic Workload Scheduler) is billed at its own prices" in text
    assert "$0.22/h" in text


def test_a_flex_start_job_pays_the_flex_start_column_and_names_its_skus() -> None:
    flex = {"flex_start_basis": "catalog", "fetched_at": "2026-11-27T03:00:00Z"}
    table = {
        **SPOT_TABLE,
        "flex_start_source": "https://example.invalid/dws + https://example.invalid/fee",
        "machines": {
            "g2-standard-8": {
                **SPOT_TABLE["machines"]["g2-standard-8"],  # type: ignore[index]
                **flex,
                "flex_start_usd_per_h": 0.6,
                "flex_start_sku": "B1+A1",
                "flex_start_sku_description": "DWS g2 + fee g2",
            }
        },
        "accelerators": {
            "NVIDIA_L4": {
                **SPOT_TABLE["accelerators"]["NVIDIA_L4"],  # type: ignore[index]
                **flex,
                "flex_start_usd_per_h": 0.25,
                "flex_start_sku": "B2+A2",
                "flex_start_sku_description": "DWS L4 + fee L4",
            }
        },
    }
    pools = {"chief": {"machine": "g2-standard-8"}}  # its one L4 comes with it
    result = estimate(priced_job(pools, "europe-west4", "flex_start"), catalog=with_table(table))
    # Neither the on-demand (1.5) nor the Spot (0.5) figure: FLEX_START's own.
    assert (result.price_kind, result.usd_per_h) == ("FLEX_START", pytest.approx(0.85))
    text = _printed(lambda c: print_cost(c, result, "plan"))
    assert "FLEX_START $/h *" in text and "$0.85" in text
    assert "is billed at its own prices" not in text
    assert 'NVIDIA_L4 (FLEX_START): SKU B2+A2 "DWS L4 + fee L4"' in text
    assert "FLEX_START figures: https://example.invalid/dws + https://example.invalid/fee" in text


def test_catalog_tables_show_each_regions_figure_or_unknown() -> None:
    cat = load_catalog()
    h100 = _printed(catalog_table(cat, "NVIDIA_H100_80GB", None))
    assert "us-central1: 11.2660 (verified) / unknown" in h100
    # The shipped tables hold no T4 figure read from a source: unknown, and how to get one.
    everywhere = _printed(catalog_table(cat, "NVIDIA_TESLA_T4", None))
    assert "unknown in us-central1, us-east4, us-west1, europe-west4" in everywhere
    assert "`vtx prices refresh` reads them from the billing catalog" in " ".join(
        everywhere.split()
    )
    europe = _printed(machines_table(cat, "europe-west4"))
    assert "n1-standard-4" in europe and "unknown in europe-west4" in europe
    assert "0.2185" not in europe
    priced = _printed(machines_table(with_table(SPOT_TABLE), "europe-west4"))
    assert "europe-west4: 1.0000 (verified) / 0.3000 (verified)" in priced
