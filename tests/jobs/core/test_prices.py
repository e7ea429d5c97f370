"""Prices per region: each region's own table, per-SKU Spot figures, and "unknown" (never another
region's figure, a flat Spot discount or a partial sum) wherever a figure is missing."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from jobs.core.catalog import CATALOG_DIR, Price, PriceTable, load_catalog
from jobs.pricing.estimates import estimate
from tests.conftest import REPO
from tests.jobs.core.price_tables import SPOT_TABLE, priced_job, with_table


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
        Price.model_validate({"basis": "verified"})


RECALLED_TABLE = """\
name: old-us-central1-2026-12
region: us-central1
currency: USD
as_of: "2026-12"
source: "https://example.invalid/pricing"
machines:
  n1-standard-4: {usd_per_h: 0.25, basis: verified}
accelerators:
  NVIDIA_TESLA_T4: {usd_per_h: 0.5, basis: recalled}
"""


@pytest.mark.parametrize("folder", ["shipped", "refreshed"])
def test_a_table_with_a_recalled_figure_is_refused_naming_the_file_and_entry(
    folder: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # A recalled figure has no source anyone can check: no table may hold one, wherever it is.
    # A shipped table is the repository's: loading fails. A refreshed one is the user's: it is
    # left out with one warning, and the shipped table prices its region.
    shipped = tmp_path / "catalog"
    shutil.copytree(CATALOG_DIR, shipped)
    prices = tmp_path / "prices"
    prices.mkdir()
    monkeypatch.setenv("VTX_PRICES_DIR", str(prices))
    path = (shipped / "prices" if folder == "shipped" else prices) / "old.yaml"
    path.write_text(RECALLED_TABLE)
    if folder == "shipped":
        with pytest.raises(ValueError) as caught:
            load_catalog(shipped)
        message = str(caught.value)
    else:
        table = load_catalog(shipped).price_table("us-central1")
        assert table is not None and table.name.startswith("vertex-training-us-central1-")
        [message] = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert message.startswith(f"{path}: not a price table (accelerators.NVIDIA_TESLA_T4.basis: ")
    assert "basis 'recalled' is not accepted: a recalled figure has no source" in message
    assert "delete the entry (its price is then unknown)" in message
    assert "basis verified or derived" in message and "\n" not in message
    for spot in ("spot_basis", "flex_start_basis"):
        with pytest.raises(ValidationError, match="basis 'recalled' is not accepted"):
            Price.model_validate({"usd_per_h": 1.0, "basis": "verified", spot: "recalled"})


@pytest.mark.parametrize(
    ("figure", "said"),
    [
        ("-5.0", "is negative"),
        (".nan", "nan is not a finite number"),
        (".inf", "inf is not a finite number"),
        ("1.0e+20", "is over 1000 $/h"),
        ("'5'", "is not a number"),
    ],
)
def test_a_figure_that_is_no_hourly_rate_is_refused(figure: str, said: str) -> None:
    # `vtx cost` printed $-5.00, $nan and $inf from such tables, and the meter budgeted with them.
    text = RECALLED_TABLE.replace(
        "{usd_per_h: 0.5, basis: recalled}", "{usd_per_h: 0.5, basis: verified}"
    )
    for field in ("usd_per_h", "spot_usd_per_h", "flex_start_usd_per_h"):
        basis = {"usd_per_h": "basis"}.get(field, field.replace("usd_per_h", "basis"))
        document = {field: yaml.safe_load(figure), basis: "verified"}
        with pytest.raises(ValidationError, match=f"not an hourly rate: .*{re.escape(said)}"):
            Price.model_validate(document)
    bad = text.replace("usd_per_h: 0.25", f"usd_per_h: {figure}")
    with pytest.raises(ValueError, match=re.escape(said)):
        PriceTable.model_validate(yaml.safe_load(bad))


def test_catalog_files_point_only_at_public_sources_not_outside_the_repository() -> None:
    for path in sorted(CATALOG_DIR.rglob("*.yaml")):
        assert "../" not in path.read_text(), path
    assert (REPO / "docs" / "vertex-facts.md").is_file()


def test_a_region_is_never_priced_with_another_regions_figures() -> None:
    job = priced_job({"chief": {"machine": "n1-standard-4"}}, region="europe-west4")
    assert load_catalog().price_table("europe-west4") is not None
    result = estimate(job)
    assert result.table is not None and result.table.region == "europe-west4"
    assert result.on_demand_usd_per_h is None and result.missing == ["n1-standard-4"]
    unlisted = estimate(priced_job({"chief": {"machine": "n1-standard-4"}}), "me-west1")
    assert unlisted.table is None and unlisted.on_demand_usd_per_h is None


def test_spot_uses_the_published_figure_per_sku() -> None:
    cat = with_table(SPOT_TABLE)
    job = priced_job({"chief": {"machine": "g2-standard-8", "replicas": 1}}, "europe-west4", "spot")
    result = estimate(job, catalog=cat)
    assert result.on_demand_usd_per_h == pytest.approx(1.5)
    # 0.5 = 0.3 + 0.2 as published: not 1.5 x any flat factor.
    assert result.spot_usd_per_h == pytest.approx(0.5) == result.usd_per_h
    assert result.usd_at_timeout == pytest.approx(0.5 * 24 * 7)
    assert result.spot_missing == [] and result.spot_bases == {"verified"}
