"""What a persistent resource (warm pool) is doing: its state, each pool's replicas in use and
idle, what it costs per hour (the same busy or idle: jobs/pricing/warm_pools.py) and which runs
are on it, read from the v1 ``PersistentResource`` REST JSON and the region's CustomJobs; and over
a window (`window_usage`), each pool's busy and idle replica-hours and what the idle part cost.

The client reads the REST form on its own, apart from the local platform's reading of the same
messages (the ``local-stands-apart`` contract: a platform and the client that tests it share no
code). Field names and states: docs/vertex-facts.md, "Persistent resources".
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from jobs.core.catalog import Catalog, load_catalog
from jobs.core.stack import PersistentResourceOutputs, WarmPool
from jobs.custom_jobs.facts import facts_from_rest_job
from jobs.custom_jobs.pool_fit import Placement, place
from jobs.pricing.warm_pools import WarmCost, warm_cost
from jobs.vertex.errors import VertexError
from jobs.vertex.job_records import JobRecord, rfc3339
from jobs.vertex.rest import PERSISTENT_RESOURCES, VertexRest

NO_ACCELERATOR = (None, "", "ACCELERATOR_TYPE_UNSPECIFIED")


def _int(value: object, default: int | None) -> int | None:
    """An int64 as REST JSON writes it (a string; absent when zero or unset)."""
    if value is None:
        return default
    return int(str(value))


@dataclass(frozen=True)
class PoolUsage:
    pool: WarmPool
    used: int
    """``usedReplicaCount``: "the number of machines currently in use by training jobs"."""

    @property
    def provisioned(self) -> int:
        """VMs up: the pool's count (autoscaling's minimum), or more while jobs use more."""
        return max(self.pool.replica_count, self.used)

    @property
    def idle(self) -> int:
        return self.provisioned - self.used


@dataclass(frozen=True)
class RunOnResource:
    run_id: str | None
    job: str
    state: str
    replicas: int
    """The job's replicas, all its worker pools."""


@dataclass(frozen=True)
class ResourceStatus:
    name: str
    display_name: str
    state: str
    region: str
    labels: dict[str, str]
    pools: list[PoolUsage]
    runs: list[RunOnResource]
    cost: WarmCost
    error: str | None = None

    @property
    def resource_id(self) -> str:
        return self.name.rsplit("/", 1)[-1]


def _pool(pool: dict) -> WarmPool:
    machine, disk = pool.get("machineSpec") or {}, pool.get("diskSpec") or {}
    scaling = pool.get("autoscalingSpec") or {}
    accelerator = machine.get("acceleratorType")
    low = _int(scaling.get("minReplicaCount"), None)
    return WarmPool(
        id=str(pool.get("id", "")),
        machine_type=str(machine.get("machineType", "")),
        accelerator_type=None if accelerator in NO_ACCELERATOR else str(accelerator),
        accelerator_count=_int(machine.get("acceleratorCount"), 0) or 0,
        boot_disk_type=str(disk.get("bootDiskType") or "pd-ssd"),
        boot_disk_size_gb=_int(disk.get("bootDiskSizeGb"), 100) or 100,
        replica_count=_int(pool.get("replicaCount"), None) or low or 1,
        max_replica_count=_int(scaling.get("maxReplicaCount"), None),
    )


def resource_outputs(resource: dict) -> PersistentResourceOutputs:
    """The REST resource in the stack contract's terms (what warm_cost prices)."""
    name = str(resource.get("name", ""))
    return PersistentResourceOutputs(
        name=name,
        region=name.split("/locations/")[-1].split("/")[0],
        pools=[_pool(p) for p in resource.get("resourcePools") or []],
        labels={str(k): str(v) for k, v in (resource.get("labels") or {}).items()},
    )


def on_resource(resource_name: str, job: JobRecord) -> bool:
    """Whether ``job`` names the resource (``jobSpec.persistentResourceId``, an id "in the same
    Project and Location") and is in its project and location."""
    rid = resource_name.rsplit("/", 1)[-1]
    parent = resource_name.split(f"/{PERSISTENT_RESOURCES}/")[0]
    return (job.rest.get("jobSpec") or {}).get("persistentResourceId") == rid and job.name.split(
        "/customJobs/"
    )[0] == parent


def metering_catalog(vertex: VertexRest, jobs: Iterable[JobRecord]) -> Catalog:
    """The stack's catalog (`Catalog.for_stack`) with each persistent resource ``jobs`` run on
    that the stack does not declare read from Vertex (one GET each), so a run's meter prices
    its share of one made outside the stack (with the SDK, or on the local platform) as of a
    declared one; one that cannot be read (deleted since) stays unknown, and so does the
    share."""
    catalog = load_catalog().for_stack(vertex.stack)
    found: dict[str, PersistentResourceOutputs] = {}
    for job in jobs:
        rid = (job.rest.get("jobSpec") or {}).get("persistentResourceId")
        if not rid or rid in catalog.persistent_resources or rid in found:
            continue
        name = f"{job.name.split('/customJobs/')[0]}/{PERSISTENT_RESOURCES}/{rid}"
        try:
            found[rid] = resource_outputs(vertex.persistent_resource(name))
        except VertexError:
            continue
    if not found:
        return catalog
    known = {**catalog.persistent_resources, **found}
    return catalog.model_copy(update={"persistent_resources": known})


def runs_on(resource_name: str, jobs: list[JobRecord]) -> list[RunOnResource]:
    """The unfinished jobs on the resource, newest first as given."""
    return [
        RunOnResource(job.run_id, job.name, job.state, sum(p.replicas for p in job.pools))
        for job in jobs
        if not job.terminal and on_resource(resource_name, job)
    ]


def resource_status(resource: dict, jobs: list[JobRecord], catalog: Catalog) -> ResourceStatus:
    """``resource`` (REST JSON) with its pools' usage, its price and the runs on it."""
    outputs = resource_outputs(resource)
    used = {
        str(p.get("id", "")): _int(p.get("usedReplicaCount"), 0) or 0
        for p in resource.get("resourcePools") or []
    }
    return ResourceStatus(
        name=outputs.name,
        display_name=str(resource.get("displayName", "")),
        state=str(resource.get("state", "STATE_UNSPECIFIED")),
        region=outputs.region,
        labels=outputs.labels,
        pools=[PoolUsage(pool, used.get(pool.id, 0)) for pool in outputs.pools],
        runs=runs_on(outputs.name, jobs),
        cost=warm_cost(outputs, catalog),
        error=(resource.get("error") or {}).get("message") or None,
    )


# ---- over a window ---------------------------------------------------------------------------


@dataclass(frozen=True)
class PoolHours:
    """One pool over the window: the replica-hours jobs held and the replica-hours it had up."""

    pool: WarmPool
    busy_h: float
    provisioned_h: float
    """Replica-hours up: its replica count (autoscaling's minimum) while the resource was up,
    or more while jobs held more (autoscaled VMs counted only while held)."""
    replica_usd_per_h: float | None

    @property
    def idle_h(self) -> float:
        return self.provisioned_h - self.busy_h

    @property
    def idle_usd(self) -> float | None:
        """What the idle replica-hours cost: billed as the busy ones are; None when the pool's
        price is unknown."""
        per = self.replica_usd_per_h
        return None if per is None else per * self.idle_h


@dataclass(frozen=True)
class WindowUsage:
    start: datetime
    end: datetime
    up_s: float
    """How long the resource was up in the window: from its ``startTime`` (when it first was
    RUNNING; billing starts there) or the window's start, to the window's end."""
    pools: list[PoolHours]
    jobs: int
    """The CustomJobs that ran on it in the window."""
    unplaced: list[str]
    """Jobs that ran on it whose worker pools fit none of its pools as it is now (it was updated
    since): their hours are not counted."""
    unknown_because: str | None
    """Why a pool's price is unknown (then so is the idle cost)."""

    @property
    def idle_usd(self) -> float | None:
        costs = [p.idle_usd for p in self.pools]
        return None if any(c is None for c in costs) else sum(c or 0.0 for c in costs)


def _held(
    resource: PersistentResourceOutputs, job: JobRecord, catalog: Catalog
) -> dict[str, int] | None:
    """The replicas ``job`` holds of each pool, as Vertex placed it (`pool_fit.place`)."""
    rid = resource.name.rsplit("/", 1)[-1]
    found = place(facts_from_rest_job(job.rest), rid, resource.pools, catalog)
    return found.replicas if isinstance(found, Placement) else None


def _seconds(a: datetime, b: datetime) -> float:
    return max((b - a).total_seconds(), 0.0)


Span = tuple[datetime, datetime, dict[str, int]]
"""A job's time running in the window, and the replicas it holds of each pool."""


def _pool_hours(
    pool: WarmPool, spans: list[Span], cuts: list[datetime], cost: WarmCost
) -> PoolHours:
    """The pool's busy and provisioned replica-hours: between two cuts (every span's ends) the
    replicas held are constant."""
    busy = provisioned = 0.0
    for a, b in itertools.pairwise(cuts):
        used = sum(h.get(pool.id, 0) for s, e, h in spans if s <= a and b <= e)
        busy += used * _seconds(a, b)
        provisioned += max(pool.replica_count, used) * _seconds(a, b)
    price = cost.pool(pool.id)
    per = price.replica_usd_per_h if price else None
    return PoolHours(pool, busy / 3600, provisioned / 3600, per)


def window_usage(
    resource: dict, jobs: list[JobRecord], start: datetime, end: datetime, catalog: Catalog
) -> WindowUsage:
    """Each pool's busy and idle replica-hours from ``start`` to ``end`` (now): busy is each job
    on the resource (``jobs``: the region's, any state) x the replicas it holds of the pool x
    its time running (``startTime`` to ``endTime``, or ``end`` while it runs) in the window;
    provisioned is the pool's replicas x the resource's time up in the window (more while jobs
    hold more); idle is the difference. The resource's pools are read as they are now."""
    outputs = resource_outputs(resource)
    up_from = rfc3339(resource.get("startTime"))
    up_start = max(start, up_from) if up_from is not None else end
    spans: list[Span] = []
    unplaced = []
    ran = 0
    for job in jobs:
        if not on_resource(outputs.name, job) or job.start_time is None:
            continue
        job_end = job.end_time or (job.start_time if job.terminal else end)
        a, b = max(job.start_time, up_start), min(job_end, end)
        if b <= a:
            continue
        ran += 1
        held = _held(outputs, job, catalog)
        if held is None:
            unplaced.append(job.name)
            continue
        spans.append((a, b, held))
    cuts = sorted({up_start, end, *(t for a, b, _ in spans for t in (a, b))})
    cuts = [t for t in cuts if up_start <= t <= end]
    cost = warm_cost(outputs, catalog)
    pools = [_pool_hours(pool, spans, cuts, cost) for pool in outputs.pools]
    return WindowUsage(
        start, end, _seconds(up_start, end), pools, ran, unplaced, cost.unknown_because
    )
