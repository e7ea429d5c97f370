"""Vertex's job lifecycle, decided without a single process: replica exits, the restart budget
(5 restarts of a replica, then up to 3 retries of the whole job), crashes, preemption windows,
cancel, shutdown, timeouts, admission and the state a job ends in."""

from __future__ import annotations

import pytest

from jobs.local.custom_jobs.job import scheduling_of
from jobs.local.custom_jobs.lifecycle import (
    JOB_RETRY_LIMIT,
    LOCAL_STATES,
    WORKER_RESTART_LIMIT,
    Action,
    CancelAction,
    JobState,
    Preemptable,
    ReplicaExit,
    ReplicaStatus,
    Scheduling,
    ShutdownAction,
    StopReason,
    admits,
    classify_exit,
    deadline_exceeded,
    final_state,
    grace_over,
    job_preemptable,
    loss_cause,
    on_cancel,
    on_exit,
    on_shutdown,
    queue_wait,
    replica_preemptable,
    unrecorded_exit,
    window_after_loss,
)
from jobs.local.platform.rpc_status import Code

JOB = "projects/1/locations/us-central1/customJobs/42"
PLAIN = Scheduling()
NO_RETRIES = Scheduling(disable_retries=True)
WHOLE_JOB = Scheduling(restart_job_on_worker_restart=True)


def test_the_local_platform_sets_seven_of_vertex_s_states() -> None:
    """The states the local platform sets, by Vertex's names (the SDK reads them off the wire;
    tests/jobs/core/test_states.py checks the names against the proto)."""
    assert [s.value for s in LOCAL_STATES] == [
        "JOB_STATE_QUEUED",
        "JOB_STATE_PENDING",
        "JOB_STATE_RUNNING",
        "JOB_STATE_SUCCEEDED",
        "JOB_STATE_FAILED",
        "JOB_STATE_CANCELLING",
        "JOB_STATE_CANCELLED",
    ]
    assert {s for s in LOCAL_STATES if s.final} == {
        JobState.SUCCEEDED,
        JobState.FAILED,
        JobState.CANCELLED,
    }
    assert JobState.SUCCEEDED.short == "succeeded"


# -- what an exit is ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "primary", "preempted", "in_window", "expected"),
    [
        (0, True, False, False, ReplicaExit.SUCCEEDED),
        (0, True, True, True, ReplicaExit.SUCCEEDED),  # finishing beats a preemption
        (0, False, False, False, ReplicaExit.FINISHED),
        (0, False, True, True, ReplicaExit.FINISHED),
        (None, True, False, False, ReplicaExit.LOST),  # no exit recorded: the VM was lost
        (None, False, False, False, ReplicaExit.LOST),
        (143, False, True, False, ReplicaExit.LOST),  # the preempted replica itself
        (143, True, False, True, ReplicaExit.LOST),  # a collective stop after a preemption
        (1, False, False, True, ReplicaExit.LOST),  # any exit in the window belongs to it
        (134, False, False, True, ReplicaExit.LOST),
        (134, False, False, False, ReplicaExit.CRASHED),
        (139, True, False, False, ReplicaExit.CRASHED),
        (143, False, False, False, ReplicaExit.ERROR),  # SIGTERM outside any preemption
        (1, True, False, False, ReplicaExit.ERROR),
        (137, False, False, False, ReplicaExit.ERROR),
    ],
)
def test_exits_are_classified(
    code: int | None, primary: bool, preempted: bool, in_window: bool, expected: ReplicaExit
) -> None:
    kind = classify_exit(code, primary=primary, preempted=preempted, in_window=in_window)
    assert kind is expected


@pytest.mark.parametrize(
    ("killed", "terminated", "expected"),
    [(True, True, 137), (True, False, 137), (False, True, 143), (False, False, None)],
)
def test_an_exit_without_a_record_is_read_from_what_we_sent(
    killed: bool, terminated: bool, expected: int | None
) -> None:
    assert unrecorded_exit(killed=killed, terminated=terminated) == expected


# -- what an exit does ----------------------------------------------------------------------------


def _decide(kind: ReplicaExit, code: int | None = 1, **kw: object):
    args: dict = {"replica": "workerpool1-0", "restarts": 0, "job_retries": 0}
    args |= {"scheduling": PLAIN} | kw
    return on_exit(kind, code=code, job_name=JOB, **args)


@pytest.mark.parametrize(
    ("kind", "kw", "action", "restart", "retry", "reset"),
    [
        (ReplicaExit.SUCCEEDED, {}, Action.SUCCEED, False, False, False),
        (ReplicaExit.FINISHED, {}, Action.CONTINUE, False, False, False),
        # losses spend the replica's budget first...
        (ReplicaExit.LOST, {}, Action.RESTART_REPLICA, True, False, False),
        (ReplicaExit.LOST, {"restarts": 4}, Action.RESTART_REPLICA, True, False, False),
        (ReplicaExit.LOST, {"scheduling": WHOLE_JOB}, Action.RESTART_JOB, True, False, False),
        # ...then the job's, with every replica's budget fresh...
        (ReplicaExit.LOST, {"restarts": 5}, Action.RESTART_JOB, False, True, True),
        (
            ReplicaExit.LOST,
            {"restarts": 5, "job_retries": 2, "scheduling": WHOLE_JOB},
            Action.RESTART_JOB,
            False,
            True,
            True,
        ),
        # ...then the job fails.
        (ReplicaExit.LOST, {"restarts": 5, "job_retries": 3}, Action.FAIL, False, False, False),
        (
            ReplicaExit.LOST,
            {"restarts": 5, "scheduling": NO_RETRIES},
            Action.FAIL,
            False,
            False,
            False,
        ),
        # disableRetries does not stop a replica's own restarts after a preemption
        (ReplicaExit.LOST, {"scheduling": NO_RETRIES}, Action.RESTART_REPLICA, True, False, False),
        (ReplicaExit.CRASHED, {}, Action.RESTART_JOB, False, True, False),
        (ReplicaExit.CRASHED, {"job_retries": 2}, Action.RESTART_JOB, False, True, False),
        (ReplicaExit.CRASHED, {"job_retries": 3}, Action.FAIL, False, False, False),
        (ReplicaExit.CRASHED, {"scheduling": NO_RETRIES}, Action.FAIL, False, False, False),
        (ReplicaExit.ERROR, {}, Action.FAIL, False, False, False),
        (ReplicaExit.ERROR, {"restarts": 0, "job_retries": 0}, Action.FAIL, False, False, False),
    ],
)
def test_exit_decisions(
    kind: ReplicaExit, kw: dict, action: Action, restart: bool, retry: bool, reset: bool
) -> None:
    decision = _decide(kind, **kw)
    assert decision.action is action
    assert (decision.count_restart, decision.count_job_retry) == (restart, retry)
    assert decision.reset_restarts is reset
    assert (decision.error is not None) is (action is Action.FAIL)


def test_the_limits_are_vertex_s() -> None:
    assert (WORKER_RESTART_LIMIT, JOB_RETRY_LIMIT) == (5, 3)


def test_a_failing_replica_is_named_with_its_code_and_where_to_look() -> None:
    decision = _decide(ReplicaExit.ERROR, code=3)
    assert decision.error is not None
    assert decision.error.code is Code.INVALID_ARGUMENT
    assert "workerpool1-0 exited with a non-zero status of 3" in decision.error.message
    assert f"vtx logs {JOB} --stack local" in decision.error.message


def test_a_replica_lost_too_often_with_no_retries_left_is_unavailable() -> None:
    decision = _decide(ReplicaExit.LOST, code=None, restarts=5, job_retries=3)
    assert decision.error is not None
    assert decision.error.code is Code.UNAVAILABLE
    assert "workerpool1-0 was lost 6 times" in decision.error.message
    assert "retried 3 times" in decision.error.message


def test_a_crash_retry_is_said_in_the_service_log() -> None:
    assert (
        _decide(ReplicaExit.CRASHED, code=139).note
        == "workerpool1-0 crashed (139); retrying the job"
    )


@pytest.mark.parametrize(
    ("action", "stop"),
    [
        (Action.CONTINUE, None),
        (Action.RESTART_REPLICA, None),
        (Action.SUCCEED, StopReason.SUCCESS),
        (Action.RESTART_JOB, StopReason.RESTART),
        (Action.FAIL, StopReason.FAILED),
    ],
)
def test_actions_that_stop_every_replica(action: Action, stop: StopReason | None) -> None:
    assert action.stop is stop


@pytest.mark.parametrize(
    ("replica", "preempted", "in_window", "last", "expected"),
    [
        ("workerpool1-0", True, True, "workerpool1-0", "workerpool1-0"),  # the one preempted
        # the primary's exit in workerpool1-0's window belongs to workerpool1-0's preemption
        ("workerpool0-0", False, True, "workerpool1-0", "workerpool1-0"),
        ("workerpool0-0", False, False, "workerpool1-0", None),  # that window has closed
        ("workerpool0-0", False, True, None, None),  # a window a loss opened: no preemption
    ],
)
def test_a_loss_is_charged_to_the_preemption_it_belongs_to(
    replica: str, preempted: bool, in_window: bool, last: str | None, expected: str | None
) -> None:
    cause = loss_cause(replica, preempted=preempted, in_window=in_window, last_preempted=last)
    assert cause == expected


@pytest.mark.parametrize(
    ("replica", "preempted", "scheduling", "note"),
    [
        (
            "workerpool1-0",
            "workerpool1-0",
            PLAIN,
            "workerpool1-0 preempted; restarting workerpool1-0",
        ),
        (
            "workerpool0-0",
            "workerpool1-0",
            PLAIN,
            "workerpool1-0 preempted (workerpool0-0 stopped with it); restarting workerpool0-0",
        ),
        (
            "workerpool0-0",
            "workerpool1-0",
            WHOLE_JOB,
            "workerpool1-0 preempted (workerpool0-0 stopped with it); restarting every replica",
        ),
        ("workerpool0-0", None, PLAIN, "workerpool0-0 lost; restarting workerpool0-0"),
    ],
)
def test_the_restart_note_names_the_preempted_replica_not_the_first_exit_seen(
    replica: str, preempted: str | None, scheduling: Scheduling, note: str
) -> None:
    decision = _decide(
        ReplicaExit.LOST, code=143, replica=replica, scheduling=scheduling, preempted=preempted
    )
    assert decision.note == note


# -- the preemption window ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("until", "now", "preempted", "expected"),
    [
        (None, 100.0, True, 130.0),  # the preempted replica is down: others follow in grace
        (160.0, 100.0, True, 160.0),  # an open window is never shortened
        (110.0, 100.0, True, 130.0),  # ...but stretched to a grace period from now
        (None, 100.0, False, 160.0),  # a loss outside any window opens its own: 2 graces
        (90.0, 100.0, False, 160.0),  # a window that has closed counts as none
        (150.0, 100.0, False, 150.0),  # a loss inside a window leaves it alone
        (100.0, 100.0, False, 100.0),  # the window's last instant is still inside
    ],
)
def test_the_window_after_a_loss(
    until: float | None, now: float, preempted: bool, expected: float
) -> None:
    assert window_after_loss(until, now, preempted=preempted, grace_s=30.0) == expected


# -- requests -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("state", "stopping", "expected"),
    [
        (JobState.QUEUED, None, CancelAction.CANCEL_NOW),
        (JobState.PENDING, None, CancelAction.STOP),
        (JobState.RUNNING, None, CancelAction.STOP),
        (JobState.RUNNING, StopReason.RESTART, CancelAction.STOP),  # a retry is called off
        (JobState.RUNNING, StopReason.SUCCESS, CancelAction.NOTHING),  # the end is decided
        (JobState.RUNNING, StopReason.FAILED, CancelAction.NOTHING),
        (JobState.RUNNING, StopReason.TIMEOUT, CancelAction.NOTHING),
        (JobState.RUNNING, StopReason.SHUTDOWN, CancelAction.NOTHING),
        (JobState.CANCELLING, StopReason.CANCEL, CancelAction.NOTHING),
    ],
)
def test_cancel(state: JobState, stopping: StopReason | None, expected: CancelAction) -> None:
    assert on_cancel(state, stopping) is expected


@pytest.mark.parametrize(
    ("state", "stopping", "expected"),
    [
        (JobState.QUEUED, None, ShutdownAction.FAIL_NOW),
        (JobState.PENDING, None, ShutdownAction.FAIL_NOW),
        (JobState.PENDING, StopReason.FAILED, ShutdownAction.FAIL_NOW),
        (JobState.RUNNING, None, ShutdownAction.STOP),
        (JobState.RUNNING, StopReason.RESTART, ShutdownAction.NOTHING),
        (JobState.CANCELLING, StopReason.CANCEL, ShutdownAction.NOTHING),
    ],
)
def test_shutdown(state: JobState, stopping: StopReason | None, expected: ShutdownAction) -> None:
    assert on_shutdown(state, stopping) is expected


@pytest.mark.parametrize(
    ("state", "stopping", "in_window", "expected"),
    [
        (JobState.QUEUED, None, False, Preemptable.NOT_YET),
        (JobState.PENDING, None, False, Preemptable.NOT_YET),
        (JobState.PENDING, StopReason.FAILED, False, Preemptable.NO),  # a replica could not start
        (JobState.RUNNING, None, False, Preemptable.YES),
        # still going through the last preemption: its replicas restart, or their exits would
        # be charged to it
        (JobState.RUNNING, StopReason.RESTART, False, Preemptable.BUSY),
        (JobState.RUNNING, None, True, Preemptable.BUSY),
        (JobState.RUNNING, StopReason.FAILED, True, Preemptable.NO),  # failing is not busy
        (JobState.CANCELLING, StopReason.CANCEL, False, Preemptable.NO),
        (JobState.SUCCEEDED, None, False, Preemptable.NO),
    ],
)
def test_which_jobs_can_be_preempted(
    state: JobState, stopping: StopReason | None, in_window: bool, expected: Preemptable
) -> None:
    assert job_preemptable(state, stopping, in_window=in_window) is expected


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (ReplicaStatus.NEW, Preemptable.NOT_YET),
        (ReplicaStatus.RUNNING, Preemptable.YES),
        (ReplicaStatus.EXITED, Preemptable.NO),
    ],
)
def test_which_replicas_can_be_preempted(status: ReplicaStatus, expected: Preemptable) -> None:
    assert replica_preemptable(status) is expected


# -- timers ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("term_at", "now", "expected"),
    [(None, 1e9, False), (100.0, 129.9, False), (100.0, 130.0, True), (100.0, 200.0, True)],
)
def test_sigkill_is_due_after_the_grace_period(
    term_at: float | None, now: float, expected: bool
) -> None:
    assert grace_over(term_at, now, grace_s=30.0) is expected


@pytest.mark.parametrize(
    ("started_at", "now", "timeout_s", "exceeded"),
    [
        (None, 1e9, 10.0, False),  # never started
        (100.0, 1e9, None, False),  # no timeout
        (100.0, 110.0, 10.0, False),  # exactly at the limit is still within it
        (100.0, 110.5, 10.0, True),
    ],
)
def test_the_timeout(
    started_at: float | None, now: float, timeout_s: float | None, exceeded: bool
) -> None:
    error = deadline_exceeded(started_at, now, timeout_s)
    assert (error is not None) is exceeded
    if error is not None:
        assert error.code is Code.DEADLINE_EXCEEDED
        assert "timeout of 10 s" in error.message


@pytest.mark.parametrize(
    ("value", "expected"),
    [(None, None), ("", None), ("3600s", 3600.0), ("1.5s", 1.5), ("0s", None), ("infs", None)],
)
def test_a_stored_timeout_reads_as_seconds_and_zero_or_garbage_as_none(
    value: str | None, expected: float | None
) -> None:
    job = {"jobSpec": {"scheduling": {"timeout": value}}}
    assert scheduling_of(job).timeout_s == expected


# -- ends and admission ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reason", "expected"),
    [
        (StopReason.SUCCESS, JobState.SUCCEEDED),
        (StopReason.CANCEL, JobState.CANCELLED),
        (StopReason.FAILED, JobState.FAILED),
        (StopReason.TIMEOUT, JobState.FAILED),
        (StopReason.SHUTDOWN, JobState.FAILED),
        (StopReason.RESTART, None),  # not an end: the job runs again
    ],
)
def test_the_state_a_job_ends_in(reason: StopReason, expected: JobState | None) -> None:
    assert final_state(reason) is expected


Q, R = JobState.QUEUED, JobState.RUNNING


@pytest.mark.parametrize(
    ("queue", "position", "expected"),
    [
        ([(Q, 8)], 0, True),  # exactly the platform's size
        ([(Q, 9)], 0, False),
        ([(R, 6), (Q, 2)], 1, True),
        ([(R, 6), (Q, 3)], 1, False),
        ([(Q, 3), (Q, 1)], 1, True),
        ([(R, 4), (Q, 8), (Q, 1)], 2, False),  # first in, first out: no overtaking
        ([(Q, 8), (R, 1)], 0, False),  # running jobs count wherever they sit
        ([(JobState.CANCELLING, 8), (Q, 1)], 1, False),  # still holding its replicas
    ],
)
def test_fifo_admission(queue: list[tuple[JobState, int]], position: int, expected: bool) -> None:
    assert admits(queue, position, max_replicas=8) is expected


def test_a_queued_job_says_its_place_and_what_holds_the_replicas() -> None:
    queue = [
        (JobState.RUNNING, 6),
        (JobState.QUEUED, 4),
        (JobState.PENDING, 2),
        (JobState.QUEUED, 1),
    ]
    wait = queue_wait(queue, 3)
    assert (wait.position, wait.queued, wait.in_use, wait.needs) == (2, 2, 8, 1)
    note = wait.note(max_replicas=8)
    assert "position 2 of 2" in note
    assert "8 are in use and this job needs 1" in note
