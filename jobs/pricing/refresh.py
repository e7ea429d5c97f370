"""`vtx prices refresh`: the Cloud Billing Catalog API's SKUs of Vertex AI, matched to the
catalog's figures (`jobs.pricing.billing_skus`) and written as dated price tables into the
user's prices folder (`jobs.core.catalog.refreshed_prices_dir`), where the catalog loader
prefers them over the shipped tables when newer.

The API: ``GET https://cloudbilling.googleapis.com/v1/services/{SERVICE_ID}/skus`` with
``currencyCode``, ``pageSize`` and ``pageToken`` (answers ``skus`` and ``nextPageToken``, at most
5,000 SKUs a page; https://cloud.google.com/billing/v1/how-tos/catalog-api). It takes an API key
(``key=``) or OAuth credentials; without ``$VTX_BILLING_API_KEY`` the call goes through the same
session as `vtx quota` (application-default credentials; the local platform's own session for a
local stack, whose control plane serves the same path). Plain REST, as the quota reader, for
the same reasons (jobs/quota/cloud_quotas.py)."""

from __future__ import annotations

import os
import re
import tempfile
from collections import Counter, defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cached_property
from pathlib import Path
from typing import Any, Protocol

import yaml

from jobs.core.catalog import Catalog, PriceTable, refreshed_prices_dir
from jobs.core.stack import StackOutputs
from jobs.core.user_io import UserFileError, load_json_text, read_user_file, shown_path
from jobs.pricing.billing_skus import Matched, match, tables
from jobs.vertex.google_session import NotAuthenticated, follow_pages, rest_session

CLOUD_BILLING = "https://cloudbilling.googleapis.com"
VERTEX_SERVICE = "C7E2-9256-1C43"
"""Vertex AI's service id in the billing catalog."""
COMPUTE_SERVICE = "6F81-5844-456A"
"""Compute Engine's: read for its DWS Defined Duration SKUs, the VM half of a FLEX_START job's
price. Not for reservations: Vertex bills a reservation's VMs at the Compute Engine price the
project pays for that reservation (its committed-use discounts included), which no list price
says (docs/vertex-facts.md, "Billing catalog")."""
API_KEY_ENV = "VTX_BILLING_API_KEY"
"""An API key for the catalog (Google's how-to uses one); never a command-line option: any
user of the machine can read a command line."""
CURRENCY = "USD"
LOCAL_PREFIX = "billing-local"
"""The tables written from the local platform's stand-in are named apart."""
PAGE_SIZE = 5000
MAX_PAGES = 200
"""The most pages a catalog is read in: a service has tens of thousands of SKUs (a few pages of
5,000); a ``nextPageToken`` that never ends is cut off here with an error, not read for ever."""
TIMEOUT_S = (5.0, 60.0)


class PricesUnavailable(Exception):
    """The catalog could not be read: the message says why and what to do."""


class BillingCatalogReader:
    """One service's SKUs, every page, over plain REST (one try per page)."""

    def __init__(
        self, stack: StackOutputs, session: Any = None, endpoint: str | None = None
    ) -> None:
        """``endpoint``: a server with the API's paths (tests); by default the local platform's
        for a local stack, else Google's."""
        self.stack = stack
        self.base = (endpoint or stack.vertex_endpoint or CLOUD_BILLING).rstrip("/")
        self.api_key = None if stack.is_local else os.environ.get(API_KEY_ENV) or None
        if session is not None:
            self.session = session

    @property
    def is_local(self) -> bool:
        return self.stack.is_local

    def origin(self, service: str) -> str:
        """Where ``service``'s SKUs come from, as a table names its source."""
        if self.is_local:
            return (
                f"the local platform's billing catalog stand-in at {self.base} (not Google's "
                "prices)"
            )
        return f"{CLOUD_BILLING}/v1/services/{service}/skus"

    @cached_property
    def session(self) -> Any:
        """A plain session with an API key, else the stack's REST session; made on first use."""
        if self.api_key:
            import requests

            return requests.Session()
        try:
            return rest_session(self.stack)
        except NotAuthenticated as exc:
            raise PricesUnavailable(f"{exc}, or set {API_KEY_ENV}") from exc

    def skus(
        self, service: str, currency: str = CURRENCY, page_size: int = PAGE_SIZE
    ) -> list[object]:
        url = f"{self.base}/v1/services/{service}/skus"
        params: dict[str, Any] = {"currencyCode": currency, "pageSize": page_size}
        if self.api_key:
            params["key"] = self.api_key
        found: list[object] = []
        asked_with: str | None = None
        pages = follow_pages(lambda query: self._page(url, query), params)
        for number, page in enumerate(pages, start=1):
            found += _skus(page, url)
            token = page.get("nextPageToken")
            if not token:
                return found
            if not isinstance(token, str) or token == asked_with:
                raise PricesUnavailable(
                    f"{url} answered the nextPageToken {str(token)[:40]!r} again (or not as a "
                    "string): its pages do not end"
                )
            if number == MAX_PAGES:
                break
            asked_with = token
        raise PricesUnavailable(
            f"{url} still had a nextPageToken after {MAX_PAGES} pages of {page_size} SKUs "
            "(no service has that many): stopped reading; try again later"
        )

    def _page(self, url: str, params: dict[str, Any]) -> dict:
        import requests
        from google.auth.exceptions import GoogleAuthError

        try:
            response = self.session.get(url, params=params, timeout=TIMEOUT_S)
        except requests.RequestException as exc:
            raise PricesUnavailable(f"cannot reach {self.base}: {type(exc).__name__}") from exc
        except GoogleAuthError as exc:
            raise PricesUnavailable(f"not authenticated: {exc}") from exc
        return _page(response, url)


def _skus(page: dict, url: str) -> list[object]:
    """A page's SKUs, each as answered: one that is no SKU is refused by the matcher, saying
    why; a ``skus`` that is no list is the page's error."""
    skus = page.get("skus") or []
    if not isinstance(skus, list):
        raise PricesUnavailable(f"{url} answered skus as a {type(skus).__name__}, not a list")
    return skus


def _page(response: Any, url: str) -> dict:
    if not response.ok:
        try:
            said = str(load_json_text(response.content)["error"]["message"])[:500]
        except (ValueError, KeyError, TypeError):
            said = response.reason or ""
        raise PricesUnavailable(f"HTTP {response.status_code} {said} from {url}".strip())
    try:
        page = load_json_text(response.content)
    except ValueError as exc:  # not JSON, or nested past any real page (no RecursionError)
        raise PricesUnavailable(f"{url} did not answer with usable JSON: {exc}") from None
    if not isinstance(page, dict):
        raise PricesUnavailable(f"{url} did not answer with a JSON object")
    return page


class SavedCatalog:
    """``services.skus.list`` answers someone saved to files (for a stack with no egress, or a
    reviewer): one page per file, or a list of pages, of either service or both. Each SKU goes
    to its service by its ``name`` (``services/<id>/skus/<id>``), else by
    ``category.serviceDisplayName``; the matcher then reads them as it reads the API's, so the
    tables are the ones the API would have given (only their ``source`` says "as saved")."""

    is_local = False

    def __init__(self, paths: list[Path]) -> None:
        self.paths = paths
        self.refused: list[str] = []
        self._found: dict[str, list[object]] = {VERTEX_SERVICE: [], COMPUTE_SERVICE: []}
        pages = [page for path in paths for page in _saved_pages(path)]
        if len(pages) > MAX_PAGES:
            raise PricesUnavailable(f"{len(pages)} pages saved: at most {MAX_PAGES} are read")
        for shown, page in pages:
            for sku in _skus(page, shown):
                self._place(sku, shown)

    def _place(self, sku: object, shown: str) -> None:
        service = _service_of(sku)
        if service in self._found:
            self._found[service].append(sku)  # type: ignore[index]
        elif service is None and not isinstance(sku, dict):
            self._found[VERTEX_SERVICE].append(sku)  # refused by the matcher, saying why
        else:
            said = f"service {service}" if service else "no service (name or serviceDisplayName)"
            self.refused.append(f"{shown}: SKU {str(sku.get('skuId'))[:40]} names {said}")  # type: ignore[union-attr]

    def skus(self, service: str) -> list[object]:
        return self._found.get(service, [])

    def origin(self, service: str) -> str:
        files = ", ".join(shown_path(p) for p in self.paths)
        return f"{CLOUD_BILLING}/v1/services/{service}/skus, as saved in {files}"


MAX_SAVED_BYTES = 512 * 2**20
"""The most one saved file may hold: a service's whole catalog is tens of MB of JSON."""
SERVICE_NAMES = {"Vertex AI": VERTEX_SERVICE, "Compute Engine": COMPUTE_SERVICE}


def _saved_pages(path: Path) -> list[tuple[str, dict]]:
    """The pages in a saved file: one ``ListSkusResponse`` object, or a list of them."""
    shown = shown_path(path)
    try:
        data = read_user_file(
            path, MAX_SAVED_BYTES, stdin=True, too_big="split it into one file per page"
        )
        document = load_json_text(data)
    except UserFileError as exc:
        raise PricesUnavailable(str(exc)) from None
    except ValueError as exc:
        raise PricesUnavailable(f"{shown}: {exc}") from None
    pages = document if isinstance(document, list) else [document]
    if not all(isinstance(page, dict) for page in pages):
        raise PricesUnavailable(
            f"{shown}: not a services.skus.list answer (an object with skus, or a list of them)"
        )
    return [(shown, page) for page in pages]


def _service_of(sku: object) -> str | None:
    if not isinstance(sku, dict):
        return None
    name = sku.get("name")
    found = re.fullmatch(r"services/([^/]+)/skus/[^/]+", name) if isinstance(name, str) else None
    if found:
        return found.group(1)
    category = sku.get("category")
    shown = category.get("serviceDisplayName") if isinstance(category, dict) else None
    return SERVICE_NAMES.get(shown) if isinstance(shown, str) else None


@dataclass(frozen=True)
class Refresh:
    matched: Matched
    tables: list[PriceTable]
    written: list[Path]


class SkuSource(Protocol):
    """Where a refresh reads SKUs: the API (or the local stand-in), or saved answers."""

    is_local: bool

    def skus(self, service: str) -> list[object]: ...

    def origin(self, service: str) -> str: ...


def refresh(
    reader: SkuSource,
    catalog: Catalog,
    regions: list[str],
    now: datetime | None = None,
    directory: Path | None = None,
) -> Refresh:
    """Read Vertex AI's and Compute Engine's SKUs, match them and write one table per region
    and kind."""
    at = (now or datetime.now(UTC)).replace(microsecond=0)
    matched = match(
        reader.skus(VERTEX_SERVICE), catalog, regions, CURRENCY, reader.skus(COMPUTE_SERVICE)
    )
    matched.refused += getattr(reader, "refused", [])
    local = reader.is_local
    source = reader.origin(VERTEX_SERVICE)
    flex_start_source = (
        source
        if local
        else f"{reader.origin(COMPUTE_SERVICE)} (DWS Defined Duration) + {source} (management fee)"
    )
    found = tables(
        matched,
        regions,
        currency=CURRENCY,
        as_of=at.date().isoformat(),
        fetched_at=at.isoformat().replace("+00:00", "Z"),
        source=source,
        name_prefix=LOCAL_PREFIX if local else "billing",
        stand_in=local,
        flex_start_source=flex_start_source,
    )
    # A table without a figure would only hide the shipped one: it is not written.
    found = [t for t in found if t.machines or t.accelerators or t.disks]
    return Refresh(matched, found, write_tables(found, directory or refreshed_prices_dir()))


@dataclass(frozen=True)
class Coverage:
    """How much of the expected figures a refresh knows: (known, expected) per region and
    usage, and the most common reasons the rest are unknown."""

    known: dict[tuple[str, str], tuple[int, int]]
    reasons: list[tuple[str, int]]


def coverage(matched: Matched, top: int = 5) -> Coverage:
    counts: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    for key in matched.figures:
        counts[(key.region, key.usage)][0] += 1
        counts[(key.region, key.usage)][1] += 1
    for key in matched.unknown:
        counts[(key.region, key.usage)][1] += 1
    reasons = Counter(matched.unknown.values()).most_common(top)
    return Coverage({k: (v[0], v[1]) for k, v in sorted(counts.items())}, reasons)


def write_tables(found: list[PriceTable], directory: Path) -> list[Path]:
    """Each table as ``<name>.yaml``; a table of the same name (same day) is replaced. Each is
    written whole to a hidden file beside it and then renamed over it (``os.replace``, atomic):
    a refresh cut short leaves the old table or the new one, never half of one, and the
    catalog loader (which reads ``*.yaml`` only) never sees the hidden file."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        written = []
        for table in found:
            path = directory / f"{table.name}.yaml"
            document = table.model_dump(mode="json", exclude_none=True)
            _replace(path, yaml.safe_dump(document, sort_keys=False))
            written.append(path)
        return written
    except OSError as exc:
        raise PricesUnavailable(
            f"cannot write the tables into {directory}: {exc.strerror}"
        ) from exc


def _replace(path: Path, text: str) -> None:
    handle, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
