"""A stored CustomJob as a typed view: read once from its REST form, not looked up key by key.

The REST form (camelCase keys, enum names) stays the record: it is what the store keeps and the
API serves. ``JobView`` holds what the executor and the lifecycle read from it: identity, pools,
replica counts, scheduling.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from jobs.core.contract import LABEL_RUN_ID
from jobs.core.durations import parse_duration_s
from jobs.local.custom_jobs.lifecycle import Scheduling
from jobs.local.platform import vertex_env
from jobs.local.platform.vertex_env import ReplicaSlot


def job_id(name: str) -> str:
    """The id at the end of a resource name (projects/P/locations/L/customJobs/ID)."""
    return name.rsplit("/", 1)[-1]


def scheduling_of(job: dict) -> Scheduling:
    scheduling = job.get("jobSpec", {}).get("scheduling", {})
    return Scheduling(
        spot=scheduling.get("strategy") == "SPOT",
        timeout_s=parse_duration_s(scheduling.get("timeout")) or None,  # "0s": no timeout
        disable_retries=bool(scheduling.get("disableRetries", False)),
        restart_job_on_worker_restart=bool(scheduling.get("restartJobOnWorkerRestart", False)),
    )


@dataclass(frozen=True)
class JobView:
    name: str
    """projects/NUMBER/locations/REGION/customJobs/ID"""
    labels: Mapping[str, str]
    pools: tuple[dict, ...]
    """jobSpec.workerPoolSpecs in REST form; an unused pool is ``{}``."""
    replica_counts: tuple[int, ...]
    """Processes per pool: replicaCount, times a TPU slice's hosts (vertex_env.host_counts)."""
    scheduling: Scheduling

    @classmethod
    def of(cls, job: dict) -> JobView:
        return cls(
            name=job["name"],
            labels=dict(job.get("labels", {})),
            pools=tuple(vertex_env.pools(job)),
            replica_counts=tuple(vertex_env.host_counts(job)),
            scheduling=scheduling_of(job),
        )

    @property
    def id(self) -> str:
        return job_id(self.name)

    @property
    def run_id(self) -> str | None:
        return self.labels.get(LABEL_RUN_ID)

    @property
    def slots(self) -> list[ReplicaSlot]:
        """Every replica of every pool, primary first; empty pools are skipped."""
        return vertex_env.slots_of(self.replica_counts)

    def command(self, slot: ReplicaSlot, package_dir: Path | None = None) -> list[str]:
        return vertex_env.replica_command(self.pools[slot.pool], package_dir)
