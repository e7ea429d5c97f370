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
redelivery) is ignored: that month's spend says nothing of this month's jobs.

Self-contained on purpose (the function is deployed alone): the standard library and a
``requests``-style session (``google.auth``'s AuthorizedSession in the cloud) only.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

ACTIVE_STATES = frozenset({"JOB_STATE_QUEUED", "JOB_STATE_PENDING", "JOB_STATE_RUNNING"})
"""States a job still spends (or is about to) in; CANCELLING is on its way out already."""
# Studies first: cancelling a study stops its trials; a trial cancelled alone is replaced.
COLLECTIONS = ("hyperparameterTuningJobs", "customJobs")
PAGE_SIZE = 100
# Budget periods begin at midnight US Pacific time (UTC-8, Cloud Billing Budget API's Filter):
# an interval that began before the day preceding this month's first is an earlier month's.
PACIFIC_OFFSET = timedelta(hours=8)


class NotificationError(ValueError):
    """The message is not a budget notification this function can read."""


class CancelError(RuntimeError):
    """Vertex answered a list or a cancel with an error other than "already ended"."""


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
        """The fraction of the budget's amount spent so far in the interval."""
        return self.cost / self.amount if self.amount > 0 else float("inf")


def _number(data: Mapping[str, Any], key: str) -> float:
    value = data.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise NotificationError(f"{key} is {value!r}, not a number")
    return float(value)


def _optional_number(data: Mapping[str, Any], key: str) -> float | None:
    return _number(data, key) if data.get(key) is not None else None


def decode(message: Mapping[str, Any]) -> Notification:
    """The Pub/Sub message (``data`` base64, ``attributes``) as a Notification."""
    try:
        data = json.loads(base64.b64decode(message.get("data") or "", validate=True))
    except (binascii.Error, ValueError) as exc:
        raise NotificationError(f"data is not base64 JSON: {exc}") from None
    if not isinstance(data, dict):
        raise NotificationError("data is not a JSON object")
    attributes = message.get("attributes") or {}
    version = attributes.get("schemaVersion")
    if version not in (None, "1.0"):
        raise NotificationError(f"schemaVersion {version!r}: this function reads 1.0")
    try:
        start = datetime.fromisoformat(str(data.get("costIntervalStart")))
    except ValueError:
        raise NotificationError(
            f"costIntervalStart is {data.get('costIntervalStart')!r}, not an RFC 3339 time"
        ) from None
    return Notification(
        budget=str(data.get("budgetDisplayName", "")),
        budget_id=attributes.get("budgetId"),
        cost=_number(data, "costAmount"),
        amount=_number(data, "budgetAmount"),
        currency=str(data.get("currencyCode", "")),
        interval_start=start if start.tzinfo else start.replace(tzinfo=UTC),
        alert_threshold=_optional_number(data, "alertThresholdExceeded"),
        forecast_threshold=_optional_number(data, "forecastThresholdExceeded"),
    )


def is_current(notification: Notification, now: datetime) -> bool:
    """Whether the notification is about this month's budget interval, not a late earlier one."""
    pacific = now - PACIFIC_OFFSET
    earliest = datetime(pacific.year, pacific.month, 1, tzinfo=UTC) - timedelta(days=1)
    return notification.interval_start >= earliest


def log(severity: str, message: str, **fields: Any) -> None:
    """One structured line: Cloud Logging reads ``severity`` and ``message`` of JSON stdout."""
    print(json.dumps({"severity": severity, "message": message, **fields}), flush=True)


def _check(response: Response, what: str) -> None:
    if response.status_code >= 400:
        raise CancelError(f"{what}: HTTP {response.status_code} {response.text[:500]}")


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


def cancel(session: Session, settings: Settings, region: str, name: str) -> bool:
    """Cancel one job; False when it had ended (or gone) meanwhile, which is just as good."""
    response = session.post(f"{settings.api_root(region)}/v1/{name}:cancel", json={}, timeout=60)
    if response.status_code == 404:
        return False
    if response.status_code == 400 and "FAILED_PRECONDITION" in response.text:
        return False
    _check(response, f"cancelling {name}")
    return True


def handle(
    message: Mapping[str, Any],
    settings: Settings,
    session: Session,
    now: datetime | None = None,
) -> list[str]:
    """Act on one notification; the names of the jobs cancelled (none when under budget)."""
    notification = decode(message)
    seen = {
        "team": settings.team,
        "budget": notification.budget,
        "cost": notification.cost,
        "amount": notification.amount,
        "currency": notification.currency,
        "spent": round(notification.spent, 4),
        "cancel_at": settings.cancel_at,
    }
    if not is_current(notification, now or datetime.now(UTC)):
        log("INFO", "an earlier interval's notification: nothing to do", **seen)
        return []
    if notification.spent < settings.cancel_at:
        log("INFO", "under the team's cancel threshold: nothing cancelled", **seen)
        return []
    cancelled = []
    for region in settings.regions:
        for collection in COLLECTIONS:
            for job in team_jobs(session, settings, region, collection):
                if job.get("state") in ACTIVE_STATES and cancel(
                    session, settings, region, job["name"]
                ):
                    cancelled.append(job["name"])
                    log("NOTICE", "cancelled: the team's budget is spent", job=job["name"], **seen)
    log("NOTICE", f"over the team's budget: {len(cancelled)} job(s) cancelled", **seen)
    return cancelled
