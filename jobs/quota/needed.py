"""The quota a job needs: metric -> units for every pool at full size, counted the way
Vertex checks it when the job starts (vCPUs per VM for the machine family, accelerators under
their on-demand or preemptible metric). The launch plan, the live preflight
(`jobs.quota.cloud_quotas`) and the local platform's capacity model count with it."""

from __future__ import annotations

from collections import defaultdict

from jobs.core.catalog import Catalog
from jobs.custom_jobs.facts import PREEMPTIBLE_STRATEGIES, JobFacts, hosts, replica_accelerators


def quota_needed(job: JobFacts, cat: Catalog) -> dict[str, int]:
    """Quota metric -> units, for every pool at full size (Vertex checks it when the job starts)."""
    preemptible = job.strategy in PREEMPTIBLE_STRATEGIES
    needed: dict[str, int] = defaultdict(int)
    for pool in job.pools:
        machine = cat.machines.get(pool.machine or "")
        if machine is None:
            continue
        replicas = pool.replicas or 0
        if machine.vcpus is not None:  # cloud-tpu: Google gives no vCPU figure to count
            needed[machine.cpu_quota_metric] += machine.vcpus * hosts(pool, cat) * replicas
        accelerator, count = replica_accelerators(pool, cat)
        acc = cat.accelerators.get(accelerator or "")
        if acc is not None:
            needed[acc.metric(preemptible)] += count * replicas
    return dict(needed)
