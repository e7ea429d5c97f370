"""The executor's memory of one job, persisted next to its REST record in the store.

Everything the executor must know after a control-plane crash to re-attach to running replicas
(pids and their create times, log and exit files, restart and retry counts, timers) lives here,
so a restarted executor picks up where the last one stopped. The words are jobs/runs/watch.py's: a
restart starts one replica again inside the job, a retry runs all of them again after a crash.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from jobs.local.custom_jobs.lifecycle import ReplicaStatus, StopReason


class Replica(BaseModel):
    name: str
    pool: int
    index: int
    restart: int = 0
    """Which restart of this replica runs: 0 its first start, then one more at every start
    (a restart of its own, of every replica, or a retry). Names its log and exit files and
    tags its log lines."""
    restarts_counted: int = 0
    """Restarts counted against Vertex's worker restart limit (a retry starts them again)."""
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
    hindered: str | None = None
    """``stalled`` or ``slowed xN`` (`vtx local stall|slow`): let go before any stop signal."""

    @property
    def running(self) -> bool:
        return self.status is ReplicaStatus.RUNNING


class Runtime(BaseModel):
    replicas: list[Replica]
    ports: dict[str, int] = Field(default_factory=dict)
    """Replica name -> port for this run of every replica (new at each retry or restart of
    all); the primary's is MASTER_PORT."""
    retries: int = 0
    """Retries of the job, counted against Vertex's job retry limit."""
    retrying: bool = False
    """The stop under way (StopReason.RESTART) ends in a retry, which the decision counted,
    rather than a restart of every replica (restartJobOnWorkerRestart)."""
    started_at: float | None = None
    """First start (epoch seconds); the timeout and the chaos schedule count from it, across
    restarts and retries."""
    waiting_since: float | None = None
    """When the job began to wait PENDING for accelerators (epoch seconds); FLEX_START's
    maxWaitDuration counts from it. None: not waiting."""
    queue_position: int | None = None
    """The queue position last said in the job's service log while it waits QUEUED."""
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
    env: dict[str, str] = Field(default_factory=dict)
    """Variables the platform adds to every replica beside Vertex's usual ones: a trial's
    (CLOUD_ML_TRIAL_ID, CLOUD_ML_HP_METRIC_TAG, CLOUD_ML_HP_METRIC_FILE)."""
