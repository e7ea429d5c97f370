"""What Vertex fills in a CustomJob it creates and the client left out, and the state its answers
show: the local platform answers the same.

- ``workerPoolSpecs[].diskSpec``: DiskSpec's documented defaults (machine_resources.proto:
  ``boot_disk_type`` "for non-A3U machines, the default value is pd-ssd, for A3U machines,
  the default value is hyperdisk-balanced"; ``boot_disk_size_gb`` "default is 100GB"), read from
  the catalog, which holds each machine's boot disk types (its default first) and the size
  limits: docs/vertex-facts.md, "Machines and accelerators" and "Job states".
- ``state``: a job waiting for resources is JOB_STATE_PENDING in Vertex's answers, from the
  create's on. The executor keeps JOB_STATE_QUEUED for a job waiting for the platform's replica
  slots (its FIFO admission, which Vertex does not have); answers show it as PENDING.
"""

from __future__ import annotations

from jobs.core.catalog import load_catalog
from jobs.core.states import JobState


def with_disk_defaults(job_spec: dict) -> dict:
    """``job_spec`` (a REST CustomJobSpec) with every pool's diskSpec filled as Vertex fills it.
    Empty pools (placeholders for a pool position) stay empty."""
    catalog = load_catalog()
    size = catalog.limits.boot_disk_size_gb.default
    if size is None:
        raise ValueError("limits.yaml: boot_disk_size_gb has no default")
    pools = []
    for pool in job_spec.get("workerPoolSpecs", []):
        if pool:
            machine = (pool.get("machineSpec") or {}).get("machineType")
            disk = {"bootDiskType": catalog.boot_disk_types(machine)[0], "bootDiskSizeGb": size}
            pool = {**pool, "diskSpec": disk | (pool.get("diskSpec") or {})}
        pools.append(pool)
    return {**job_spec, "workerPoolSpecs": pools} if pools else job_spec


def as_answered(resource: dict) -> dict:
    """A stored CustomJob or HyperparameterTuningJob with the state Vertex would answer."""
    if resource.get("state") == JobState.QUEUED.value:
        return {**resource, "state": JobState.PENDING.value}
    return resource
