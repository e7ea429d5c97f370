"""Rules on TPU jobs, after Google's "Configure compute resources for custom training" (TPU
section) and "Use Spot VMs with training" (docs/vertex-facts.md, "TPUs"): one worker pool of one
replica (the whole slice, however many VMs its topology is), a topology the machine takes, no
Spot on a Pod, Pods only where offered, and no machine Google's page does not list."""

from __future__ import annotations

from collections.abc import Iterator

from jobs.core.catalog import Catalog, Machine
from jobs.core.problems import Problem
from jobs.custom_jobs.facts import JobFacts, PoolFacts

POD_CORES = 32
"""cloud-tpu: "8 for single TPU or 32 or multiple of 32 for TPU Pods" (configure-compute)."""


def _tpu_pools(job: JobFacts, cat: Catalog) -> Iterator[tuple[PoolFacts, Machine]]:
    for pool in job.pools:
        machine = cat.machines.get(pool.machine or "")
        if machine is not None and machine.is_tpu:
            yield pool, machine


def hosts_of(pool: PoolFacts, machine: Machine) -> int:
    return machine.hosts(pool.tpu_topology, pool.accelerator_count)


def is_pod(pool: PoolFacts, machine: Machine) -> bool:
    """More than one VM: a multi-host slice, or a cloud-tpu Pod (32 cores and more)."""
    if machine.tpu_cores_per_host is not None:
        return (pool.accelerator_count or 0) >= POD_CORES
    return hosts_of(pool, machine) > 1


def _slice(pool: PoolFacts, machine: Machine) -> str:
    if machine.tpu_topologies:
        return f"a {pool.tpu_topology} slice of {machine.name}"
    return f"{pool.accelerator_count} x {pool.accelerator} on {machine.name}"


def tpu_machine_confirmed(job: JobFacts, cat: Catalog) -> Iterator[Problem]:
    for pool, machine in _tpu_pools(job, cat):
        if machine.unconfirmed:
            yield Problem(
                pool.path("machine"),
                f"{machine.name} is UNCONFIRMED for Vertex custom training: {machine.unconfirmed}",
                f"{job.key('machine')}: ct5lp-hightpu-4t with {job.key('tpu_topology')}: 4x4 "
                "(TPU v5e, 16 chips on 4 VMs), or another TPU `vtx catalog` lists",
            )


def tpu_topology_valid(job: JobFacts, cat: Catalog) -> Iterator[Problem]:
    for pool in job.pools:
        machine = cat.machines.get(pool.machine or "")
        if machine is None:
            continue
        if not machine.tpu_topologies:
            if pool.tpu_topology:
                sized = " (cloud-tpu is sized by its accelerator count)" if machine.is_tpu else ""
                yield Problem(
                    pool.path("tpu_topology"),
                    f"tpu topology is only for TPU VM machines, not {machine.name}{sized}",
                    "remove it (in a ladder rung's set or --set: tpu_topology: null)",
                )
            continue
        if pool.tpu_topology in machine.tpu_topologies:
            continue
        valid = ", ".join(machine.tpu_topologies)
        got = f", not {pool.tpu_topology!r}" if pool.tpu_topology else ""
        hint = f"{job.key('tpu_topology')}: one of {valid}"
        other = _machine_for_topology(pool.tpu_topology, machine, cat)
        if other is not None:
            hint += f", or {job.key('machine')}: {other} for {pool.tpu_topology}"
        yield Problem(
            pool.path("tpu_topology"),
            f"{machine.name} takes tpu topology {valid}{got}",
            hint,
        )


def _machine_for_topology(topology: str | None, machine: Machine, cat: Catalog) -> str | None:
    """A machine of the same TPU family that takes ``topology`` (2x4 on ct5lp-hightpu-1t:
    ct5lp-hightpu-8t), confirmed ones only."""
    for other in cat.machines.values():
        same = other.family == machine.family and other.name != machine.name
        if same and topology in other.tpu_topologies and not other.unconfirmed:
            return other.name
    return None


def tpu_one_pool_one_replica(job: JobFacts, cat: Catalog) -> Iterator[Problem]:
    """ "When you use a TPU VM ... you must only use a single worker pool for custom training,
    and you must configure this worker pool to use only one replica" (configure-compute)."""
    tpu = next(_tpu_pools(job, cat), None)
    if tpu is None:
        return
    tpu_pool, machine = tpu
    for pool in job.pools:
        if pool is tpu_pool:
            continue
        other = cat.machines.get(pool.machine or "")
        kind = "a TPU pool" if other is not None and other.is_tpu else "a second pool"
        gpu = " (TPU and GPU pools do not mix)" if _has_gpu(pool, cat) else ""
        yield Problem(
            pool.path("pool"),
            f"a TPU job runs one worker pool, and this job has {kind} beside the {tpu_pool.role} "
            f"pool ({machine.name}){gpu}",
            f"remove the {pool.role} pool: for more chips, a larger {job.key('tpu_topology')} "
            "(e.g. ct5lp-hightpu-4t 4x4: 16 chips on 4 VMs); GPUs go in a job of their own",
        )
    if tpu_pool.replicas not in (None, 1):
        vms = hosts_of(tpu_pool, machine)
        if vms > 1:
            message = (
                f"{_slice(tpu_pool, machine)} is {vms} VMs, and Vertex starts all of them from "
                f"one replica, not {tpu_pool.replicas}"
            )
        else:
            message = f"a TPU pool ({machine.name}) runs as one replica, not {tpu_pool.replicas}"
        yield Problem(
            tpu_pool.path("replicas"),
            message,
            f"{job.key('replicas')}: 1 (for more chips pick a larger {job.key('tpu_topology')})",
        )


def _has_gpu(pool: PoolFacts, cat: Catalog) -> bool:
    builtin = cat.builtin_accelerator(pool.machine)
    name = pool.accelerator or (builtin[0] if builtin else "")
    acc = cat.accelerators.get(name)
    return acc is not None and acc.kind == "gpu"


def tpu_spot_not_on_pods(job: JobFacts, cat: Catalog) -> Iterator[Problem]:
    """ "Using Spot VMs with TPU Pods isn't supported" (use-spot-vms). A single-host slice may
    run on Spot; that a multi-host v5e/v6e slice counts as a Pod is vtx's reading."""
    if job.strategy != "SPOT":
        return
    for pool, machine in _tpu_pools(job, cat):
        if is_pod(pool, machine):
            single = (
                f"{job.key('tpu_topology')}: {next(iter(machine.tpu_topologies))} (one VM)"
                if machine.tpu_topologies
                else f"{job.key('accelerator_count')}: 8 (one VM)"
            )
            yield Problem(
                job.path("strategy"),
                f"Spot VMs are not supported for TPU Pods, and {_slice(pool, machine)} is "
                f"{hosts_of(pool, machine)} VMs",
                f"strategy: {job.strategy_value('STANDARD')}, or a single-host slice for Spot "
                f"({single})",
            )


def tpu_pod_offered_in_region(job: JobFacts, cat: Catalog) -> Iterator[Problem]:
    region = cat.regions.get(job.region or "")
    if region is None:
        return
    for pool, machine in _tpu_pools(job, cat):
        acc = pool.accelerator
        if machine.tpu_cores_per_host is None or not is_pod(pool, machine) or acc is None:
            continue
        if acc in region.accelerators and acc not in region.tpu_pods:
            where = [r.name for r in cat.regions.values() if acc in r.tpu_pods]
            yield Problem(
                pool.path("accelerator_count"),
                f"{acc} Pods ({pool.accelerator_count} cores) are not offered for training in "
                f"{region.name}",
                f"regions with {acc} Pods: {', '.join(where) or 'none in the catalog'}; or "
                f"{job.key('accelerator_count')}: 8 (one VM)",
            )


def accelerator_in_api(job: JobFacts, cat: Catalog) -> Iterator[Problem]:
    for pool in job.pools:
        acc = cat.accelerators.get(pool.accelerator or "")
        if acc is not None and not acc.in_v1_api:
            machines = ", ".join(m.name for m in cat.machines_for(acc.name))
            yield Problem(
                pool.path("accelerator"),
                f"{acc.name} is no AcceleratorType of the Vertex v1 API: its machines ({machines}) "
                "are named with their topology only",
                f"remove {job.key('accelerator')} and {job.key('accelerator_count')}; keep "
                f"{job.key('machine')} and {job.key('tpu_topology')}",
            )
