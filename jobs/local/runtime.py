"""The executor's memory of one job, persisted next to its REST record in the store.

Everything the executor must know after a control-plane crash to re-attach to running replicas
(pids and their create times, log and exit files, attempts, restart counts, timers) lives here,
so a restarted executor picks up where the last one stopped.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from jobs.local.lifecycle import ReplicaStatus, StopReason


class Replica(BaseModel):
    name: str
    pool: int
    index: int
    attempt: int = 0
    """How many times this replica was started before this run of it (0 first)."""
    restarts: int = 0
    """Restarts counted against Vertex's worker restart limit."""
    status: ReplicaStatus = ReplicaStatus.NEW
    pid: int | None = None
    create_time: float | None = None
    """psutil create time, to tell our process from a later one that reused the pid."""
    log_path: str | None = None
    exit_path: str | None = None
    exit_code: int | None = None
    term_at: float | None = None
    """When SIGTERM was sent (epoch seconds); SIGKILL follows after the grace period."""
    killed: bool = False
    preempted: bool = False

    @property
    def running(self) -> bool:
        return self.status is ReplicaStatus.RUNNING


class Runtime(BaseModel):
    replicas: list[Replica]
    ports: dict[str, int] = Field(default_factory=dict)
    """Replica name -> port for this job attempt; the primary's is MASTER_PORT."""
    job_attempt: int = 0
    job_retries: int = 0
    """Retries counted against Vertex's job retry limit."""
    started_at: float | None = None
    """First start (epoch seconds); the timeout and the chaos schedule count from it."""
    stopping: StopReason | None = None
    final_error: dict | None = None
    """CustomJob.error to set once every replica is down (REST form)."""
    preemption_until: float | None = None
    """End of the window in which exits belong to a preemption or a loss."""
    preempted_replica: str | None = None
    """The replica whose preemption owns that window (None for a loss's): named in the notes
    of the other replicas' exits within it."""
    chaos: list[tuple[float, int]] = Field(default_factory=list)
    chaos_next: int = 0
