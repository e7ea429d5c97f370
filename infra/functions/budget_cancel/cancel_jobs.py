"""A team's budget notification in, that team's running and queued Vertex jobs cancelled.

Cloud Billing publishes a budget's state to its Pub/Sub topic several times a day, whatever the
thresholds ("Set up programmatic notifications",
https://cloud.google.com/billing/docs/how-to/budgets-programmatic-notifications). The message's
attributes are ``billingAccountId``, ``budgetId`` and ``schemaVersion`` ("1.0"); its data is
base64 JSON with ``budgetDisplayName``, ``costAmount``, ``costIntervalStart``, ``budgetAmount``,
``budgetAmountType``, ``currencyCode`` and, once a threshold rule is crossed,
``alertThresholdExceeded`` / ``forecastThresholdExceeded``.

The decision reads ``costAmount / budgetAmount`` only: a forecast never cancels anything, and
neither does a threshold field (the function cancels at its own ``cancel_at``, which the stack
sets from the team's config). Past it, every HyperparameterTuningJob and CustomJob labelled with
the team, in each region the stack runs jobs in, that is queued, pending or running is cancelled.
Studies go first: a study whose trials alone were cancelled would start others.

Idempotent: a job already cancelling or ended is not listed again, and one that ends between the
list and the cancel answers FAILED_PRECONDITION, which is taken as done; a redelivered message
cancels only what is still running. A message for an earlier month's interval (a late
redelivery) is ignored: that month's spend says nothing of this month's jobs. Budget months are
calendar months of US Pacific time, daylight saving included (the month is judged in
``America/Los_Angeles``, never at a fixed offset).

A message that is not a notification this function can act on (not a Pub/Sub message, data that
is not base64 JSON, an amount that is not a finite non-negative number, an interval that starts
in the future) cancels nothing: it is acknowledged with one log line saying why, since raising
would only make Pub/Sub deliver the same message again, for ever.

Deployed alone (it must not share the controller's failure modes): the standard library, a
``requests``-style session (``google.auth``'s AuthorizedSession in the cloud), and the cancel
act itself, ``jobs/control/cancels.py``, which the controller uses too and this function's
archive carries (stdlib-only; ``infra/components/team_budgets.py`` zips it in).
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol
from zoneinfo import ZoneInfo

# The one module of ours the function carries (its archive holds it at this path).
from jobs.control.cancels import COLLECTIONS, cancel_active

PAGE_SIZE = 100
# Budget periods begin at midnight US Pacific time (Cloud Billing Budget API's Filter), whose
# offset is -8 h in winter and -7 h in summer: the month is judged in the zone itself.
PACIFIC = ZoneInfo("America/Los_Angeles")
# An interval that began up to a day before this Pacific month's first midnight is still this
# month's (a start written at another offset); a month-old one is an earlier month's.
INTERVAL_SLACK = timedelta(days=1)
SHOWN_CHARS = 200
"""How much of a value a log line quotes (a junk message may carry megabytes)."""


class NotificationError(ValueError):
    """The message is not a budget notification this function can read."""


class ListError(RuntimeError):
    """Vertex answered a list with an error."""


class Response(Protocol):
    status_code: int
    text: str

    def json(self) -> Any: ...


class Session(Protocol):
    """What is used of a ``requests.Session`` (google.auth's AuthorizedSession is one)."""

    def get(self, url: str, *, params: Mapping[str, Any], timeout: float) -> Response: ...

    def post(self, url: str, *, json: Mapping[str, Any], timeout: float) -> Response: ...


@dataclass(frozen=True)
class Settings:
    """What the stack tells the function in its environment (``infra/components/team_budgets``)."""

    project: str
    regions: tuple[str, ...]
    team: str
    label: str
    """The label key jobs carry their team in (the stack passes jobs' ``vtx-team``)."""
    cancel_at: float
    """Fraction of the budget's amount past which the team's jobs are cancelled."""
    endpoint: str | None = None
    """Vertex's API root for every region (the local platform in tests); None: Google's
    regional endpoints, ``https://REGION-aiplatform.googleapis.com``."""

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> Settings:
        missing = [k for k in ("VTX_PROJECT", "VTX_REGIONS", "VTX_TEAM") if not environ.get(k)]
        if missing:
            raise NotificationError(f"the function's environment lacks {', '.join(missing)}")
        return cls(
            project=environ["VTX_PROJECT"],
            regions=tuple(r for r in environ["VTX_REGIONS"].split(",") if r),
            team=environ["VTX_TEAM"],
            label=environ.get("VTX_TEAM_LABEL", "vtx-team"),
            cancel_at=float(environ.get("VTX_CANCEL_AT", "1.0")),
            endpoint=environ.get("VTX_VERTEX_ENDPOINT") or None,
        )

    def api_root(self, region: str) -> str:
        return (self.endpoint or f"https://{region}-aiplatform.googleapis.com").rstrip("/")


@dataclass(frozen=True)
class Notification:
    budget: str
    budget_id: str | None
    cost: float
    amount: float
    currency: str
    interval_start: datetime
    alert_threshold: float | None
    forecast_threshold: float | None

    @property
    def spent(self) -> float:
        """The fraction of the budget's amount spent so far in the interval (of a zero
        budget: all of it once anything is spent)."""
        if self.amount > 0:
            return self.cost / self.amount
        return float("inf") if self.cost > 0 else 0.0


def shown(value: Any) -> str:
    """``repr(value)`` cut to SHOWN_CHARS, for a log line."""
    text = repr(value)
    return text if len(text) <= SHOWN_CHARS else f"{text[:SHOWN_CHARS]}... ({len(text)} chars)"


def _number(data: Mapping[str, Any], key: str) -> float:
    """A finite, non-negative amount: NaN, an infinity or a negative figure is no cost or budget
    Cloud Billing writes, and acting on one would cancel (or spare) jobs on a corrupt message."""
    value = data.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise NotificationError(f"{key} is {shown(value)}, not a number")
    try:
        number = float(value)
    except OverflowError:  # an integer too large for a float
        raise NotificationError(f"{key} is {shown(value)}, too large to be an amount") from None
    if not math.isfinite(number) or number < 0:
        raise NotificationError(f"{key} is {shown(value)}, not a finite non-negative number")
    return number


def _optional_number(data: Mapping[str, Any], key: str) -> float | None:
    return _number(data, key) if data.get(key) is not None else None


def _json_object(message: Mapping[str, Any]) -> dict[str, Any]:
    raw = message.get("data") or ""
    if not isinstance(raw, str | bytes):
        raise NotificationError(f"data is {type(raw).__name__} {shown(raw)}, not base64 text")
    try:
        # RecursionError: JSON nested deeper than the interpreter's stack (a hostile message).
        data = json.loads(base64.b64decode(raw, validate=True))
    except (binascii.Error, ValueError, RecursionError) as exc:
        raise NotificationError(f"data is not base64 JSON: {shown(str(exc))}") from None
    if not isinstance(data, dict):
        raise NotificationError("data is not a JSON object")
    return data


def _interval_start(data: Mapping[str, Any]) -> datetime:
    raw = data.get("costIntervalStart")
    try:
        start = datetime.fromisoformat(raw) if isinstance(raw, str) else None
    except ValueError:
        start = None
    if start is None:
        raise NotificationError(f"costIntervalStart is {shown(raw)}, not an RFC 3339 time")
    return start if start.tzinfo else start.replace(tzinfo=UTC)


def decode(message: Any) -> Notification:
    """The Pub/Sub message (``data`` base64, ``attributes``) as a Notification."""
    if not isinstance(message, Mapping):
        raise NotificationError(
            f"the message is {type(message).__name__} {shown(message)}, not a Pub/Sub message "
            f'object ({{"data": ..., "attributes": ...}})'
        )
    attributes = message.get("attributes") or {}
    if not isinstance(attributes, Mapping):
        raise NotificationError(f"attributes is {shown(attributes)}, not a map")
    data = _json_object(message)
    version = attributes.get("schemaVersion")
    if version not in (None, "1.0"):
        raise NotificationError(f"schemaVersion {shown(version)}: this function reads 1.0")
    start = _interval_start(data)
    return Notification(
        budget=str(data.get("budgetDisplayName", ""))[:SHOWN_CHARS],
        budget_id=budget_id if isinstance(budget_id := attributes.get("budgetId"), str) else None,
        cost=_number(data, "costAmount"),
        amount=_number(data, "budgetAmount"),
        currency=str(data.get("currencyCode", "")),
        interval_start=start,
        alert_threshold=_optional_number(data, "alertThresholdExceeded"),
        forecast_threshold=_optional_number(data, "forecastThresholdExceeded"),
    )


def is_current(notification: Notification, now: datetime) -> bool:
    """Whether the notification is about this month's budget interval, not a late earlier one."""
    month_start = now.astimezone(PACIFIC).replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    return notification.interval_start >= month_start - INTERVAL_SLACK


def check_interval(notification: Notification, now: datetime) -> None:
    """An interval that has not begun yet is no spend: the message is corrupt or forged."""
    if notification.interval_start > now:
        raise NotificationError(
            f"costIntervalStart {notification.interval_start.isoformat()} is in the future "
            f"(now {now.isoformat()})"
        )


def log(severity: str, message: str, **fields: Any) -> None:
    """One structured line: Cloud Logging reads ``severity`` and ``message`` of JSON stdout."""
    print(json.dumps({"severity": severity, "message": message, **fields}), flush=True)


def _check(response: Response, what: str) -> None:
    if response.status_code >= 400:
        raise ListError(f"{what}: HTTP {response.status_code} {response.text[:500]}")


def team_jobs(session: Session, settings: Settings, region: str, collection: str) -> Iterator[dict]:
    """Every job of ``collection`` in ``region`` labelled with the team, all pages."""
    parent = f"projects/{settings.project}/locations/{region}"
    url = f"{settings.api_root(region)}/v1/{parent}/{collection}"
    params: dict[str, Any] = {
        "filter": f'labels.{settings.label}="{settings.team}"',
        "pageSize": PAGE_SIZE,
    }
    while True:
        response = session.get(url, params=params, timeout=60)
        _check(response, f"listing {collection} in {region}")
        page = response.json()
        yield from page.get(collection) or []
        token = page.get("nextPageToken")
        if not token:
            return
        params["pageToken"] = token


def poster(session: Session, settings: Settings, region: str) -> Callable[[str], tuple[int, str]]:
    """One ``:cancel`` in ``region`` through the session, as `jobs.control.cancels` asks."""

    def post(name: str) -> tuple[int, str]:
        url = f"{settings.api_root(region)}/v1/{name}:cancel"
        response = session.post(url, json={}, timeout=60)
        return response.status_code, response.text

    return post


def message_of(event_data: Any) -> Any:
    """The Pub/Sub message of an Eventarc delivery (MessagePublishedData: ``message`` and
    ``subscription``); anything else is handed on as it is, for ``decode`` to refuse by name."""
    return event_data.get("message") if isinstance(event_data, Mapping) else event_data


def handle(
    message: Any,
    settings: Settings,
    session: Session,
    now: datetime | None = None,
) -> list[str]:
    """Act on one notification; the names of the jobs cancelled (none when under budget, and
    none for a message that is not a notification this function can act on)."""
    now = now or datetime.now(UTC)
    try:
        notification = decode(message)
        check_interval(notification, now)
    except NotificationError as exc:
        log("WARNING", f"not a budget notification to act on, nothing cancelled: {exc}")
        return []
    seen = {
        "team": settings.team,
        "budget": notification.budget,
        "cost": notification.cost,
        "amount": notification.amount,
        "currency": notification.currency,
        "spent": round(notification.spent, 4),
        "cancel_at": settings.cancel_at,
    }
    if not is_current(notification, now):
        log("INFO", "an earlier interval's notification: nothing to do", **seen)
        return []
    if notification.spent < settings.cancel_at:
        log("INFO", "under the team's cancel threshold: nothing cancelled", **seen)
        return []
    cancelled = []
    for region in settings.regions:
        for collection in COLLECTIONS:  # studies first: listed and cancelled before the jobs
            found = team_jobs(session, settings, region, collection)
            for name in cancel_active(poster(session, settings, region), found):
                cancelled.append(name)
                log("NOTICE", "cancelled: the team's budget is spent", job=name, **seen)
    log("NOTICE", f"over the team's budget: {len(cancelled)} job(s) cancelled", **seen)
    return cancelled
