"""The live quota preflight: what a job needs (``CostEstimate.quota``) against the project's
Vertex training quota now, read before submitting so that a 429 naming a metric is said before
the job is sent, not after.

- Limits come from the Cloud Quotas API v1 (``quotaInfos.list`` of aiplatform.googleapis.com,
  https://cloud.google.com/docs/quotas/reference/rest/v1/projects.locations.services.quotaInfos/list).
  The local platform serves the same path under its ``vertex_endpoint``.
- Cloud Quotas gives limits, not usage. What is in use is counted here: the CustomJobs of the
  stack's project and region that have not ended (QUEUED included, see ``holds_quota``),
  each pool's accelerators (or vCPUs) x replicas, by the same ``quota_needed`` that prices a new
  job. Hyperparameter tuning jobs, training pipelines and persistent resources draw on the same
  quota and are not counted: "free" can be smaller than shown, never larger.

Plain REST (requests + google-auth, as ``jobs.vertex.rest.VertexRest``) rather than Google's
``google-cloud-quotas``: that library is kept (0.6.3, 2026-10) but gRPC-first: it adds grpcio,
proto-plus and api-core's gRPC extra as dependencies for one paged GET, and importing its client
takes longer than requests + google-auth (measured: bench/RESULTS.md, "Figures from code comments",
Local platform and CLI), which matters to `vtx quota` and `vtx cost` (they import no aiplatform).
The local platform serves the same REST path, so one URL covers both. This module shares
``jobs.vertex.rest``'s session, paging and error reading (`jobs.vertex.google_session`) but not
its retries or its errors: a preflight that cannot read the quota says why and lets the launch
go on, so none of its failures are ``VertexError``s."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any

from jobs.core.catalog import Catalog
from jobs.core.stack import StackOutputs
from jobs.core.states import FINAL, is_final
from jobs.custom_jobs.facts import facts_from_rest_job
from jobs.quota.needed import quota_needed
from jobs.vertex.google_session import NotAuthenticated, error_said, follow_pages, rest_session

SERVICE = "aiplatform.googleapis.com"
TRAINING_METRIC_PREFIX = f"{SERVICE}/custom_model_training_"
"""The metrics Vertex custom training draws on (GPUs, TPU chips, vCPUs), as in the catalog."""
CLOUD_QUOTAS = "https://cloudquotas.googleapis.com"
TIMEOUT_S = (5.0, 20.0)
"""(connect, read) seconds: a preflight that cannot connect in 5 s says so, and the launch goes
on."""
PAGE_SIZE = 100
UNLIMITED = -1
"""Cloud Quotas' "unlimited" (QuotaConfig.preferredValue: "If set to -1, it means the value is
unlimited")."""


class QuotaUnavailable(Exception):
    """The quota could not be read: the reason the plan prints after "quota: not checked"."""


# ---- what the project has ---------------------------------------------------------------------


@dataclass(frozen=True)
class QuotaLimit:
    """One metric's limit in one region, as Cloud Quotas reports it."""

    metric: str
    quota_id: str
    region: str
    limit: int | None
    """None: unlimited."""


def _value(details: object) -> int | None:
    """QuotaDetails.value: an int64, so a string in JSON, left out when 0 (proto3)."""
    raw = details.get("value", 0) if isinstance(details, dict) else 0
    try:
        value = int(str(raw))
    except ValueError:
        return 0
    return None if value == UNLIMITED else value


def region_value(info: dict, region: str) -> tuple[bool, int | None]:
    """(found, limit) of a QuotaInfo in ``region``. ``dimensionsInfos`` go from the most specific
    to the least: an entry naming the region wins; an entry without a region dimension applies to
    every region its ``applicableLocations`` list (all when none) that no entry names."""
    fallback: tuple[bool, int | None] = (False, None)
    for entry in info.get("dimensionsInfos") or []:
        if not isinstance(entry, dict):
            continue
        dimensions = entry.get("dimensions") or {}
        if dimensions.get("region") == region:
            return True, _value(entry.get("details"))
        locations = entry.get("applicableLocations") or []
        applies = not locations or region in locations
        if "region" not in dimensions and applies and not fallback[0]:
            fallback = (True, _value(entry.get("details")))
    return fallback


def region_limits(
    infos: Iterable[dict], region: str, preferred_ids: dict[str, str] | None = None
) -> dict[str, QuotaLimit]:
    """Metric -> limit in ``region`` for the Vertex training metrics. Where several quotas share a
    metric, the one per region wins, and among those the id the catalog expects
    (``preferred_ids``: metric -> quota id)."""
    preferred_ids = preferred_ids or {}
    chosen: dict[str, tuple[int, QuotaLimit]] = {}
    for info in infos:
        metric = str(info.get("metric", ""))
        if not metric.startswith(TRAINING_METRIC_PREFIX):
            continue
        found, value = region_value(info, region)
        if not found:
            continue
        quota_id = str(info.get("quotaId", ""))
        rank = ("region" in (info.get("dimensions") or [])) + 2 * (
            preferred_ids.get(metric) == quota_id
        )
        if metric not in chosen or rank > chosen[metric][0]:
            chosen[metric] = (rank, QuotaLimit(metric, quota_id, region, value))
    return {metric: limit for metric, (_, limit) in chosen.items()}


def holds_quota(job: dict) -> bool:
    """Whether a REST CustomJob holds its quota: until it has ended (`jobs.core.states.FINAL`),
    QUEUED too: Vertex checks quota when a job is created (a 429 refuses it), so a created job
    has been counted against it; the local platform holds it the same way, from creation to the
    end."""
    return not is_final(job.get("state", ""))


def in_use(jobs: Iterable[dict], catalog: Catalog) -> dict[str, int]:
    """Metric -> units held by the given REST CustomJobs (those in one region): each pool's
    accelerators and vCPUs x replicas, counted as a new job's needs are."""
    held: dict[str, int] = defaultdict(int)
    for job in jobs:
        if holds_quota(job):
            for metric, units in quota_needed(facts_from_rest_job(job), catalog).items():
                held[metric] += units
    return dict(held)


# ---- what to ask for ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Preference:
    """The quota preference that would raise a metric: infra/components/capacity/quotas.py creates
    it from a ``vtx:platform.quotas[]`` entry (tests/infra pins the id to infra's)."""

    accelerator: str
    spot: bool
    region: str
    count: int
    quota_id: str | None
    """The API's id when it differs from the catalog's (the stanza must then name it)."""

    @property
    def preference_id(self) -> str:
        """infra.components.capacity.quotas.QuotaTarget.preference_id, which jobs/ cannot import
        (infra is above it)."""
        kind = "spot" if self.spot else "ondemand"
        return f"vtx-{self.accelerator.lower().replace('_', '-')}-{kind}-{self.region}"

    @property
    def stanza(self) -> str:
        """The ``vtx:platform.quotas[]`` entry, as one YAML flow mapping."""
        quota_id = f", quota_id: {self.quota_id}" if self.quota_id else ""
        return (
            f"{{accelerator: {self.accelerator}, count: {self.count}, "
            f"spot: {str(self.spot).lower()}, region: {self.region}{quota_id}}}"
        )


def accelerator_of(metric: str, catalog: Catalog) -> tuple[str, bool] | None:
    """(accelerator, spot) whose GPU quota is ``metric``; None for vCPUs and TPUs, which infra
    does not request."""
    for acc in catalog.accelerators.values():
        for spot in (False, True):
            if acc.cloud_quota_id(spot) is not None and acc.metric(spot) == metric:
                return acc.name, spot
    return None


def catalog_quota_ids(catalog: Catalog) -> dict[str, str]:
    """Metric -> the Cloud Quotas id the catalog (and so infra) names for it."""
    ids: dict[str, str] = {}
    for acc in catalog.accelerators.values():
        for spot in (False, True):
            quota_id = acc.cloud_quota_id(spot)
            if quota_id is not None:
                ids[acc.metric(spot)] = quota_id
    return ids


# ---- the comparison -----------------------------------------------------------------------------

OK, SHORT_NOW, OVER_LIMIT, NOT_LISTED = "ok", "short now", "over limit", "not listed"


@dataclass(frozen=True)
class MetricCheck:
    metric: str
    needed: int
    limit: int | None
    """None: unlimited, or not listed (see ``listed``)."""
    in_use: int
    listed: bool
    """False when Cloud Quotas lists no quota for this metric in the region."""
    quota_id: str | None
    """The id Cloud Quotas reports (None when not listed)."""
    preference: Preference | None = None
    """What to request when the job does not fit; None when it fits or infra cannot ask."""

    @property
    def free(self) -> int | None:
        return None if self.limit is None else max(self.limit - self.in_use, 0)

    @property
    def verdict(self) -> str:
        if not self.listed:
            return NOT_LISTED
        if self.limit is not None and self.needed > self.limit:
            return OVER_LIMIT
        if self.free is not None and self.needed > self.free:
            return SHORT_NOW
        return OK


@dataclass(frozen=True)
class QuotaCheck:
    """The preflight of one job in one region, or why it was not done (``skipped``)."""

    region: str
    metrics: list[MetricCheck]
    skipped: str | None = None

    @property
    def over_limit(self) -> list[MetricCheck]:
        """Metrics whose limit is below the job's need: Vertex refuses the job whatever runs."""
        return [m for m in self.metrics if m.verdict == OVER_LIMIT]

    @property
    def short_now(self) -> list[MetricCheck]:
        """Metrics within the limit but above what is free: the job waits for running jobs."""
        return [m for m in self.metrics if m.verdict == SHORT_NOW]


def _preference(
    metric: str, needed: int, used: int, limit: QuotaLimit | None, region: str, catalog: Catalog
) -> Preference | None:
    found = accelerator_of(metric, catalog)
    if found is None:
        return None
    accelerator, spot = found
    expected = catalog_quota_ids(catalog).get(metric)
    api_id = limit.quota_id if limit is not None and limit.quota_id != expected else None
    # Enough for this job beside what runs now.
    return Preference(accelerator, spot, region, needed + used, api_id)


def compare(
    needed: dict[str, int],
    limits: dict[str, QuotaLimit],
    used: dict[str, int],
    region: str,
    catalog: Catalog,
) -> QuotaCheck:
    """Each metric the job needs against its limit and what is free now (pure)."""
    checks = []
    for metric, units in sorted(needed.items()):
        if units <= 0:
            continue
        limit = limits.get(metric)
        check = MetricCheck(
            metric=metric,
            needed=units,
            limit=limit.limit if limit else None,
            in_use=used.get(metric, 0),
            listed=limit is not None,
            quota_id=limit.quota_id if limit else None,
        )
        if check.verdict in (OVER_LIMIT, SHORT_NOW):
            preference = _preference(metric, units, check.in_use, limit, region, catalog)
            check = replace(check, preference=preference)
        checks.append(check)
    return QuotaCheck(region, checks)


# ---- reading it ---------------------------------------------------------------------------------


def _session(stack: StackOutputs) -> Any:
    try:
        return rest_session(stack)
    except NotAuthenticated as exc:
        raise QuotaUnavailable(str(exc)) from exc


_OS_ERROR = re.compile(r"\[Errno -?\d+\] [^'\")\]]+|timed out|Name or service not known")


def _why(exc: Exception) -> str:
    """The words that matter in requests' nested connection errors ("[Errno 111] Connection
    refused", "timed out"), not the whole pool's repr."""
    found = _OS_ERROR.search(str(exc))
    return found.group(0).strip() if found else str(exc)[:200]


def _error(response: Any) -> str:
    said = error_said(response)
    if said is None:
        said = response.reason or ""
    return f"HTTP {response.status_code} {said}".strip()


class QuotaReader:
    """Cloud Quotas' quotaInfos and the region's CustomJobs over plain REST, one try each: a
    preflight is worth a few seconds at most, never a retry loop."""

    def __init__(
        self, stack: StackOutputs, session: Any = None, endpoint: str | None = None
    ) -> None:
        """``endpoint`` serves both APIs' paths (tests, a proxy); by default the local platform's
        for a local stack, else Google's."""
        self.stack = stack
        if session is not None:
            self.session = session
        local = (endpoint or stack.vertex_endpoint or "").rstrip("/")
        self.quotas_url = (local or CLOUD_QUOTAS) + (
            f"/v1/projects/{stack.project}/locations/global/services/{SERVICE}/quotaInfos"
        )
        self.vertex_url = local or "https://{region}-aiplatform.googleapis.com"

    @cached_property
    def session(self) -> Any:
        """The stack's REST session, made on first use."""
        return _session(self.stack)

    def _pages(self, url: str, key: str, params: dict[str, Any]) -> list[dict]:
        pages = follow_pages(
            lambda query: self._page(url, query), {**params, "pageSize": PAGE_SIZE}
        )
        return [i for page in pages for i in page.get(key) or [] if isinstance(i, dict)]

    def _page(self, url: str, params: dict[str, Any]) -> dict:
        import requests
        from google.auth.exceptions import GoogleAuthError

        try:
            response = self.session.get(url, params=params, timeout=TIMEOUT_S)
        except requests.RequestException as exc:
            raise QuotaUnavailable(f"cannot reach {url.split('/v1/')[0]}: {_why(exc)}") from exc
        except GoogleAuthError as exc:  # a login that lapsed and cannot be refreshed
            raise QuotaUnavailable(f"not authenticated: {exc}") from exc
        if not response.ok:
            raise QuotaUnavailable(f"{_error(response)} from {url.split('?')[0]}")
        try:
            page = response.json()
        except ValueError:
            page = None
        if not isinstance(page, dict):
            raise QuotaUnavailable(f"{url} did not answer with a JSON object")
        return page

    def quota_infos(self) -> list[dict]:
        """Every QuotaInfo of aiplatform.googleapis.com in the project (all regions)."""
        return self._pages(self.quotas_url, "quotaInfos", {})

    def jobs(self, region: str) -> list[dict]:
        """The region's CustomJobs that may hold quota (the filter runs here too: a server that
        ignores it still gives the right answer)."""
        base = self.vertex_url.format(region=region)
        url = f"{base}/v1/projects/{self.stack.project}/locations/{region}/customJobs"
        wanted = " AND ".join(f'state!="{state}"' for state in sorted(FINAL))
        return [j for j in self._pages(url, "customJobs", {"filter": wanted}) if holds_quota(j)]


@dataclass(frozen=True)
class RegionQuota:
    """A region's Vertex training limits and what the region's jobs hold (``vtx quota``)."""

    region: str
    limits: dict[str, QuotaLimit]
    in_use: dict[str, int]


def read_regions(reader: QuotaReader, regions: list[str], catalog: Catalog) -> list[RegionQuota]:
    """Limits and usage in each region (the project's quotaInfos are read once, for all);
    QuotaUnavailable when either cannot be read."""
    infos = reader.quota_infos()
    ids = catalog_quota_ids(catalog)
    return [
        RegionQuota(region, region_limits(infos, region, ids), in_use(reader.jobs(region), catalog))
        for region in regions
    ]


def preflight(
    needed: dict[str, int], region: str, reader: QuotaReader, catalog: Catalog
) -> QuotaCheck:
    """The job's needs against the live quota; never raises for an unreadable quota: the check
    comes back ``skipped`` with the reason, and the launch goes on."""
    try:
        (quota,) = read_regions(reader, [region], catalog)
    except QuotaUnavailable as exc:
        return QuotaCheck(region, [], skipped=str(exc))
    return compare(needed, quota.limits, quota.in_use, region, catalog)
