"""The Cloud Billing Catalog API's ``services.skus.list`` (v1) for Vertex AI's and Compute Engine's
services, from the local platform's stand-in (jobs/local/platform/billing_catalog.py): ``GET
/v1/services/{service}/skus`` with ``currencyCode``, ``pageSize`` (at most 5,000, the API's page
limit) and ``pageToken``, answering ``skus`` and ``nextPageToken`` ("" on the last page). Like
the quota routes it takes no token: a billing client sends none here."""

from __future__ import annotations

from fastapi import FastAPI, Query
from fastapi.responses import JSONResponse

from jobs.local.platform.billing_catalog import CURRENCY, SERVICES
from jobs.local.platform.guard import error_body

MAX_PAGE_SIZE = 5000


def _error(http_code: int, status: str, message: str) -> JSONResponse:
    return JSONResponse(error_body(http_code, message, status), http_code)


def add_billing_routes(app: FastAPI) -> None:
    @app.get("/v1/services/{service}/skus", response_model=None)
    def list_skus(
        service: str,
        currencyCode: str = CURRENCY,
        pageSize: int = Query(MAX_PAGE_SIZE, ge=0, le=2**31 - 1),
        pageToken: str = "",
    ) -> dict | JSONResponse:
        if service not in SERVICES:
            served = " and ".join(SERVICES)
            message = f"service {service!r} is not served here: only {served}"
            return _error(404, "NOT_FOUND", message)
        if currencyCode != CURRENCY:
            message = f"currencyCode {currencyCode!r}: the local stand-in prices in {CURRENCY} only"
            return _error(400, "INVALID_ARGUMENT", message)
        found = SERVICES[service]()
        if pageToken and not (pageToken.isdigit() and int(pageToken) < len(found)):
            message = f"invalid pageToken {pageToken!r}: pass the nextPageToken given"
            return _error(400, "INVALID_ARGUMENT", message)
        start = int(pageToken or 0)
        end = start + (min(pageSize, MAX_PAGE_SIZE) or MAX_PAGE_SIZE)
        return {
            "skus": found[start:end],
            "nextPageToken": str(end) if end < len(found) else "",
        }
