"""The billing catalog matcher on SKUs in the Cloud Billing Catalog API's shape
(tests/data/billing-skus-vertex.json: its figures are test figures, not Google's prices; its
description forms are those docs/vertex-facts.md "Billing catalog" records): on-demand and
Spot figures each from their own SKU, nothing borrowed across regions, kinds or usage types,
ambiguous pairs and other currencies left unknown with the reason."""

from __future__ import annotations

import json
from typing import Any

import pytest

from jobs.core.catalog import load_catalog, refreshed_prices_dir
from jobs.core.catalog.billing_skus import Key, classify, match, tables
from jobs.training.prices import write_tables
from tests.conftest import TEST_DATA, stack_outputs

SKUS = json.loads((TEST_DATA / "billing-skus-vertex.json").read_text())["skus"]
REGIONS = ["us-central1", "us-east4", "us-west1", "europe-west4", "europe-west1"]


@pytest.fixture(scope="module")
def matched():
    return match(SKUS, load_catalog(), REGIONS, "USD")


def _sku(sku_id: str) -> dict:
    return next(s for s in SKUS if s["skuId"] == sku_id)


def test_on_demand_and_spot_each_come_from_their_own_sku(matched) -> None:
    on_demand = matched.figures[
        Key("us-central1", "training", "accelerator", "NVIDIA_TESLA_T4", "on-demand")
    ]
    spot = matched.figures[Key("us-central1", "training", "accelerator", "NVIDIA_TESLA_T4", "spot")]
    assert (on_demand.usd_per_h, on_demand.sku) == (pytest.approx(0.4025), "A001-0000-0001")
    assert (spot.usd_per_h, spot.sku) == (pytest.approx(0.161), "A001-0000-0002")
    assert spot.description.startswith("Spot Preemptible Custom Training Nvidia Tesla T4")
    machine = matched.figures[Key("europe-west4", "training", "machine", "n1-standard-4", "spot")]
    assert (machine.usd_per_h, machine.sku) == (pytest.approx(0.0962), "A001-0000-0005")


def test_a_region_or_kind_the_sku_does_not_list_stays_unknown(matched) -> None:
    # The on-demand T4 SKU lists us-east4; its Spot SKU does not: no Spot figure is borrowed.
    assert (
        Key("us-east4", "training", "accelerator", "NVIDIA_TESLA_T4", "on-demand")
        in matched.figures
    )
    spot = Key("us-east4", "training", "accelerator", "NVIDIA_TESLA_T4", "spot")
    assert matched.unknown[spot] == "no SKU lists this region for it"
    # us-central1's n1-standard-4 is not europe-west1's, and training's is not serving's.
    assert (
        Key("europe-west1", "training", "machine", "n1-standard-4", "on-demand") in matched.unknown
    )
    serving = matched.figures[
        Key("us-central1", "serving", "machine", "n1-standard-4", "on-demand")
    ]
    training = matched.figures[
        Key("us-central1", "training", "machine", "n1-standard-4", "on-demand")
    ]
    assert (serving.sku, training.sku) == ("A001-0000-0014", "A001-0000-0003")
    assert (
        Key("us-central1", "serving", "accelerator", "NVIDIA_TESLA_T4", "on-demand")
        in matched.unknown
    )


def test_a_machine_without_its_own_sku_adds_up_its_familys_vcpu_and_ram(matched) -> None:
    n1 = matched.figures[Key("us-west1", "training", "machine", "n1-standard-4", "on-demand")]
    assert n1.usd_per_h == pytest.approx(4 * 0.036 + 15 * 0.005)
    assert n1.sku == "A001-0000-0011+A001-0000-0012"
    assert n1.description.startswith("4 x Custom Training N1 Predefined Instance Core")
    # No Spot Core/Ram SKU: the Spot figure is not derived from the on-demand one.
    spot = Key("us-west1", "training", "machine", "n1-standard-4", "spot")
    assert matched.unknown[spot] == "no SKU lists this region for it"
    # A Core SKU without its Ram SKU prices nothing.
    g2 = Key("us-west1", "training", "machine", "g2-standard-8", "on-demand")
    assert matched.unknown[g2] == "g2 RAM SKU: no SKU lists this region for it"
    # A machine priced both ways is ambiguous.
    both = Key("europe-west4", "training", "machine", "n1-standard-4", "on-demand")
    assert matched.unknown[both] == "ambiguous: its own SKU and its family's vCPU and RAM SKUs"


def test_two_skus_for_one_figure_leave_it_unknown_naming_both(matched) -> None:
    key = Key("europe-west4", "training", "machine", "g2-standard-8", "on-demand")
    assert key not in matched.figures
    assert "ambiguous" in matched.unknown[key]
    assert "A001-0000-0006" in matched.unknown[key] and "A001-0000-0007" in matched.unknown[key]
    # The EMEA SKU alone prices europe-west1's.
    assert (
        matched.figures[
            Key("europe-west1", "training", "machine", "g2-standard-8", "on-demand")
        ].sku
        == "A001-0000-0007"
    )


def test_another_currency_is_refused_not_converted(matched) -> None:
    key = Key("europe-west1", "training", "accelerator", "NVIDIA_L4", "on-demand")
    assert key not in matched.figures
    assert matched.unknown[key] == (
        "SKU A001-0000-0008: priced in EUR, the tables are in USD (refused, not converted)"
    )


def test_the_80gb_a100_is_not_the_40gb_one(matched) -> None:
    assert (
        Key("us-central1", "training", "accelerator", "NVIDIA_A100_80GB", "on-demand")
        in matched.figures
    )
    assert (
        Key("us-central1", "training", "accelerator", "NVIDIA_TESLA_A100", "on-demand")
        in matched.unknown
    )


@pytest.mark.parametrize(
    ("sku_id", "reason"),
    [
        ("A001-0000-0010", "a commitment SKU"),
        ("A001-0000-0020", "an instance SKU of no single machine family"),
        ("A001-0000-0013", "names neither training nor prediction"),
        ("A001-0000-0015", "says Spot/Preemptible but usageType is OnDemand"),
        ("A001-0000-0016", "a GPU this catalog does not name"),
    ],
)
def test_skus_that_price_no_table_figure_say_why(sku_id: str, reason: str) -> None:
    said = classify(_sku(sku_id), load_catalog())
    assert isinstance(said, str) and reason in said


def write_refreshed(matched, **table: Any) -> None:
    """The tables a refresh on 2026-11-27 would write, into the prices folder."""
    found = tables(
        matched,
        REGIONS,
        currency="USD",
        as_of="2026-11-27",
        fetched_at="2026-11-27T03:00:00Z",
        **table,
    )
    write_tables([t for t in found if t.machines or t.accelerators], refreshed_prices_dir())


def test_tables_name_each_figures_sku_and_the_newest_table_wins(
    matched, monkeypatch, tmp_path
) -> None:
    monkeypatch.setenv("VTX_PRICES_DIR", str(tmp_path))
    write_refreshed(
        matched,
        source="https://cloudbilling.googleapis.com/v1/services/C7E2-9256-1C43/skus",
        name_prefix="billing",
    )
    cat = load_catalog()
    table = cat.price_table("us-central1")
    assert table is not None and table.name == "billing-training-us-central1-2026-11-27"
    t4 = table.accelerators["NVIDIA_TESLA_T4"]
    assert (t4.sku, t4.spot_sku, t4.basis, t4.fetched_at) == (
        "A001-0000-0001",
        "A001-0000-0002",
        "catalog",
        "2026-11-27T03:00:00Z",
    )
    serving = cat.serving_price_table("us-central1")
    assert serving is not None and serving.machines["n1-standard-4"].sku == "A001-0000-0014"
    refreshed = str(tmp_path / "billing-training-us-central1-2026-11-27.yaml")
    assert cat.sources[refreshed].startswith("https://cloudbilling.googleapis.com/")
    # A region the refresh wrote nothing for keeps its shipped table.
    assert cat.price_table("asia-southeast1").name.startswith("vertex-training-")  # type: ignore[union-attr]


def test_the_local_stand_ins_tables_price_the_local_stack_only(
    matched, monkeypatch, tmp_path
) -> None:
    monkeypatch.setenv("VTX_PRICES_DIR", str(tmp_path))
    write_refreshed(
        matched,
        source="the local platform's billing catalog stand-in (not Google's prices)",
        name_prefix="billing-local",
        stand_in=True,
    )
    cat = load_catalog()
    shipped = "vertex-training-us-central1-"
    assert cat.price_table("us-central1").name.startswith(shipped)  # type: ignore[union-attr]
    assert cat.for_stack(stack_outputs()).price_table("us-central1").name.startswith(shipped)  # type: ignore[union-attr]
    local_stack = stack_outputs().model_copy(update={"vertex_endpoint": "http://127.0.0.1:1"})
    table = cat.for_stack(local_stack).price_table("us-central1")
    assert table is not None and table.name == "billing-local-training-us-central1-2026-11-27"


def test_a_broken_refreshed_table_is_named_in_one_line(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("VTX_PRICES_DIR", str(tmp_path))
    (tmp_path / "billing-training-us-central1-2026-11-27.yaml").write_text("name: x\nregion: [\n")
    with pytest.raises(
        ValueError, match=r"billing-training-us-central1-2026-11-27.yaml: not a price table"
    ) as caught:
        load_catalog()
    assert "\n" not in str(caught.value) and "vtx prices refresh" in str(caught.value)
