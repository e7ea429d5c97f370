"""The billing catalog matcher on SKUs in the Cloud Billing Catalog API's shape
(tests/data/billing-skus-vertex.json for Vertex AI, billing-skus-compute.json for Compute
Engine). Each record's source is in docs/vertex-facts.md ("Billing catalog", "The SKU
fixtures"): real SKUs of a published billing report with their ids and figures, words public
code quotes with invented ids and figures, and records marked invented. On-demand, Spot and
FLEX_START figures each from their own SKUs, nothing borrowed across regions, kinds, variants
or usage types, ambiguous pairs and other currencies left unknown with the reason, and a SKU
that cannot be read refused with its reason, never a traceback."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from jobs.core.catalog import PriceTable, load_catalog, refreshed_prices_dir
from jobs.pricing.billing_skus import Key, Matched, classify, match, tables
from jobs.pricing.refresh import write_tables
from tests.conftest import TEST_DATA, stack_outputs

SKUS = json.loads((TEST_DATA / "billing-skus-vertex.json").read_text())["skus"]
COMPUTE_SKUS = json.loads((TEST_DATA / "billing-skus-compute.json").read_text())["skus"]
REGIONS = ["us-central1", "us-east4", "us-west1", "europe-west4", "europe-west1"]


@pytest.fixture(scope="module")
def matched():
    return match(SKUS, load_catalog(), REGIONS, "USD", COMPUTE_SKUS)


def _sku(sku_id: str) -> dict:
    return next(s for s in SKUS if s["skuId"] == sku_id)


def _key(region: str, name: str, usage: str = "on-demand", kind: str = "training") -> Key:
    item = "accelerator" if name.isupper() else "machine"
    return Key(region, kind, item, name, usage)  # type: ignore[arg-type]


def _refresh_into(folder: Path, matched: Matched, monkeypatch: pytest.MonkeyPatch) -> None:
    """The matched SKUs written as refreshed tables into ``folder``, the user's prices folder."""
    monkeypatch.setenv("VTX_PRICES_DIR", str(folder))
    write_refreshed(
        matched,
        source="https://cloudbilling.googleapis.com/v1/services/C7E2-9256-1C43/skus",
        name_prefix="billing",
    )


def test_the_billing_reports_job_totals_are_reproduced(matched) -> None:
    # A3 High training and serving, on-demand and FLEX_START, from the report's own SKUs: the
    # machine and GPU figures add up to its hourly totals less the disks (in no figure).
    def usd(key: Key) -> float:
        return matched.figures[key].usd_per_h

    h100 = matched.figures[_key("us-central1", "NVIDIA_H100_80GB")]
    assert (h100.usd_per_h, h100.sku) == (pytest.approx(11.2660332, abs=1e-9), "3F95-001E-B747")
    training = usd(_key("us-central1", "a3-highgpu-8g")) + 8 * h100.usd_per_h
    assert training == pytest.approx(101.5429684 - 0.53561644, abs=1e-6)
    serving = usd(_key("us-central1", "a3-highgpu-1g", kind="serving")) + usd(
        _key("us-central1", "NVIDIA_H100_80GB", kind="serving")
    )
    assert serving == pytest.approx(12.625919, abs=1e-6)
    flex = usd(_key("us-central1", "a3-highgpu-8g", "flex-start")) + 8 * usd(
        _key("us-central1", "NVIDIA_H100_80GB", "flex-start")
    )
    assert flex == pytest.approx(52.0306163 - 0.65753425 - 0.53561644, abs=1e-5)


def test_on_demand_and_spot_each_come_from_their_own_sku(matched) -> None:
    on_demand = matched.figures[_key("us-central1", "NVIDIA_TESLA_T4")]
    spot = matched.figures[_key("us-central1", "NVIDIA_TESLA_T4", "spot")]
    assert (on_demand.usd_per_h, on_demand.sku) == (pytest.approx(0.4025), "A001-0000-0001")
    assert (spot.usd_per_h, spot.sku) == (pytest.approx(0.161), "A001-0000-0002")


def test_a_spot_sku_is_read_with_usage_type_preemptible(matched) -> None:
    # No word of Spot in its description: usageType Preemptible says it.
    assert "Spot" not in _sku("A001-0000-0002")["description"]
    claim = classify(_sku("A001-0000-0002"), load_catalog())
    assert not isinstance(claim, str) and claim.usage == "spot"


def test_a_spot_sku_is_read_from_its_words_when_usage_type_says_on_demand(matched) -> None:
    # usageType OnDemand, "Spot Preemptible" in the words: the words win, it prices Spot only.
    sku = _sku("A001-0000-0005")
    assert sku["category"]["usageType"] == "OnDemand"
    spot = matched.figures[_key("europe-west4", "NVIDIA_L4", "spot")]
    assert (spot.usd_per_h, spot.sku) == (pytest.approx(0.24), "A001-0000-0005")
    assert matched.unknown[_key("europe-west4", "NVIDIA_L4")] == "no SKU lists this region for it"


def test_a_region_or_kind_the_sku_does_not_list_stays_unknown(matched) -> None:
    # The on-demand T4 SKU lists us-east4; its Spot SKU does not: no Spot figure is borrowed.
    assert _key("us-east4", "NVIDIA_TESLA_T4") in matched.figures
    spot = _key("us-east4", "NVIDIA_TESLA_T4", "spot")
    assert matched.unknown[spot] == "no SKU lists this region for it"
    # us-west1's n1-standard-4 is not europe-west1's, and serving's is not training's.
    assert _key("europe-west1", "n1-standard-4") in matched.unknown
    serving = matched.figures[_key("us-central1", "n1-standard-4", kind="serving")]
    assert serving.sku == "A001-0000-0113+A001-0000-0114"
    assert _key("us-central1", "n1-standard-4") in matched.unknown
    assert _key("us-central1", "NVIDIA_TESLA_T4", kind="serving") in matched.unknown


def test_a_machine_without_its_own_sku_adds_up_its_familys_vcpu_and_ram(matched) -> None:
    n1 = matched.figures[_key("us-west1", "n1-standard-4")]
    assert n1.usd_per_h == pytest.approx(4 * 0.036 + 15 * 0.005)
    assert n1.sku == "A001-0000-0111+A001-0000-0112"
    assert n1.description.startswith(
        "4 x Vertex AI: Training/Pipelines on N1 Predefined Instance Core"
    )
    # No Spot Core/Ram SKU: the Spot figure is not derived from the on-demand one.
    spot = _key("us-west1", "n1-standard-4", "spot")
    assert matched.unknown[spot] == "no SKU lists this region for it"
    # A Core SKU without its Ram SKU prices nothing.
    g2 = _key("us-west1", "g2-standard-8")
    assert matched.unknown[g2] == "g2 RAM SKU: no SKU lists this region for it"
    # A machine priced both ways is ambiguous.
    both = _key("europe-west4", "n1-standard-4")
    assert matched.unknown[both] == "ambiguous: its own SKU and its family's vCPU and RAM SKUs"


def test_a_machine_is_priced_only_from_skus_naming_its_own_variant(matched) -> None:
    # "A3 Instance Core" (the report's, for a3-highgpu) and "A3 Mega Instance Core" side by
    # side: each prices its own series; A3 Ultra has no SKU of its own and stays unknown.
    high = matched.figures[_key("us-central1", "a3-highgpu-8g")]
    assert high.sku == "2E83-99F1-391A+B045-9255-8314"
    assert high.usd_per_h == pytest.approx(208 * 0.0293227 + 1872 * 0.0025534)
    mega = matched.figures[_key("us-central1", "a3-megagpu-8g")]
    assert mega.sku == "A001-0000-0031+A001-0000-0032"
    assert matched.unknown[_key("us-central1", "a3-ultragpu-8g")] == (
        "its family's A3 vCPU/RAM SKUs name no variant (they price a3-highgpu machines); only "
        "SKUs naming A3 Ultra price a3-ultragpu-8g"
    )
    # Public code prices an a2-ultragpu node from "A2 Instance Core": A2 High is not it.
    ultra = matched.figures[_key("us-central1", "a2-ultragpu-1g", kind="serving")]
    assert ultra.sku == "A001-0000-0102+A001-0000-0103"
    assert (
        "only SKUs naming A2 High"
        in matched.unknown[_key("us-central1", "a2-highgpu-1g", kind="serving")]
    )


def test_two_skus_for_one_figure_leave_it_unknown_naming_both(matched) -> None:
    key = _key("europe-west4", "g2-standard-8")
    assert key not in matched.figures
    assert matched.unknown[key].startswith("g2 vCPU SKU: ambiguous: A001-0000-0006 (")
    assert "A001-0000-0007" in matched.unknown[key]
    # The EMEA SKUs alone price europe-west1's.
    assert matched.figures[_key("europe-west1", "g2-standard-8")].sku == (
        "A001-0000-0007+A001-0000-0009"
    )


def test_another_currency_is_refused_not_converted(matched) -> None:
    key = _key("europe-west1", "NVIDIA_L4")
    assert key not in matched.figures
    assert matched.unknown[key] == (
        "SKU A001-0000-0008: priced in EUR, the tables are in USD (refused, not converted)"
    )


def test_the_80gb_a100_is_read_in_vertexs_words_and_is_not_the_40gb_one(matched) -> None:
    # Vertex's prediction SKU says "Nvidia A100 80gb GPU": no "Tesla", lower-case "gb".
    a100 = matched.figures[_key("us-central1", "NVIDIA_A100_80GB", kind="serving")]
    assert a100.sku == "A001-0000-0101"
    assert _key("us-central1", "NVIDIA_TESLA_A100", kind="serving") in matched.unknown


def test_the_words_each_gpu_was_seen_in_are_reported(matched) -> None:
    assert matched.gpu_wordings["NVIDIA_A100_80GB"] == {"Nvidia A100 80gb GPU"}
    assert matched.gpu_wordings["NVIDIA_TESLA_T4"] == {"Nvidia Tesla T4"}
    assert matched.gpu_wordings["NVIDIA_H100_80GB"] == {
        "NVIDIA H100 80GB",
        "Nvidia H100 80gb GPU",
        "Nvidia H100 80GB GPU",
    }


@pytest.mark.parametrize(
    ("sku_id", "reason"),
    [
        ("A001-0000-0010", "a commitment SKU"),
        ("A001-0000-0020", "an instance SKU of no single machine family"),
        ("A001-0000-0013", "names neither training nor prediction"),
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
        # Vertex's own forms (a billing report; public code).
        ("Vertex AI: Training/Pipelines on NVIDIA H100 80GB in Iowa", "NVIDIA_H100_80GB"),
        (
            "Vertex AI: Online/Batch Prediction Nvidia H100 80gb GPU running in Iowa",
            "NVIDIA_H100_80GB",
        ),
        (
            "Vertex AI: Online/Batch Prediction Nvidia A100 80gb GPU running in Iowa",
            "NVIDIA_A100_80GB",
        ),
        # With and without "Tesla", in any case.
        ("Custom Training Nvidia Tesla A100 80GB GPU running in Americas", "NVIDIA_A100_80GB"),
        ("Vertex AI: Training/Pipelines on NVIDIA TESLA A100 80GB in Iowa", "NVIDIA_A100_80GB"),
        ("Custom Training Nvidia Tesla A100 GPU running in Americas", "NVIDIA_TESLA_A100"),
        ("Custom Training Nvidia A100 GPU running in Americas", "NVIDIA_TESLA_A100"),
        ("Custom Training Nvidia T4 GPU running in Americas", "NVIDIA_TESLA_T4"),
        ("Custom Training nvidia tesla v100 gpu running in Americas", "NVIDIA_TESLA_V100"),
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
        return matched.figures[_key(region, name, usage)]

    assert figure("us-central1", "NVIDIA_H100_80GB").sku == "3F95-001E-B747"
    assert figure("us-central1", "NVIDIA_H100_MEGA_80GB").sku == "A001-0000-0026"
    assert figure("us-central1", "NVIDIA_H100_MEGA_80GB", "spot").sku == "A001-0000-0027"
    assert figure("us-east4", "NVIDIA_H100_MEGA_80GB").sku == "A001-0000-0030"
    assert figure("us-central1", "NVIDIA_H200_141GB").sku == "A001-0000-0028"
    assert figure("us-central1", "NVIDIA_B200").sku == "A001-0000-0029"


def test_flex_start_is_compute_engines_dws_hour_plus_vertexs_fee(matched) -> None:
    h100 = _key("us-central1", "NVIDIA_H100_80GB", "flex-start")
    flex = matched.figures[h100]
    assert (flex.usd_per_h, flex.sku) == (
        pytest.approx(4.200761 + 1.4694826),
        "341A-49A5-0C07+5853-505F-A5C4",
    )
    assert "DWS Defined Duration" in flex.description and "management fee" in flex.description
    # One Compute Engine SKU serves both kinds; each kind pays its own Vertex fee.
    serving = matched.figures[replace(h100, kind="serving")]
    assert serving.sku == "341A-49A5-0C07+1797-967A-274D"
    # A machine: its family's DWS Core and Ram plus the fee's Core and RAM, per vCPU and GiB.
    a3 = matched.figures[_key("us-central1", "a3-highgpu-8g", "flex-start")]
    assert a3.usd_per_h == pytest.approx(
        208 * (0.010934 + 0.0038247) + 1872 * (0.000952 + 0.0003331)
    )
    assert a3.sku == "9A32-36B2-7FBC+ED19-A584-4A84+9AC1-7D9B-C47E+D30D-69C9-F057"
    # Neither on-demand nor Spot lends FLEX_START a figure, nor FLEX_START them; Compute
    # Engine's own on-demand H100 SKU ($9.796550569) prices nothing.
    assert matched.figures[replace(h100, usage="on-demand")].sku == "3F95-001E-B747"
    assert replace(h100, usage="spot") in matched.unknown


def test_flex_start_without_both_halves_is_unknown_and_says_which(matched) -> None:
    # us-east4: Compute Engine's DWS SKU lists it, no Vertex fee SKU does.
    east = _key("us-east4", "NVIDIA_H100_80GB", "flex-start")
    assert matched.unknown[east] == "Vertex management fee SKU: no SKU lists this region for it"
    mega = _key("us-central1", "NVIDIA_H100_MEGA_80GB", "flex-start")
    assert matched.unknown[mega] == (
        "Compute Engine DWS Defined Duration SKU: no SKU lists this region for it"
    )
    l4 = _key("us-central1", "NVIDIA_L4", "flex-start")
    assert matched.unknown[l4].startswith("Vertex management fee SKU:")
    # FLEX_START does not take a T4: no such figure is expected at all.
    t4 = _key("us-central1", "NVIDIA_TESLA_T4", "flex-start")
    assert t4 not in matched.unknown and t4 not in matched.figures


@pytest.mark.parametrize(
    ("sku_id", "reason"),
    [
        ("1A25-07A3-AB6D", "a Compute Engine SKU but not DWS Defined Duration"),
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


def _junk(change: str) -> Any:
    sku = json.loads(json.dumps(_sku("A001-0000-0001")))
    price = sku["pricingInfo"][0]["pricingExpression"]["tieredRates"][0]["unitPrice"]
    if change == "category a string":
        sku["category"] = "Compute"
    elif change == "serviceRegions nested lists":
        sku["serviceRegions"] = [["us-central1"]]
    elif change == "description a number":
        sku["description"] = 7
    elif change == "not an object":
        return ["A001-0000-0001"]
    elif change == "pricingInfo an int":
        sku["pricingInfo"] = 3
    elif change == "nanos a list":
        price["nanos"] = [1]
    elif change == "units not an int64":
        price["units"] = "1e20"
    elif change == "units absurd":
        price["units"] = "100000000000000000"
    elif change == "units negative":
        price["units"], price["nanos"] = "-5", 0
    elif change == "nanos out of range":
        price["nanos"] = 5_000_000_000
    return sku


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ("category a string", "category: Input should be a valid dictionary"),
        ("serviceRegions nested lists", "serviceRegions.0: Input should be a valid string"),
        ("description a number", "description: Input should be a valid string"),
        ("not an object", "a list, not a SKU object"),
    ],
)
def test_a_sku_that_cannot_be_read_is_refused_with_its_reason(change: str, said: str) -> None:
    result = match([_junk(change), _sku("A001-0000-0002")], load_catalog(), ["us-central1"], "USD")
    assert len(result.refused) == 1 and said in result.refused[0], result.refused
    assert result.ignored == 1
    # The good SKU beside it still prices its figure.
    assert _key("us-central1", "NVIDIA_TESLA_T4", "spot") in result.figures


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ("pricingInfo an int", "pricingInfo: Input should be a valid list"),
        ("nanos a list", "nanos: Input should be a valid integer"),
        ("units not an int64", "unitPrice.units '1e20' is not an int64"),
        ("units absurd", "is over 1000 $/h, no list price is"),
        ("units negative", "unitPrice -5 is negative"),
        ("nanos out of range", "unitPrice.nanos 5000000000 is not 0 to 999,999,999"),
    ],
)
def test_a_price_that_is_no_rate_leaves_its_figure_unknown(change: str, said: str) -> None:
    result = match([_junk(change)], load_catalog(), ["us-central1"], "USD")
    reason = result.unknown[_key("us-central1", "NVIDIA_TESLA_T4")]
    assert reason.startswith("SKU A001-0000-0001: ") and said in reason, reason
    assert not result.figures


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
    write_tables(
        [t for t in found if t.machines or t.accelerators or t.disks], refreshed_prices_dir()
    )


def test_tables_name_each_figures_sku_and_the_newest_table_wins(
    matched, monkeypatch, tmp_path
) -> None:
    _refresh_into(tmp_path, matched, monkeypatch)
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
        pytest.approx(4.200761 + 1.4694826),
        "catalog",
        "341A-49A5-0C07+5853-505F-A5C4",
    )
    assert t4.flex_start_usd_per_h is None and table.flex_start_source is not None
    serving = cat.serving_price_table("us-central1")
    assert serving is not None
    assert serving.machines["n1-standard-4"].sku == "A001-0000-0113+A001-0000-0114"
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


# ---- boot disks --------------------------------------------------------------------------------


def _disk_key(region: str, disk: str) -> Key:
    return Key(region, "training", "disk", disk, "on-demand")


def test_a_training_pd_ssd_boot_disk_is_priced_from_its_vertex_sku(matched) -> None:
    # A005-98FE-36CC, "Vertex AI: Training/Pipelines on SSD backed PD Capacity", per GiB-month.
    figure = matched.figures[_disk_key("us-central1", "pd-ssd")]
    assert (figure.usd_per_h, figure.sku) == (pytest.approx(0.195494), "A005-98FE-36CC")
    # Only the regions its serviceRegions lists; the other types have no known wording.
    assert matched.unknown[_disk_key("us-east4", "pd-ssd")] == "no SKU lists this region for it"
    for disk in ("pd-standard", "hyperdisk-balanced"):
        said = matched.unknown[_disk_key("us-central1", disk)]
        assert (
            said
            == f"no real SKU wording is known for {disk} boot disks in training: none is guessed"
        )
    assert not [k for k in matched.figures if k.item == "disk" and k.kind == "serving"]


def test_the_reports_job_totals_with_its_boot_disk_are_reproduced(matched) -> None:
    # The report's a3-highgpu-8g job had a 2,000 GB pd-ssd boot disk, billed as 2,000 GiB at
    # the SKU's GiB-month figure / 730 h; its per-hour total includes it. The fixture's figure is
    # the report's rounded $0.0002678 x 730, so the total is met to a hundredth of a cent.
    def usd(key: Key) -> float:
        return matched.figures[key].usd_per_h

    disk = 2000 * usd(_disk_key("us-central1", "pd-ssd")) / 730
    training = usd(_key("us-central1", "a3-highgpu-8g")) + 8 * usd(
        _key("us-central1", "NVIDIA_H100_80GB")
    )
    assert training + disk == pytest.approx(101.5429684, abs=1e-4)


def _disk_sku(description: str, usage: str = "OnDemand", unit: str = "GiBy.mo") -> dict:
    sku = json.loads(json.dumps(_sku("A005-98FE-36CC")))
    sku["description"] = description
    sku["category"]["usageType"] = usage
    sku["pricingInfo"][0]["pricingExpression"]["usageUnit"] = unit
    return sku


@pytest.mark.parametrize(
    ("description", "usage", "compute_engine", "reason"),
    [
        # INVENTED wordings: no real one is known for these (docs/vertex-facts.md, "Disks").
        (
            "Vertex AI: Online/Batch Prediction on SSD backed PD Capacity",
            "OnDemand",
            False,
            "a prediction disk SKU: no real SKU wording is known for serving boot disks",
        ),
        (
            "Vertex AI: Training/Pipelines on Storage PD Capacity",
            "OnDemand",
            False,
            'a disk SKU in words of no known form (known: "ssd backed pd capacity" (pd-ssd))',
        ),
        (
            "Vertex AI: Training/Pipelines on Hyperdisk Balanced Capacity",
            "OnDemand",
            False,
            "a disk SKU in words of no known form",
        ),
        (
            "Vertex AI: Training/Pipelines on SSD backed PD Capacity",
            "Preemptible",
            False,
            "a spot disk SKU: only an on-demand training disk SKU is known",
        ),
        (
            "DWS Defined Duration SSD backed PD Capacity running in Americas",
            "OnDemand",
            True,
            "a Compute Engine disk SKU: Vertex bills a job's boot disk at its own disk SKU",
        ),
        # Real (the report's DWS local SSD, 2303-1D6A-9C08).
        (
            "DWS Defined Duration SSD backed Local Storage running in Americas",
            "OnDemand",
            True,
            "a local SSD SKU: no Vertex SKU wording is known for local SSDs",
        ),
    ],
)
def test_disk_skus_that_price_no_figure_are_refused_saying_why(
    description: str, usage: str, compute_engine: bool, reason: str
) -> None:
    sku = _disk_sku(description, usage)
    said = classify(sku, load_catalog(), compute_engine)
    assert isinstance(said, str) and said.startswith(reason), said
    vertex, compute = ([], [sku]) if compute_engine else ([sku], [])
    found = match(vertex, load_catalog(), ["us-central1"], "USD", compute)
    (refused,) = found.disks_refused
    assert refused.startswith(f"A005-98FE-36CC ({description}): {reason}")
    assert not [k for k in found.figures if k.item == "disk"] and found.ignored == 1
    unknown = found.unknown[_disk_key("us-central1", "pd-ssd")]
    assert unknown == "no SKU lists this region for it"


def test_a_disk_sku_in_another_unit_is_unknown_not_converted() -> None:
    sku = _disk_sku("Vertex AI: Training/Pipelines on SSD backed PD Capacity", unit="GiBy.h")
    found = match([sku], load_catalog(), ["us-central1"], "USD")
    said = found.unknown[_disk_key("us-central1", "pd-ssd")]
    assert said == "SKU A005-98FE-36CC: usageUnit 'GiBy.h', not 'GiBy.mo'"


def test_refreshed_tables_carry_the_disk_figure_with_its_sku(
    matched, monkeypatch, tmp_path
) -> None:
    _refresh_into(tmp_path, matched, monkeypatch)
    table = load_catalog().price_table("us-central1")
    assert table is not None and set(table.disks) == {"pd-ssd"}
    disk = table.disks["pd-ssd"]
    assert (disk.usd_per_gib_month, disk.basis, disk.sku, disk.fetched_at) == (
        pytest.approx(0.195494),
        "catalog",
        "A005-98FE-36CC",
        "2026-11-27T03:00:00Z",
    )
    assert disk.sku_description == "Vertex AI: Training/Pipelines on SSD backed PD Capacity"
    assert disk.usd_per_gib_h == pytest.approx(0.195494 / 730)
    serving = load_catalog().serving_price_table("us-central1")
    assert serving is not None and serving.disks == {}


@pytest.mark.parametrize(
    ("disk", "said"),
    [
        ({"usd_per_gib_month": 0.2}, "usd_per_gib_month and basis go together"),
        (
            {"usd_per_gib_month": -1, "basis": "verified"},
            "not a rate per GiB-month: -1 is negative",
        ),
        ({"usd_per_gib_month": "nan", "basis": "verified"}, "not a rate per GiB-month"),
    ],
)
def test_a_table_disk_figure_that_is_no_rate_is_refused(disk: dict, said: str) -> None:
    document = {"name": "t", "region": "us-central1", "currency": "USD", "as_of": "2026-11-27"}
    with pytest.raises(ValidationError, match=said):
        PriceTable.model_validate({**document, "source": "s", "disks": {"pd-ssd": disk}})
