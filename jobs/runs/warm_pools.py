"""What a persistent resource (warm pool) is doing: its state, each pool's replicas in use and
idle, what it costs per hour (the same busy or idle: jobs/pricing/warm_pools.py) and which runs
are on it, read from the v1 ``PersistentResource`` REST JSON and the region's CustomJobs.

The client reads the REST form on its own, apart from the local platform's reading of the same
messages (the ``local-stands-apart`` contract: a platform and the client that tests it share no
code). Field names and states: docs/vertex-facts.md, "Persistent resources".
"""

from __future__ import annotations

from dataclasses import dataclass

from jobs.core.catalog import Catalog
from jobs.core.stack import PersistentResourceOutputs, WarmPool
from jobs.pricing.warm_pools import WarmCost, warm_cost
from jobs.vertex.job_records import JobRecord
from jobs.vertex.rest import PERSISTENT_RESOURCES

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


def runs_on(resource_name: str, jobs: list[JobRecord]) -> list[RunOnResource]:
    """The unfinished jobs that name the resource (``jobSpec.persistentResourceId``) in its
    project and location, newest first as given."""
    rid = resource_name.rsplit("/", 1)[-1]
    parent = resource_name.split(f"/{PERSISTENT_RESOURCES}/")[0]
    return [
        RunOnResource(job.run_id, job.name, job.state, sum(p.replicas for p in job.pools))
        for job in jobs
        if not job.terminal
        and (job.rest.get("jobSpec") or {}).get("persistentResourceId") == rid
        and job.name.split("/customJobs/")[0] == parent
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
