"""The Cloud Billing Catalog API's ``services.skus.list`` (v1) for Vertex AI's and Compute Engine's
services, from the local platform's stand-in (jobs/local/platform/billing_catalog.py): ``GET
/v1/services/{service}/skus`` with ``currencyCode``, ``startTime``/``endTime``, ``pageSize`` (at
most 5,000, the API's page limit) and ``pageToken``, answering ``skus`` and ``nextPageToken`` (""
on the last page). The time range is checked as the discovery document describes it: optional
as a whole, no timestamp in the future, within one calendar month in America/Los_Angeles. Like
the quota routes it takes no token: a billing client sends none here."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from fastapi import FastAPI, Query
from fastapi.responses import JSONResponse

from jobs.local.platform.billing_catalog import (
    CONVERSION_RATES,
    CURRENCY,
    SERVICES,
    Pricing,
    latest_pricing,
)
from jobs.local.plumbing.guard import error_body

MAX_PAGE_SIZE = 5000
BILLING_MONTH_ZONE = ZoneInfo("America/Los_Angeles")
"""The time zone whose calendar month a time range must stay within (the discovery document)."""


def _pricing(currency: str, start: str, end: str) -> Pricing | str:
    """How to price this answer, or why the request is refused (the API's INVALID_ARGUMENT)."""
    if currency not in CONVERSION_RATES:
        served = ", ".join(CONVERSION_RATES)
        return f"currencyCode {currency!r}: the local stand-in converts to {served} only"
    if not start and not end:
        return latest_pricing(currency)
    if not (start and end):
        return "startTime and endTime go together: give both, or neither for the latest pricing"
    try:
        window = [datetime.fromisoformat(t.replace("Z", "+00:00")) for t in (start, end)]
    except ValueError:
        return f"startTime {start!r} / endTime {end!r}: not RFC 3339 timestamps"
    if any(t.tzinfo is None for t in window):
        return "startTime and endTime need a time zone (Z or an offset)"
    first, last = window
    if last > datetime.now(UTC):
        return "timestamps in the future are not allowed"
    if first >= last:
        return "startTime must be before endTime"
    months = {
        (t.astimezone(BILLING_MONTH_ZONE).year, t.astimezone(BILLING_MONTH_ZONE).month)
        for t in (first, last)
    }
    if len(months) > 1:
        return "the time range has to be within a single calendar month in America/Los_Angeles"
    return Pricing(first.astimezone(UTC), currency)


def _error(http_code: int, status: str, message: str) -> JSONResponse:
    return JSONResponse(error_body(http_code, message, status), http_code)


def add_billing_routes(app: FastAPI) -> None:
    @app.get("/v1/services/{service}/skus", response_model=None)
    def list_skus(
        service: str,
        currencyCode: str = CURRENCY,
        pageSize: int = Query(MAX_PAGE_SIZE, ge=0, le=2**31 - 1),
        pageToken: str = "",
        startTime: str = "",
        endTime: str = "",
    ) -> dict | JSONResponse:
        if service not in SERVICES:
            served = " and ".join(SERVICES)
            message = f"service {service!r} is not served here: only {served}"
            return _error(404, "NOT_FOUND", message)
        pricing = _pricing(currencyCode or CURRENCY, startTime, endTime)
        if isinstance(pricing, str):
            return _error(400, "INVALID_ARGUMENT", pricing)
        found = SERVICES[service](None, pricing)
        if pageToken and not (pageToken.isdigit() and int(pageToken) < len(found)):
            message = f"invalid pageToken {pageToken!r}: pass the nextPageToken given"
            return _error(400, "INVALID_ARGUMENT", message)
        start = int(pageToken or 0)
        end = start + (min(pageSize, MAX_PAGE_SIZE) or MAX_PAGE_SIZE)
        return {
            "skus": found[start:end],
            "nextPageToken": str(end) if end < len(found) else "",
        }
