"""The local platform's billing catalog stand-in through its real route: the Cloud Billing
Catalog API's paging, currency and Sku shape, a SKU for every region, machine and GPU the
catalog knows (training and prediction, on-demand and Spot, and FLEX_START's Vertex fee and
Compute Engine DWS hour where FLEX_START runs it, and a training pd-ssd boot disk per region),
each marked as the stand-in's."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from jobs.core.catalog import load_catalog
from jobs.core.stack import StackOutputs
from jobs.pricing.billing_skus import GPU_WORDS, Key, match
from jobs.pricing.estimates import estimate
from jobs.pricing.refresh import BillingCatalogReader, refresh
from tests.jobs.core.price_tables import disk_job

SKUS_PATH = "/v1/services/C7E2-9256-1C43/skus"
COMPUTE_SKUS_PATH = "/v1/services/6F81-5844-456A/skus"


def _get(url: str) -> dict:
    with urllib.request.urlopen(url) as resp:
        return json.load(resp)


def _all_pages(base: str, page_size: int, path: str = SKUS_PATH) -> tuple[list[dict], int]:
    skus, token, pages = [], "", 0
    while True:
        page = _get(f"{base}{path}?currencyCode=USD&pageSize={page_size}&pageToken={token}")
        skus += page["skus"]
        pages += 1
        token = page["nextPageToken"]
        if not token:
            return skus, pages


@pytest.mark.parametrize("path", [SKUS_PATH, COMPUTE_SKUS_PATH])
def test_pages_hold_every_sku_in_the_apis_shape(local_platform: StackOutputs, path: str) -> None:
    base = local_platform.vertex_endpoint
    skus, pages = _all_pages(base, 500, path)
    assert len(skus) == len(_get(f"{base}{path}")["skus"])  # the default page holds all
    assert pages == -(-len(skus) // 500)
    assert len({s["skuId"] for s in skus}) == len(skus)
    regions = load_catalog().regions
    service = path.split("/")[3]
    for sku in skus:
        assert re.fullmatch(r"[0-9A-F]{4}-[0-9A-F]{4}-[0-9A-F]{4}", sku["skuId"])
        assert sku["name"] == f"services/{service}/skus/{sku['skuId']}"
        assert sku["description"].endswith("(vtx local stand-in, not a Google price)")
        assert sku["category"]["usageType"] in ("OnDemand", "Preemptible")
        assert [r for r in sku["serviceRegions"] if r in regions] == sku["serviceRegions"]
        (info,) = sku["pricingInfo"]
        disk = "SSD backed PD Capacity" in sku["description"]
        assert info["pricingExpression"]["usageUnit"] == ("GiBy.mo" if disk else "h")
        (rate,) = info["pricingExpression"]["tieredRates"]
        price = rate["unitPrice"]
        assert price["currencyCode"] == "USD" and isinstance(price["units"], str)
        assert isinstance(price["nanos"], int) and 0 <= price["nanos"] < 10**9


def test_every_catalog_figure_but_the_tpus_has_exactly_one_sku(
    local_platform: StackOutputs,
) -> None:
    skus, _ = _all_pages(local_platform.vertex_endpoint, 5000)
    compute, _ = _all_pages(local_platform.vertex_endpoint, 5000, COMPUTE_SKUS_PATH)
    cat = load_catalog()
    matched = match(skus, cat, list(cat.regions), "USD", compute)
    assert matched.figures and matched.ignored == 0
    tpus = {a for a in cat.accelerators if a not in GPU_WORDS}
    # cloud-tpu (TPU v2/v3) and tpu7x-standard-4t: no vCPU or memory figure to price them from
    # (Google gives none for cloud-tpu; TPU7x's could not be read).
    no_figures = {name for name, m in cat.machines.items() if m.vcpus is None}
    assert no_figures == {"cloud-tpu", "tpu7x-standard-4t"}
    # Boot disks: pd-ssd from its SKU in every region; no real wording is known for the others.
    disks = {k: why for k, why in matched.unknown.items() if k.item == "disk"}
    assert {k.name for k in disks} == {"pd-standard", "hyperdisk-balanced"}
    assert all(why.startswith("no real SKU wording is known for") for why in disks.values())
    assert {k.region for k in matched.figures if k.name == "pd-ssd"} == set(cat.regions)
    assert {k.name for k in matched.unknown if k.item != "disk"} <= tpus | no_figures
    # FLEX_START: the DWS hour plus the fee, never the on-demand or Spot figure.
    h100 = Key("us-central1", "training", "accelerator", "NVIDIA_H100_80GB", "flex-start")
    on_demand = matched.figures[replace(h100, usage="on-demand")]
    flex = matched.figures[h100]
    assert flex.usd_per_h == pytest.approx(on_demand.usd_per_h * (0.45 + 0.06))
    assert "DWS Defined Duration" in flex.description and "management fee" in flex.description
    b200 = matched.figures[replace(h100, name="NVIDIA_B200")]
    assert "B200 (1 gpu slice)" in b200.description


@pytest.mark.parametrize(
    ("query", "code", "said"),
    [
        ("currencyCode=XYZ", 400, "converts to USD, EUR, GBP, JPY only"),
        ("pageToken=oops", 400, "invalid pageToken"),
        ("startTime=2025-10-05T00:00:00Z", 400, "startTime and endTime go together"),
        (
            "startTime=2025-10-06T00:00:00Z&endTime=2025-10-05T00:00:00Z",
            400,
            "startTime must be before endTime",
        ),
        (
            "startTime=2025-10-05T00:00:00Z&endTime=2999-10-05T00:00:00Z",
            400,
            "timestamps in the future are not allowed",
        ),
        (
            # One UTC month, but Oct 31 05:00 to Nov 1 05:00 in Los Angeles: two billing months.
            "startTime=2025-10-31T12:00:00Z&endTime=2025-11-01T12:00:00Z",
            400,
            "within a single calendar month in America/Los_Angeles",
        ),
    ],
)
def test_what_the_stand_in_cannot_answer_is_an_api_error(
    local_platform: StackOutputs, query: str, code: int, said: str
) -> None:
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(f"{local_platform.vertex_endpoint}{SKUS_PATH}?{query}")
    assert caught.value.code == code
    assert said in json.load(caught.value)["error"]["message"]


def test_another_service_is_a_404(local_platform: StackOutputs) -> None:
    # Cloud TPU's service: the stand-in serves only Vertex AI's and Compute Engine's.
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(f"{local_platform.vertex_endpoint}/v1/services/E000-3F24-B8AA/skus")
    assert caught.value.code == 404


def _first(base: str, query: str) -> dict:
    return _get(f"{base}{SKUS_PATH}?pageSize=1&{query}")["skus"][0]


def test_without_a_time_range_the_latest_pricing_is_answered(local_platform: StackOutputs) -> None:
    info = _first(local_platform.vertex_endpoint, "")["pricingInfo"][0]
    effective = datetime.fromisoformat(info["effectiveTime"].replace("Z", "+00:00"))
    now = datetime.now(UTC)
    # "a time within the last 12 hours, indicating the latest pricing info"
    assert now - timedelta(hours=12) <= effective <= now


def test_a_time_range_answers_the_pricing_in_force_in_it(local_platform: StackOutputs) -> None:
    # Oct 31 13:00 to 22:00 in Los Angeles: one billing month, though it crosses UTC's.
    window = "startTime=2025-10-31T20:00:00Z&endTime=2025-11-01T05:00:00Z"
    info = _first(local_platform.vertex_endpoint, window)["pricingInfo"][0]
    assert info["effectiveTime"] == "2025-10-31T20:00:00Z"


def test_a_currency_code_converts_and_reports_its_rate(local_platform: StackOutputs) -> None:
    base = local_platform.vertex_endpoint
    usd = _first(base, "currencyCode=USD")["pricingInfo"][0]
    eur = _first(base, "currencyCode=EUR")["pricingInfo"][0]
    assert (usd["currencyConversionRate"], eur["currencyConversionRate"]) == (1.0, 0.92)

    def amount(info: dict) -> float:
        price = info["pricingExpression"]["tieredRates"][0]["unitPrice"]
        return int(price["units"]) + price["nanos"] / 1e9

    price = eur["pricingExpression"]["tieredRates"][0]["unitPrice"]
    assert price["currencyCode"] == "EUR"
    assert amount(eur) == pytest.approx(amount(usd) * 0.92, abs=1e-9)


def test_the_billing_client_refreshes_a_pd_ssd_disk_figure_that_prices_a_local_job(
    local_platform: StackOutputs, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # Through the real client (`vtx prices refresh`'s reader) against the stand-in's pages.
    monkeypatch.setenv("VTX_PRICES_DIR", str(tmp_path))
    reader = BillingCatalogReader(local_platform)
    now = datetime(2026, 11, 27, 3, 0, tzinfo=UTC)
    done = refresh(reader, load_catalog(), ["us-central1"], now, tmp_path)
    training = next(t for t in done.tables if t.kind == "training")
    serving = next(t for t in done.tables if t.kind == "serving")
    assert set(training.disks) == {"pd-ssd"} and serving.disks == {}
    disk = training.disks["pd-ssd"]
    assert (disk.usd_per_gib_month, disk.basis) == (pytest.approx(0.17), "catalog")
    assert (disk.sku_description or "").startswith(
        "Vertex AI: Training/Pipelines on SSD backed PD Capacity running in us-central1"
    )
    # The local stack's jobs are priced with it: 100 GB + 3 x 200 GB at 0.17 / 730 a GiB-hour.
    cat = load_catalog().with_stand_in_prices()
    result = estimate(disk_job({"size_gb": 200}), catalog=cat)
    assert result.table is not None and result.table.name == training.name
    assert result.disk_usd_per_h == pytest.approx(700 * 0.17 / 730)
    assert result.usd_per_h == pytest.approx((result.on_demand_usd_per_h or 0) + 700 * 0.17 / 730)
    assert [s.name for s in result.skus if s.sku == disk.sku] == ["pd-ssd boot disk"]
