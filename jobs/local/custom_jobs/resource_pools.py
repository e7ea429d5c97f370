"""Persistent resources as pure decisions over their REST form (``PersistentResource`` of the v1
protos, camelCase): what a create must hold, what a resource holds of the region, its states
and operations, and whether a job that names it starts, waits or is refused.

States (``PersistentResource.State``): PROVISIONING after a create until its machines are free
in the capacity model, then RUNNING; UPDATING after an update and REBOOTING after a reboot until
the next look at it; a delete removes it at once (its operation born done, as every delete here).
STOPPING and ERROR are never set locally. Which pool a job's worker pool runs on is
`jobs.custom_jobs.pool_fit.place`, the rule `vtx validate --stack` applies too.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from enum import StrEnum

from jobs.core.catalog import Catalog
from jobs.core.naming import RFC1035_PATTERN
from jobs.core.stack import WarmPool
from jobs.custom_jobs.facts import JobFacts, PoolFacts, facts_from_rest_job
from jobs.custom_jobs.pool_fit import Placement, place
from jobs.custom_jobs.rules.machines import (
    accelerator_fits_machine,
    accelerator_offered_in_region,
    machine_offered_in_region,
    machine_type_known,
)
from jobs.local.platform import capacity
from jobs.local.platform.capacity import Admission, AdmissionDecision, Need
from jobs.local.platform.operations import TYPE_PREFIX
from jobs.local.platform.rpc_status import Code, JobError

ID_PATTERN = re.compile(rf"^{RFC1035_PATTERN}$")
"""CreatePersistentResourceRequest.persistent_resource_id's rule, from its proto comment."""
POOL_RULES = (
    machine_type_known,
    machine_offered_in_region,
    accelerator_fits_machine,
    accelerator_offered_in_region,
)
"""The catalog rules a training pool passes, applied to each resource pool."""
OUTPUT_ONLY = ("state", "error", "createTime", "startTime", "updateTime", "resourceRuntime")
UPDATABLE = {"display_name": "displayName", "labels": "labels", "resource_pools": "resourcePools"}
"""updateMask paths (snake_case, as the SDK sends them, or camelCase) a local update applies.
Which fields Vertex lets an update change is UNCONFIRMED beyond the proto's Immutable marks
(``name``, a pool's ``id`` and ``machineSpec``): a pool's machines are refused here."""


class State(StrEnum):
    PROVISIONING = "PROVISIONING"
    RUNNING = "RUNNING"
    STOPPING = "STOPPING"
    ERROR = "ERROR"
    REBOOTING = "REBOOTING"
    UPDATING = "UPDATING"


HOLDING = (State.RUNNING, State.UPDATING, State.REBOOTING)
"""States in which a resource holds its machines."""


class PoolError(Exception):
    """A request refused: an HTTP code, Google's status name and a message."""

    def __init__(self, http_code: int, message: str, status: str = "INVALID_ARGUMENT") -> None:
        super().__init__(message)
        self.http_code, self.message, self.status = http_code, message, status


# -- create --------------------------------------------------------------------------------------


def _replicas(pool: dict) -> tuple[int | None, int | None, int | None]:
    """(replicaCount, autoscaling min, autoscaling max), int64s as the JSON writes them."""
    scaling = pool.get("autoscalingSpec") or {}

    def num(value: object) -> int | None:
        return int(value) if value is not None else None  # type: ignore[arg-type]

    return (
        num(pool.get("replicaCount")),
        num(scaling.get("minReplicaCount")),
        num(scaling.get("maxReplicaCount")),
    )


def _pool_problems(pool: dict, where: str, region: str, catalog: Catalog) -> list[str]:
    machine = pool.get("machineSpec") or {}
    if not machine.get("machineType"):
        return [f"{where}.machineSpec.machineType: required (a machine type of the catalog)"]
    accelerator = machine.get("acceleratorType")
    if accelerator == "ACCELERATOR_TYPE_UNSPECIFIED":
        accelerator = None
    facts = PoolFacts(
        role="chief",
        paths={
            "pool": where,
            "machine": f"{where}.machineSpec.machineType",
            "accelerator": f"{where}.machineSpec.acceleratorType",
            "accelerator_count": f"{where}.machineSpec.acceleratorCount",
            "replicas": f"{where}.replicaCount",
        },
        machine=machine["machineType"],
        accelerator=accelerator,
        accelerator_count=int(machine["acceleratorCount"])
        if "acceleratorCount" in machine
        else None,
        replicas=1,
    )
    job = JobFacts(paths={"region": f"the location {region}"}, region=region, pools=[facts])
    job.rest = True
    problems = [str(p) for rule in POOL_RULES for p in rule(job, catalog)]
    if machine.get("reservationAffinity"):
        problems.append(
            f"{where}.machineSpec.reservationAffinity: not served locally (whether a persistent "
            f"resource's pool may consume a reservation is UNCONFIRMED, docs/vertex-facts.md "
            f'"Persistent resources"); remove it'
        )
    count, low, high = _replicas(pool)
    if pool.get("autoscalingSpec"):
        if low is None or low < 1:
            problems.append(
                f"{where}.autoscalingSpec.minReplicaCount: at least 1 for a persistent resource"
            )
        if high is None or (low is not None and high <= low):
            problems.append(
                f"{where}.autoscalingSpec.maxReplicaCount: required, above minReplicaCount"
            )
        if count is not None and low is not None and count < low:
            problems.append(f"{where}.replicaCount: {count} is below minReplicaCount {low}")
    elif count is None or count < 1:
        problems.append(f"{where}.replicaCount: at least 1 (or set autoscalingSpec)")
    return problems


def create_problems(resource_id: str, resource: dict, region: str, catalog: Catalog) -> list[str]:
    """Every problem of a create, each naming its field."""
    problems = []
    if not ID_PATTERN.match(resource_id or ""):
        problems.append(
            f"persistentResourceId: {resource_id!r} is not a valid id: 1 to 63 lowercase "
            f"letters, digits or hyphens, a letter first, no hyphen last"
        )
    pools = resource.get("resourcePools") or []
    if not pools:
        problems.append("persistentResource.resourcePools: at least one pool is required")
    ids = [p.get("id") for p in pools if p.get("id")]
    for dup in sorted({i for i in ids if ids.count(i) > 1}):
        problems.append(f"persistentResource.resourcePools: id {dup!r} is used twice")
    for i, pool in enumerate(pools):
        where = f"persistentResource.resourcePools[{i}]"
        problems += _pool_problems(pool, where, region, catalog)
    if (resource.get("resourceRuntimeSpec") or {}).get("raySpec"):
        problems.append(
            "persistentResource.resourceRuntimeSpec.raySpec: Ray on Vertex is not served "
            "locally; remove it"
        )
    return problems


def _pool_id(pool: dict, taken: set[str]) -> str:
    """A pool's id when the client gives none (Vertex generates one; its form is UNCONFIRMED):
    the machine type, numbered when several pools share it."""
    base = str((pool.get("machineSpec") or {}).get("machineType", "pool"))
    name, n = base, 1
    while name in taken:
        n += 1
        name = f"{base}-{n}"
    return name


def new_resource(
    name: str, resource: dict, boot_disk: Mapping[str, tuple[str, int]], stamp: str
) -> dict:
    """The stored form of a created resource: named, PROVISIONING, each pool with its id and
    its disk (``boot_disk``: machine -> Vertex's default type and size), output fields dropped."""
    stored = {k: v for k, v in resource.items() if k not in OUTPUT_ONLY}
    taken = {str(p["id"]) for p in stored.get("resourcePools", []) if p.get("id")}
    pools = []
    for pool in stored.get("resourcePools", []):
        pool = dict(pool)
        if not pool.get("id"):
            pool["id"] = _pool_id(pool, taken)
            taken.add(pool["id"])
        machine = pool["machineSpec"]["machineType"]
        kind, size = boot_disk[machine]
        pool["diskSpec"] = {"bootDiskType": kind, "bootDiskSizeGb": size} | (
            pool.get("diskSpec") or {}
        )
        pool.pop("usedReplicaCount", None)
        pools.append(pool)
    return {
        **stored,
        "name": name,
        "resourcePools": pools,
        "state": State.PROVISIONING.value,
        "createTime": stamp,
        "updateTime": stamp,
    }


# -- what it holds -------------------------------------------------------------------------------


def warm_pools(resource: dict) -> list[WarmPool]:
    """The stored resource's pools in the stack contract's terms (what pool_fit reads)."""
    pools = []
    for pool in resource.get("resourcePools", []):
        machine, disk = pool.get("machineSpec") or {}, pool.get("diskSpec") or {}
        count, low, high = _replicas(pool)
        accelerator = machine.get("acceleratorType")
        pools.append(
            WarmPool(
                id=pool["id"],
                machine_type=machine["machineType"],
                accelerator_type=None
                if accelerator in (None, "ACCELERATOR_TYPE_UNSPECIFIED")
                else accelerator,
                accelerator_count=int(machine.get("acceleratorCount") or 0),
                boot_disk_type=disk.get("bootDiskType", "pd-ssd"),
                boot_disk_size_gb=int(disk.get("bootDiskSizeGb") or 100),
                replica_count=count or low or 1,
                max_replica_count=high,
            )
        )
    return pools


def need_of_resource(resource: dict, region: str, catalog: Catalog) -> Need:
    """What a resource holds of its region while it exists: each pool's machines (replicaCount,
    or autoscaling's minimum: the VMs always up), on-demand."""
    needs = []
    for pool in warm_pools(resource):
        spec = {"machineType": pool.machine_type}
        if pool.accelerator_type:
            spec |= {
                "acceleratorType": pool.accelerator_type,
                "acceleratorCount": pool.accelerator_count,
            }
        job = {
            "jobSpec": {
                "workerPoolSpecs": [{"machineSpec": spec, "replicaCount": pool.replica_count}]
            }
        }
        needs.append(capacity.need_of(job, region, catalog))
    return capacity.summed(needs, region)


def holds(resource: dict) -> bool:
    return resource.get("state") in HOLDING


# -- jobs on it ----------------------------------------------------------------------------------


def resource_id_of(job: dict) -> str | None:
    """The persistent resource a CustomJob names (``jobSpec.persistentResourceId``)."""
    return (job.get("jobSpec") or {}).get("persistentResourceId") or None


def placement(job: dict, resource: dict, catalog: Catalog) -> Placement | list[str]:
    """Where the job's worker pools run on ``resource``, or every mismatch (field: what)."""
    rid = resource["name"].rsplit("/", 1)[-1]
    found = place(facts_from_rest_job(job), rid, warm_pools(resource), catalog)
    return found if isinstance(found, Placement) else [str(m) for m in found]


def used_replicas(resource: dict, running: Iterable[dict], catalog: Catalog) -> dict[str, int]:
    """Pool id -> replicas the started jobs on ``resource`` hold."""
    used: dict[str, int] = {}
    for job in running:
        found = placement(job, resource, catalog)
        if isinstance(found, Placement):
            for pool, count in found.replicas.items():
                used[pool] = used.get(pool, 0) + count
    return used


def with_usage(resource: dict, used: Mapping[str, int]) -> dict:
    """The resource as answered: each pool's ``usedReplicaCount`` (an int64: a string in JSON)."""
    pools = [
        {**p, "usedReplicaCount": str(used.get(p["id"], 0))} for p in resource["resourcePools"]
    ]
    return {**resource, "resourcePools": pools}


def admission(
    job: dict, resource: dict | None, running: Iterable[dict], catalog: Catalog
) -> AdmissionDecision:
    """Whether a job that names a resource starts now (free replicas of its pools), waits (the
    pools are busy, or the resource is not RUNNING yet) or fails (the resource is gone)."""
    rid = resource_id_of(job)
    if resource is None:
        error = JobError(
            Code.INVALID_ARGUMENT,
            f"persistent resource {rid!r} was deleted before the job could start on it",
        )
        return AdmissionDecision(Admission.FAIL, error, error.message)
    if resource.get("state") != State.RUNNING.value:
        note = (
            f"waiting for persistent resource {rid!r}, which is {resource.get('state')}; the "
            f"job stays JOB_STATE_PENDING until it is RUNNING"
        )
        return AdmissionDecision(Admission.WAIT, note=note)
    found = placement(job, resource, catalog)
    if not isinstance(found, Placement):  # its pools changed since the create: it cannot run
        error = JobError(Code.INVALID_ARGUMENT, "; ".join(found))
        return AdmissionDecision(Admission.FAIL, error, error.message)
    used = used_replicas(resource, running, catalog)
    pools = {p.id: p for p in warm_pools(resource)}
    busy = [
        f"pool {pid!r} ({pools[pid].summary}) has {used.get(pid, 0)} of "
        f"{pools[pid].replicas_max} replicas in use and this job needs {count}"
        for pid, count in sorted(found.replicas.items())
        if used.get(pid, 0) + count > pools[pid].replicas_max
    ]
    if not busy:
        return AdmissionDecision(Admission.START)
    note = (
        f"waiting for free replicas of persistent resource {rid!r}: {'; '.join(busy)}; the job "
        f"stays JOB_STATE_PENDING until a job on it ends"
    )
    return AdmissionDecision(Admission.WAIT, note=note)


# -- operations ----------------------------------------------------------------------------------


def operation(name: str, kind: str, stamp: str, message: str) -> dict:
    """A create's, update's or reboot's operation, not done yet (``kind``: Create, Update,
    Reboot: its ``<kind>PersistentResourceOperationMetadata``)."""
    return {
        "name": name,
        "metadata": {
            "@type": f"{TYPE_PREFIX}{kind}PersistentResourceOperationMetadata",
            "genericMetadata": {"createTime": stamp, "updateTime": stamp},
            "progressMessage": message,
        },
        "done": False,
    }


def finished(op: dict, resource: dict, stamp: str) -> dict:
    """The operation done, with the resource (as answered) as its response."""
    metadata = {**op["metadata"], "progressMessage": "done"}
    metadata["genericMetadata"] = {**metadata["genericMetadata"], "updateTime": stamp}
    response = {"@type": f"{TYPE_PREFIX}PersistentResource", **resource}
    return {**op, "metadata": metadata, "done": True, "response": response}


def settled(resource: dict, free: bool, stamp: str) -> dict | None:
    """The resource after its pending change completes, or None while it waits: PROVISIONING
    becomes RUNNING once its machines are ``free`` in the capacity model; UPDATING and
    REBOOTING become RUNNING at once (their machines are held already)."""
    state = resource.get("state")
    if state == State.PROVISIONING.value and free:
        return {**resource, "state": State.RUNNING.value, "startTime": stamp, "updateTime": stamp}
    if state in (State.UPDATING.value, State.REBOOTING.value):
        return {**resource, "state": State.RUNNING.value, "updateTime": stamp}
    return None


def updated(resource: dict, change: dict, mask: list[str]) -> dict:
    """The resource with the masked fields of ``change``, UPDATING; PoolError for a path it
    cannot change (a pool's machines are Immutable in the proto; so are pools added or
    removed here, UNCONFIRMED)."""
    result = dict(resource)
    for path in mask:
        key = UPDATABLE.get(path) or (path if path in UPDATABLE.values() else None)
        if key is None:
            raise PoolError(
                400,
                f"updateMask: {path!r} cannot be updated here; the paths served are "
                f"{', '.join(UPDATABLE)}",
            )
        if key == "resourcePools":
            result["resourcePools"] = _updated_pools(resource, change.get("resourcePools") or [])
        else:
            result[key] = change.get(key)
    result["state"] = State.UPDATING.value
    return result


def _updated_pools(resource: dict, pools: list[dict]) -> list[dict]:
    before = {p["id"]: p for p in resource["resourcePools"]}
    if sorted(p.get("id", "") for p in pools) != sorted(before):
        raise PoolError(
            400,
            f"persistentResource.resourcePools: an update names the same pools by id "
            f"({', '.join(sorted(before))}), changing only their replica counts",
        )
    result = []
    for i, pool in enumerate(pools):
        old = before[pool["id"]]
        if pool.get("machineSpec") and pool["machineSpec"] != old["machineSpec"]:
            raise PoolError(
                400,
                f"persistentResource.resourcePools[{i}].machineSpec: Immutable; create another "
                f"resource for other machines",
            )
        new = {**old}
        for key in ("replicaCount", "autoscalingSpec"):
            if key in pool:
                new[key] = pool[key]
        result.append(new)
    return result
