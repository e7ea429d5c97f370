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

from jobs.pricing.refresh import (
    COMPUTE_SERVICE,
    MAX_PAGES,
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
    tokens = [None, *(str(n) for n in range(5, len(SKUS), 5))]
    assert [r.get("pageToken") for r in _Catalog.requests] == tokens
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
    from jobs.pricing.refresh import refresh

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
        pytest.approx(4.200761 + 1.4694826),
        "341A-49A5-0C07+5853-505F-A5C4",
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
        "sku_description": "Vertex AI: Training/Pipelines on Nvidia Tesla T4 in Americas",
        "spot_sku": "A001-0000-0002",
        "spot_sku_description": "Vertex AI: Training/Pipelines on Nvidia Tesla T4 in Americas",
        "fetched_at": "2026-11-27T03:00:05Z",
    }


class _Bad(JsonHandler):
    """A catalog that misbehaves as ``mode`` says."""

    mode = "endless"
    pages = 0

    def do_GET(self) -> None:
        type(self).pages += 1
        token = parse_qs(urlparse(self.path).query).get("pageToken", ["0"])[0]
        if self.mode == "endless":  # a new token every page, for ever
            return self.answer(200, {"skus": [], "nextPageToken": str(int(token) + 1)})
        if self.mode == "same token":
            return self.answer(200, {"skus": [], "nextPageToken": "again"})
        if self.mode == "deep":
            return self.answer(200, b"[" * 100_000 + b"]" * 100_000)
        if self.mode == "deep error":
            return self.answer(500, b'{"error": ' + b"[" * 100_000 + b"]" * 100_000 + b"}")
        return self.answer(200, {"skus": 7})


@pytest.fixture
def bad_server() -> Iterator[str]:
    _Bad.pages = 0
    with serving(ThreadingHTTPServer(("127.0.0.1", 0), _Bad)) as httpd:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"


@pytest.mark.parametrize(
    ("mode", "said"),
    [
        ("endless", r"still had a nextPageToken after 200 pages"),
        ("same token", r"answered the nextPageToken 'again' again"),
        ("deep", r"did not answer with usable JSON: JSON nested more than 64 levels"),
        ("deep error", r"^HTTP 500"),
        ("skus not a list", r"answered skus as a int, not a list"),
    ],
)
def test_a_catalog_whose_pages_never_end_or_cannot_be_read_is_refused_in_one_line(
    bad_server: str, mode: str, said: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_Bad, "mode", mode)
    reader = BillingCatalogReader(stack_outputs(vertex_endpoint=bad_server))
    with pytest.raises(PricesUnavailable, match=said) as caught:
        reader.skus(VERTEX_SERVICE)
    assert "\n" not in str(caught.value)
    assert _Bad.pages <= MAX_PAGES


def test_saved_pages_write_the_tables_the_api_would(server: str, tmp_path) -> None:
    # The same SKUs, once through the API (pages of 5) and once from files someone saved:
    # Vertex's as a list of two pages, Compute Engine's as one page; a SKU of a third service
    # is refused, saying so.
    import requests

    from jobs.core.catalog import load_catalog
    from jobs.pricing.refresh import SavedCatalog, refresh

    now = datetime(2026, 11, 27, 3, 0, 5, tzinfo=UTC)
    regions = ["us-central1", "us-east4", "europe-west4"]
    api = BillingCatalogReader(stack_outputs(), session=requests.Session(), endpoint=server)
    by_api = refresh(api, load_catalog(), regions, now, tmp_path / "api")
    vertex, compute = tmp_path / "vertex.json", tmp_path / "compute.json"
    half = len(SKUS) // 2
    other = {"name": "services/95FF-2EF5-5EA1/skus/0000-0000-0001", "skuId": "0000-0000-0001"}
    vertex.write_text(
        json.dumps([{"skus": SKUS[:half], "nextPageToken": "x"}, {"skus": SKUS[half:]}])
    )
    compute.write_text(json.dumps({"skus": [*COMPUTE_SKUS, other], "nextPageToken": ""}))
    saved = SavedCatalog([vertex, compute])
    by_file = refresh(saved, load_catalog(), regions, now, tmp_path / "file")
    assert [p.name for p in by_file.written] == [p.name for p in by_api.written]
    for mine, theirs in zip(by_file.tables, by_api.tables, strict=True):
        assert (mine.machines, mine.accelerators) == (theirs.machines, theirs.accelerators)
        assert mine.source.endswith(f"skus, as saved in {vertex}, {compute}")
    assert by_file.matched.refused == [
        f"{compute}: SKU 0000-0000-0001 names service 95FF-2EF5-5EA1"
    ]


@pytest.mark.parametrize(
    ("content", "said"),
    [
        ("[1, 2]", "not a services.skus.list answer"),
        ('{"skus": 3}', "answered skus as a int, not a list"),
        ("[" * 5000 + "]" * 5000, "JSON nested more than 64 levels deep"),
        ("{", "not JSON"),
    ],
)
def test_a_saved_file_that_is_no_answer_is_refused_in_one_line(
    tmp_path, content: str, said: str
) -> None:
    from jobs.pricing.refresh import SavedCatalog

    path = tmp_path / "skus.json"
    path.write_text(content)
    with pytest.raises(PricesUnavailable, match=said) as caught:
        SavedCatalog([path])
    assert "\n" not in str(caught.value)
