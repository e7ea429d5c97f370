"""The billing catalog reader against a server on 127.0.0.1 that pages as the Cloud Billing
Catalog API does (``pageSize``, ``pageToken`` -> ``nextPageToken``, "" on the last page), with
``currencyCode`` on every page; its errors say where and why in one line."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

import pytest
import yaml

from jobs.training.prices import (
    COMPUTE_SERVICE,
    VERTEX_SERVICE,
    BillingCatalogReader,
    PricesUnavailable,
)
from tests.conftest import TEST_DATA, stack_outputs
from tests.json_handler import JsonHandler, serving

SKUS = json.loads((TEST_DATA / "billing-skus-vertex.json").read_text())["skus"]
COMPUTE_SKUS = json.loads((TEST_DATA / "billing-skus-compute.json").read_text())["skus"]
SERVED = {VERTEX_SERVICE: SKUS, COMPUTE_SERVICE: COMPUTE_SKUS}


class _Catalog(JsonHandler):
    requests: list[dict] = []

    def do_GET(self) -> None:
        url = urlparse(self.path)
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        type(self).requests.append({"path": url.path, **query})
        service = url.path.removeprefix("/v1/services/").removesuffix("/skus")
        if service not in SERVED:
            return self.answer(404, {"error": {"code": 404, "message": "no such service"}})
        skus = SERVED[service]
        size, start = int(query["pageSize"]), int(query.get("pageToken") or 0)
        end = start + size
        self.answer(
            200, {"skus": skus[start:end], "nextPageToken": str(end) if end < len(skus) else ""}
        )


@pytest.fixture
def server() -> Iterator[str]:
    _Catalog.requests = []
    with serving(ThreadingHTTPServer(("127.0.0.1", 0), _Catalog)) as httpd:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"


def test_every_page_is_read_with_the_currency(server: str) -> None:
    reader = BillingCatalogReader(stack_outputs(vertex_endpoint=server))
    found = reader.skus(VERTEX_SERVICE, page_size=5)
    assert [s["skuId"] for s in found] == [s["skuId"] for s in SKUS]
    assert [r.get("pageToken") for r in _Catalog.requests] == [None, "5", "10", "15", "20", "25"]
    assert {(r["currencyCode"], r["pageSize"]) for r in _Catalog.requests} == {("USD", "5")}


def test_an_error_answer_is_one_line_naming_the_url(server: str) -> None:
    reader = BillingCatalogReader(stack_outputs(vertex_endpoint=server))
    with pytest.raises(PricesUnavailable, match=r"^HTTP 404 no such service from http://127"):
        reader.skus("E000-3F24-B8AA")


def test_a_server_that_does_not_answer_is_named() -> None:
    with ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler) as closed:
        url = f"http://127.0.0.1:{closed.server_address[1]}"
    reader = BillingCatalogReader(stack_outputs(vertex_endpoint=url))
    with pytest.raises(PricesUnavailable, match=f"cannot reach {url}"):
        reader.skus(VERTEX_SERVICE)


def test_refresh_writes_a_dated_table_only_where_a_figure_matched(server: str, tmp_path) -> None:
    import requests

    from jobs.core.catalog import load_catalog
    from jobs.training.prices import refresh

    reader = BillingCatalogReader(stack_outputs(), session=requests.Session(), endpoint=server)
    now = datetime(2026, 11, 27, 3, 0, 5, 123, tzinfo=UTC)
    done = refresh(reader, load_catalog(), ["us-central1", "asia-southeast1"], now, tmp_path)
    assert sorted(p.name for p in done.written) == [
        "billing-serving-us-central1-2026-11-27.yaml",
        "billing-training-us-central1-2026-11-27.yaml",
    ]  # asia-southeast1: nothing matched, so its shipped table stays in use
    written = yaml.safe_load(
        (tmp_path / "billing-training-us-central1-2026-11-27.yaml").read_text()
    )
    assert (
        written["source"] == "https://cloudbilling.googleapis.com/v1/services/C7E2-9256-1C43/skus"
    )
    # FLEX_START from both services: Compute Engine's DWS hour and Vertex's fee.
    assert written["flex_start_source"].startswith(
        "https://cloudbilling.googleapis.com/v1/services/6F81-5844-456A/skus (DWS Defined Duration)"
    )
    h100 = written["accelerators"]["NVIDIA_H100_80GB"]
    assert (h100["flex_start_usd_per_h"], h100["flex_start_sku"]) == (
        pytest.approx(5.7),
        "B001-0000-0001+A001-0000-0022",
    )
    assert [r["path"] for r in _Catalog.requests] == [
        "/v1/services/C7E2-9256-1C43/skus",
        "/v1/services/6F81-5844-456A/skus",
    ]
    assert written["accelerators"]["NVIDIA_TESLA_T4"] == {
        "usd_per_h": 0.4025,
        "basis": "catalog",
        "spot_usd_per_h": 0.161,
        "spot_basis": "catalog",
        "sku": "A001-0000-0001",
        "sku_description": "Custom Training Nvidia Tesla T4 GPU running in Americas",
        "spot_sku": "A001-0000-0002",
        "spot_sku_description": "Spot Preemptible Custom Training Nvidia Tesla T4 GPU running in "
        "Americas",
        "fetched_at": "2026-11-27T03:00:05Z",
    }
