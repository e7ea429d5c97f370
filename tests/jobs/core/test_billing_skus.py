"""The billing catalog matcher on SKUs in the Cloud Billing Catalog API's shape
(tests/data/billing-skus-vertex.json for Vertex AI, billing-skus-compute.json for Compute
Engine: their figures are test figures, not Google's prices; their description forms are those
docs/vertex-facts.md "Billing catalog" records): on-demand, Spot and FLEX_START figures each
from their own SKUs, nothing borrowed across regions, kinds or usage types, ambiguous pairs and
other currencies left unknown with the reason."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from jobs.core.catalog import load_catalog, refreshed_prices_dir
from jobs.core.catalog.billing_skus import Key, classify, match, tables
from jobs.training.prices import write_tables
from tests.conftest import TEST_DATA, stack_outputs

SKUS = json.loads((TEST_DATA / "billing-skus-vertex.json").read_text())["skus"]
COMPUTE_SKUS = json.loads((TEST_DATA / "billing-skus-compute.json").read_text())["skus"]
REGIONS = ["us-central1", "us-east4", "us-west1", "europe-west4", "europe-west1"]


@pytest.fixture(scope="module")
def matched():
    return match(SKUS, load_catalog(), REGIONS, "USD", COMPUTE_SKUS)


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


@pytest.mark.parametrize(
    ("description", "gpu"),
    [
        # Compute Engine's words (SkyPilot's GCP catalog fetcher; docs/vertex-facts.md).
        ("Custom Training Nvidia H100 80GB Mega GPU running in Americas", "NVIDIA_H100_MEGA_80GB"),
        ("Custom Training H100 Mega 80GB GPU running in Americas", "NVIDIA_H100_MEGA_80GB"),
        ("Custom Training H100 80GB Plus GPU running in Americas", "NVIDIA_H100_MEGA_80GB"),
        ("Custom Training H200 141GB GPU running in Netherlands", "NVIDIA_H200_141GB"),
        ("Custom Training Nvidia H200 141GB GPU running in Americas", "NVIDIA_H200_141GB"),
        ("Custom Training A4 Nvidia B200 (1 gpu slice) running in Americas", "NVIDIA_B200"),
        # Vertex's own training form names no "GPU" (a billing report's SKU).
        ("Vertex AI: Training/Pipelines on NVIDIA H100 80GB in Iowa", "NVIDIA_H100_80GB"),
        (
            "Vertex AI: Online/Batch Prediction Nvidia H100 80gb GPU running in Iowa",
            "NVIDIA_H100_80GB",
        ),
        ("Custom Training Nvidia Tesla A100 80GB GPU running in Americas", "NVIDIA_A100_80GB"),
    ],
)
def test_each_gpu_is_named_in_the_words_public_skus_use(description: str, gpu: str) -> None:
    sku = {"description": description, "category": {"usageType": "OnDemand"}}
    said = classify(sku, load_catalog())
    assert not isinstance(said, str), said
    assert (said.item, said.name) == ("accelerator", gpu)


@pytest.mark.parametrize(
    "description",
    [
        "Custom Training Nvidia H100 80GB Ultra GPU running in Americas",
        "Custom Training Nvidia B200 (8 gpu slice) running in Americas",
        "Custom Training Nvidia Foo H200 141GB GPU running in Americas",
    ],
)
def test_a_gpu_worded_otherwise_is_matched_to_none(description: str) -> None:
    sku = {"description": description, "category": {"usageType": "OnDemand"}}
    assert classify(sku, load_catalog()) == (
        "a GPU this catalog does not name (or words it otherwise)"
    )


def test_the_new_gpus_figures_come_from_their_own_skus(matched) -> None:
    def figure(region: str, name: str, usage: str = "on-demand"):
        return matched.figures[Key(region, "training", "accelerator", name, usage)]  # type: ignore[arg-type]

    assert figure("us-central1", "NVIDIA_H100_80GB").sku == "A001-0000-0021"
    assert figure("us-central1", "NVIDIA_H100_MEGA_80GB").sku == "A001-0000-0026"
    assert figure("us-central1", "NVIDIA_H100_MEGA_80GB", "spot").sku == "A001-0000-0027"
    assert figure("us-east4", "NVIDIA_H100_MEGA_80GB").sku == "A001-0000-0030"
    assert figure("us-central1", "NVIDIA_H200_141GB").sku == "A001-0000-0028"
    assert figure("us-central1", "NVIDIA_B200").sku == "A001-0000-0029"


def test_flex_start_is_compute_engines_dws_hour_plus_vertexs_fee(matched) -> None:
    h100 = Key("us-central1", "training", "accelerator", "NVIDIA_H100_80GB", "flex-start")
    flex = matched.figures[h100]
    assert (flex.usd_per_h, flex.sku) == (pytest.approx(4.2 + 1.5), "B001-0000-0001+A001-0000-0022")
    assert "DWS Defined Duration" in flex.description and "management fee" in flex.description
    # One Compute Engine SKU serves both kinds; each kind pays its own Vertex fee.
    serving = matched.figures[replace(h100, kind="serving")]
    assert (serving.usd_per_h, serving.sku) == (
        pytest.approx(4.2 + 1.4),
        "B001-0000-0001+A001-0000-0025",
    )
    # A machine: its family's DWS Core and Ram plus the fee's Core and RAM, per vCPU and GiB.
    a3 = matched.figures[Key("us-central1", "training", "machine", "a3-highgpu-8g", "flex-start")]
    assert a3.usd_per_h == pytest.approx(208 * (0.011 + 0.004) + 1872 * (0.001 + 0.0003))
    assert a3.sku == "B001-0000-0002+B001-0000-0003+A001-0000-0023+A001-0000-0024"
    # Neither on-demand nor Spot lends FLEX_START a figure, nor FLEX_START them.
    assert matched.figures[replace(h100, usage="on-demand")].sku == "A001-0000-0021"
    assert replace(h100, usage="spot") in matched.unknown


def test_flex_start_without_both_halves_is_unknown_and_says_which(matched) -> None:
    # us-east4: Compute Engine's DWS SKU lists it, no Vertex fee SKU does.
    east = Key("us-east4", "training", "accelerator", "NVIDIA_H100_80GB", "flex-start")
    assert matched.unknown[east] == "Vertex management fee SKU: no SKU lists this region for it"
    mega = Key("us-central1", "training", "accelerator", "NVIDIA_H100_MEGA_80GB", "flex-start")
    assert matched.unknown[mega] == (
        "Compute Engine DWS Defined Duration SKU: no SKU lists this region for it"
    )
    l4 = Key("us-central1", "training", "accelerator", "NVIDIA_L4", "flex-start")
    assert matched.unknown[l4].startswith("Vertex management fee SKU:")
    # FLEX_START does not take a T4: no such figure is expected at all.
    t4 = Key("us-central1", "training", "accelerator", "NVIDIA_TESLA_T4", "flex-start")
    assert t4 not in matched.unknown and t4 not in matched.figures


@pytest.mark.parametrize(
    ("sku_id", "reason"),
    [
        ("B001-0000-0004", "a Compute Engine SKU but not DWS Defined Duration"),
        ("B001-0000-0005", "a reserved SKU"),
        ("B001-0000-0007", "usageType Preemptible, not OnDemand"),
        ("B001-0000-0008", "a commitment SKU"),
    ],
)
def test_compute_engine_skus_other_than_dws_price_nothing(sku_id: str, reason: str) -> None:
    sku = next(s for s in COMPUTE_SKUS if s["skuId"] == sku_id)
    said = classify(sku, load_catalog(), compute_engine=True)
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
    h100 = table.accelerators["NVIDIA_H100_80GB"]
    assert (h100.flex_start_usd_per_h, h100.flex_start_basis, h100.flex_start_sku) == (
        pytest.approx(5.7),
        "catalog",
        "B001-0000-0001+A001-0000-0022",
    )
    assert t4.flex_start_usd_per_h is None and table.flex_start_source is not None
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
