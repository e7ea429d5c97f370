"""Vertex's job lifecycle as pure decisions: what a replica's exit, a preemption, a timeout, a
cancel or a shutdown means for a job, and which state the job ends in.

No processes, clocks or files here: the executor (jobs/local/custom_jobs/executor.py) observes
processes,
asks these functions what to do, and does it. Rules (retry limits per docs/vertex-facts.md,
"Limits": restarts and retries; which exits count as infrastructure is ours):
- the job succeeds when the primary (workerpool0-0) exits 0; other replicas are then stopped;
  another replica exiting 0 has finished its part and the job goes on;
- a replica exiting non-zero by itself fails the job; 134/139 (SIGABRT/SIGSEGV) retry the whole
  job up to 3 times unless ``disableRetries``;
- a replica lost to a preemption or to an infrastructure fault (its runner vanished, no exit
  recorded) is restarted, up to 5 times per replica, then the whole job is retried up to 3
  times; with ``restartJobOnWorkerRestart`` every replica restarts with it;
- exits of other replicas in the window after a preemption belong to it: the trainer turns one
  SIGTERM into a collective stop in which every rank exits 143 by design, not by failure.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum, StrEnum

from jobs.core.catalog import vertex_default_timeout_s, vertex_limits
from jobs.core.states import JobState
from jobs.local.platform.rpc_status import Code, JobError

WORKER_RESTART_LIMIT = vertex_limits().replica_restarts_max
"""Restarts of one replica after losses before the whole job is retried (Vertex's limit)."""
JOB_RETRY_LIMIT = vertex_limits().job_retries_max
"""Retries of the whole job before it fails (Vertex's limit)."""
CRASH_EXIT_CODES = frozenset({134, 139})
"""SIGABRT and SIGSEGV as shell exit codes: a crash, worth retrying the job."""
SIGKILL_EXIT_CODE = 137
SIGTERM_EXIT_CODE = 143
PRIMARY = "workerpool0-0"
CHAOS_RATE_LABEL = "vtx-chaos-per-hour"
CHAOS_SEED_LABEL = "vtx-chaos-seed"
CHAOS_MAX_EVENTS = 1000
"""A bound on one job's chaos schedule, whatever rate a label asks for."""
PREEMPTION_EXITS_NOTE = (
    "expected now: this SIGTERM stops every rank with exit code 143; torch elastic's lines "
    "about it ('Received 15 death signal', 'closing signal SIGTERM', 'failed (exitcode: 143)') "
    "and the replicas' exits with code 143 are the preemption, not a failure; the replicas "
    "restart (our trainer resumes from its last committed checkpoint)"
)
"""Said once per preemption in the service log, before the lines it explains."""


LOCAL_STATES = (
    JobState.QUEUED,
    JobState.PENDING,
    JobState.RUNNING,
    JobState.SUCCEEDED,
    JobState.FAILED,
    JobState.CANCELLING,
    JobState.CANCELLED,
)
"""The states the local platform sets, in the order a job goes through them; Vertex's others
(PAUSED, EXPIRED, UPDATING, PARTIALLY_SUCCEEDED) never happen here."""
ACTIVE_STATES = tuple(s for s in LOCAL_STATES if not s.final)
"""The ones of a job the executor still drives (QUEUED, PENDING, RUNNING, CANCELLING)."""


class ReplicaStatus(StrEnum):
    NEW = "new"
    RUNNING = "running"
    EXITED = "exited"


class StopReason(StrEnum):
    """Why every replica of a job is being stopped; decides what happens once they are down."""

    SUCCESS = "success"
    FAILED = "failed"
    CANCEL = "cancel"
    TIMEOUT = "timeout"
    RESTART = "restart"
    SHUTDOWN = "shutdown"


CANCELED = JobError(Code.CANCELLED, "CANCELED")
PLATFORM_STOPPED = JobError(
    Code.UNAVAILABLE, "The local platform was stopped (vtx local down) while the job ran."
)


@dataclass(frozen=True)
class Scheduling:
    """The parts of ``jobSpec.scheduling`` the lifecycle reads."""

    spot: bool = False
    timeout_s: float | None = None
    disable_retries: bool = False
    restart_job_on_worker_restart: bool = False


# -- replica exits --------------------------------------------------------------------------------


class ReplicaExit(Enum):
    """What one replica's exit means."""

    SUCCEEDED = "the primary exited 0: the job succeeded"
    FINISHED = "a replica other than the primary exited 0: the job goes on"
    LOST = "preempted, lost with no exit recorded, or stopped in a preemption's window"
    CRASHED = "exited 134 or 139 by itself"
    ERROR = "exited with another non-zero code by itself"


def stamp_state(resource: dict, state: JobState, stamp: str, error: JobError | None = None) -> None:
    """A state change written into a job's (or a study's) resource as Vertex shows it:
    ``updateTime`` always, ``startTime`` at the first RUNNING, ``endTime`` at the end, and the
    error when there is one."""
    resource["state"] = state.value
    resource["updateTime"] = stamp
    if state is JobState.RUNNING and "startTime" not in resource:
        resource["startTime"] = stamp
    if state.final:
        resource["endTime"] = stamp
    if error is not None:
        resource["error"] = error.rest()


def in_window(preemption_until: float | None, now: float) -> bool:
    """Whether ``now`` falls in the window after a preemption or a loss."""
    return preemption_until is not None and now <= preemption_until


def classify_exit(
    code: int | None, *, primary: bool, preempted: bool, in_window: bool
) -> ReplicaExit:
    """``code`` None: no exit was recorded (the runner vanished, as a lost VM)."""
    if code == 0:
        return ReplicaExit.SUCCEEDED if primary else ReplicaExit.FINISHED
    if code is None or preempted or in_window:
        return ReplicaExit.LOST
    if code in CRASH_EXIT_CODES:
        return ReplicaExit.CRASHED
    return ReplicaExit.ERROR


def window_after_loss(
    preemption_until: float | None, now: float, *, preempted: bool, grace_s: float
) -> float | None:
    """The preemption window once a replica is lost: the preempted replica is down and the
    others follow within a grace period; a loss outside any window opens one of its own (two
    grace periods, as a preemption does); a loss inside a window leaves it as it is."""
    if preempted:
        return max(preemption_until or now, now + grace_s)
    if not in_window(preemption_until, now):
        return now + 2 * grace_s
    return preemption_until


def preemption_window(now: float, grace_s: float) -> float:
    """The window a new preemption opens: SIGTERM now, SIGKILL after grace, and as long again
    for the other replicas' collective stop."""
    return now + 2 * grace_s


class Action(Enum):
    CONTINUE = "nothing to do: the job goes on"
    RESTART_REPLICA = "start this replica again (its next restart)"
    SUCCEED = "stop every replica; the job succeeds"
    RESTART_JOB = (
        "stop every replica, then start them all again: a retry of the job when the decision "
        "counts one (count_job_retry), else a restart of every replica"
    )
    FAIL = "stop every replica; the job fails"

    @property
    def stop(self) -> StopReason | None:
        """The reason every replica is stopped for, if they are."""
        return _STOPS.get(self)


_STOPS = {
    Action.SUCCEED: StopReason.SUCCESS,
    Action.RESTART_JOB: StopReason.RESTART,
    Action.FAIL: StopReason.FAILED,
}


@dataclass(frozen=True)
class Decision:
    """What to do after an exit, and which counters it spends."""

    action: Action
    count_restart: bool = False
    """The replica's restart counts against its budget (WORKER_RESTART_LIMIT)."""
    count_job_retry: bool = False
    """The job's retry counts against JOB_RETRY_LIMIT."""
    reset_restarts: bool = False
    """Every replica's restart budget starts again (the job is retried)."""
    error: JobError | None = None
    note: str | None = None
    """A line for the job's service log."""


def may_retry_job(job_retries: int, scheduling: Scheduling) -> bool:
    return not scheduling.disable_retries and job_retries < JOB_RETRY_LIMIT


def on_exit(
    kind: ReplicaExit,
    *,
    code: int | None,
    replica: str,
    restarts: int,
    job_retries: int,
    scheduling: Scheduling,
    job_name: str,
    preempted: str | None = None,
) -> Decision:
    """What a classified exit of ``replica`` (restarted ``restarts`` times; the job retried
    ``job_retries`` times) does to the job; ``preempted`` names the replica whose preemption
    a loss belongs to (see ``loss_cause``)."""
    if kind is ReplicaExit.SUCCEEDED:
        return Decision(Action.SUCCEED)
    if kind is ReplicaExit.FINISHED:
        return Decision(Action.CONTINUE)
    if kind is ReplicaExit.LOST:
        return on_loss(
            replica=replica,
            restarts=restarts,
            job_retries=job_retries,
            scheduling=scheduling,
            preempted=preempted,
        )
    if kind is ReplicaExit.CRASHED and may_retry_job(job_retries, scheduling):
        return Decision(
            Action.RESTART_JOB,
            count_job_retry=True,
            note=f"{replica} crashed ({code}); retrying the job",
        )
    message = (
        f"The replica {replica} exited with a non-zero status of {code}. "
        f"Termination reason: Error. To find out more about why your job exited please "
        f"check the logs: vtx logs {job_name} --stack local"
    )
    return Decision(Action.FAIL, error=JobError(Code.INVALID_ARGUMENT, message))


def loss_cause(
    replica: str, *, preempted: bool, in_window: bool, last_preempted: str | None
) -> str | None:
    """The replica whose preemption the loss of ``replica`` belongs to: itself when it was the
    one preempted, the last one preempted when the loss falls in that preemption's window (the
    trainer's collective stop brings every rank down with it, often the primary first), None
    for a loss of its own (a vanished runner)."""
    if preempted:
        return replica
    return last_preempted if in_window else None


def _loss_note(replica: str, preempted: str | None) -> str:
    """How the service log says why ``replica`` is down: the preempted replica is named, not
    merely the first one whose exit the executor saw."""
    if preempted is None:
        return f"{replica} lost"
    if preempted == replica:
        return f"{replica} preempted"
    return f"{preempted} preempted ({replica} stopped with it)"


def on_loss(
    *,
    replica: str,
    restarts: int,
    job_retries: int,
    scheduling: Scheduling,
    preempted: str | None = None,
) -> Decision:
    """A replica lost to a preemption (of itself, or of ``preempted`` whose window it fell in)
    or an infrastructure fault: Vertex's restart budget."""
    if restarts >= WORKER_RESTART_LIMIT:
        if may_retry_job(job_retries, scheduling):
            return Decision(
                Action.RESTART_JOB,
                count_job_retry=True,
                reset_restarts=True,
                note=f"{replica} restarted too often; retrying the job",
            )
        message = (
            f"The replica {replica} was lost {WORKER_RESTART_LIMIT + 1} times "
            f"(preemption or infrastructure) and the job was retried {job_retries} "
            f"times; giving up."
        )
        return Decision(Action.FAIL, error=JobError(Code.UNAVAILABLE, message))
    why = _loss_note(replica, preempted)
    if scheduling.restart_job_on_worker_restart:
        return Decision(
            Action.RESTART_JOB, count_restart=True, note=f"{why}; restarting every replica"
        )
    return Decision(Action.RESTART_REPLICA, count_restart=True, note=f"{why}; restarting {replica}")


def unrecorded_exit(*, killed: bool, terminated: bool) -> int | None:
    """The exit code of a replica whose runner died without a record: our SIGKILL, our SIGTERM
    arriving before its handler was installed (a replica stopped while starting), or None for
    a lost "machine"."""
    if killed:
        return SIGKILL_EXIT_CODE
    return SIGTERM_EXIT_CODE if terminated else None


# -- requests and timers --------------------------------------------------------------------------


class CancelAction(Enum):
    CANCEL_NOW = "a queued job is cancelled at once: nothing runs"
    STOP = "stop every replica; the job is CANCELLING until they are down"
    NOTHING = "the job's end is already decided (or it is cancelling)"


def on_cancel(state: JobState, stopping: StopReason | None) -> CancelAction:
    """Cancel of an active job. A pending job retry is overridden; a decided end is not."""
    if state is JobState.QUEUED:
        return CancelAction.CANCEL_NOW
    if stopping in (None, StopReason.RESTART):
        return CancelAction.STOP
    return CancelAction.NOTHING


class ShutdownAction(Enum):
    FAIL_NOW = "nothing runs yet: the job fails at once"
    STOP = "stop every replica; the job fails once they are down"
    NOTHING = "already stopping for a reason of its own"


def on_shutdown(state: JobState, stopping: StopReason | None) -> ShutdownAction:
    """`vtx local down` with the job active."""
    if state in (JobState.QUEUED, JobState.PENDING):
        return ShutdownAction.FAIL_NOW
    if stopping is None:
        return ShutdownAction.STOP
    return ShutdownAction.NOTHING


class Preemptable(Enum):
    YES = "running"
    NOT_YET = "will run, but does not yet (queued, pending, starting)"
    BUSY = "still going through a preemption, or restarting"
    NO = "not running and will not"


def job_preemptable(
    state: JobState, stopping: StopReason | None, *, in_window: bool = False
) -> Preemptable:
    """Whether a job can take a preemption now. Not while it still goes through the last one
    (``in_window``) or restarts: every exit in that window is charged to the first preemption,
    so a second one would be folded into it, neither named nor counted (chaos skips it too)."""
    if stopping is None and state in (JobState.QUEUED, JobState.PENDING):
        return Preemptable.NOT_YET
    if state is not JobState.RUNNING or stopping not in (None, StopReason.RESTART):
        return Preemptable.NO
    if stopping is StopReason.RESTART or in_window:
        return Preemptable.BUSY
    return Preemptable.YES


def replica_preemptable(status: ReplicaStatus) -> Preemptable:
    if status is ReplicaStatus.NEW:
        return Preemptable.NOT_YET
    return Preemptable.YES if status is ReplicaStatus.RUNNING else Preemptable.NO


def grace_over(term_at: float | None, now: float, grace_s: float) -> bool:
    """Whether a replica sent SIGTERM at ``term_at`` is due its SIGKILL."""
    return term_at is not None and now >= term_at + grace_s


def deadline_exceeded(
    started_at: float | None, now: float, timeout_s: float | None
) -> JobError | None:
    """The error of a job past its ``scheduling.timeout`` (counted from its first start,
    across job retries), or None while it is within it."""
    if started_at is None or timeout_s is None or now - started_at <= timeout_s:
        return None
    message = f"The job ran longer than its timeout of {timeout_s:g} s and was stopped."
    return JobError(Code.DEADLINE_EXCEEDED, message)


def final_state(reason: StopReason) -> JobState | None:
    """The state a job ends in once every replica stopped for ``reason``; None: they all start
    again (a restart of every replica, or a retry)."""
    if reason is StopReason.RESTART:
        return None
    return {StopReason.SUCCESS: JobState.SUCCEEDED, StopReason.CANCEL: JobState.CANCELLED}.get(
        reason, JobState.FAILED
    )


def admits(queue: Sequence[tuple[JobState, int]], position: int, max_replicas: int) -> bool:
    """FIFO admission: the queued job at ``position`` of the active jobs (state, replicas), in
    submission order, starts when it and every older queued job fit beside the running ones."""
    busy = sum(replicas for state, replicas in queue if state is not JobState.QUEUED)
    for i, (state, replicas) in enumerate(queue):
        if i == position:
            return busy + replicas <= max_replicas
        if state is JobState.QUEUED:
            busy += replicas
    return False


@dataclass(frozen=True)
class QueueWait:
    """Why a queued job waits: its place among the queued jobs and what the running hold."""

    position: int
    """1 for the next job to start."""
    queued: int
    in_use: int
    """Replicas the jobs already admitted hold."""
    needs: int

    def note(self, max_replicas: int) -> str:
        """The service log's line: CustomJob has no field for why a job waits."""
        return (
            f"waiting in the queue: position {self.position} of {self.queued}; the local "
            f"platform runs at most {max_replicas} replicas at once (--max-replicas), "
            f"{self.in_use} are in use and this job needs {self.needs}; it stays "
            f"JOB_STATE_QUEUED until they are free, first in first out"
        )


def queue_wait(queue: Sequence[tuple[JobState, int]], position: int) -> QueueWait:
    """Where the queued job at ``position`` of the active jobs (see ``admits``) stands."""
    queued = [i for i, (state, _) in enumerate(queue) if state is JobState.QUEUED]
    in_use = sum(replicas for state, replicas in queue if state is not JobState.QUEUED)
    return QueueWait(queued.index(position) + 1, len(queued), in_use, queue[position][1])


# -- chaos ----------------------------------------------------------------------------------------


class ChaosLabelError(ValueError):
    """The chaos labels of a job are not numbers."""


def chaos_schedule(
    scheduling: Scheduling,
    labels: Mapping[str, str],
    replicas: int,
    rate_per_hour: float,
    seed: int,
) -> list[tuple[float, int]]:
    """Seeded Poisson preemptions for Spot jobs: (seconds after start, replica index).

    Drawn once at submission so a drill with the same seed and job shape preempts the same
    replicas at the same offsets. The labels override the platform's rate and seed."""
    if not scheduling.spot:
        return []
    try:
        rate = float(labels.get(CHAOS_RATE_LABEL, rate_per_hour))
        seed = int(labels.get(CHAOS_SEED_LABEL, seed))
    except ValueError:
        rate, seed = math.nan, 0
    if not math.isfinite(rate):
        raise ChaosLabelError(
            f"labels {CHAOS_RATE_LABEL} and {CHAOS_SEED_LABEL} must be whole numbers "
            f'(preemptions per replica-hour, and a seed), e.g. {CHAOS_RATE_LABEL}: "2"'
        )
    if rate <= 0:
        return []
    rng = random.Random(seed)
    # Without a timeout, a schedule is drawn as far ahead as Vertex's default timeout.
    horizon_s = scheduling.timeout_s or vertex_default_timeout_s()
    schedule: list[tuple[float, int]] = []
    at = 0.0
    while len(schedule) < CHAOS_MAX_EVENTS:
        at += rng.expovariate(rate * replicas / 3600.0)
        if at > horizon_s:
            break
        schedule.append((at, rng.randrange(replicas)))
    return schedule
