"""`jobs.launch.run` walking a capacity ladder, with a scripted Vertex, a fake clock and no
sleeps: what each attempt's states make it do, what `vtx launch` says of each move, and its exit
code."""

from __future__ import annotations

import io
from collections.abc import Iterator

import pytest
from rich.console import Console

from jobs.launch.plan import LaunchPlan, Rung
from jobs.launch.run import Runner, drive
from jobs.vertex.job_records import JobRecord
from tests.jobs.launch.walk_fakes import (
    RUN_ID,
    STOCKOUT,
    Clock,
    FakeRest,
    FakeVertex,
    rung,
)
from vtx.views.launch import print_event


def walk(rungs: list[Rung], vertex: FakeVertex, rest: FakeRest) -> tuple[int, str]:
    buffer = io.StringIO()
    out = Console(file=buffer, width=200)
    clock = Clock()
    plan = LaunchPlan(RUN_ID, rungs, ladder=True)
    runner = Runner(plan, vertex, poll_s=10.0, sleep=clock.sleep, clock=clock, rest=rest)  # type: ignore[arg-type]
    code = drive(runner.events(), lambda event: print_event(out, plan, False, event))
    return code, buffer.getvalue()


@pytest.fixture
def two() -> Iterator[list[Rung]]:
    yield [rung(1, "spot"), rung(2, "standard")]


def test_a_rung_pending_past_its_max_wait_is_cancelled_and_the_next_runs(two) -> None:
    rest = FakeRest({"job-1": ["JOB_STATE_PENDING"], "job-2": ["JOB_STATE_RUNNING"]})
    code, out = walk(two, FakeVertex(), rest)
    assert code == 0, out
    assert rest.cancelled == ["job-1"]
    assert (
        "rung 1 us-central1 1xL4 SPOT: still PENDING after 60 s (max_wait); cancelling; "
        "rung 2 us-central1 1xL4 STANDARD" in out
    )
    assert "rung 2 us-central1 1xL4 STANDARD: running; run id: walk-run" in out


def test_a_stockout_moves_on_without_cancelling_the_failed_attempt(two) -> None:
    rest = FakeRest({"job-1": ["JOB_STATE_QUEUED", STOCKOUT], "job-2": ["JOB_STATE_SUCCEEDED"]})
    code, out = walk(two, FakeVertex(), rest)
    assert code == 0, out
    assert rest.cancelled == []
    assert "rung 1 us-central1 1xL4 SPOT: STOCKOUT after 10 s; rung 2" in out
    assert "rung 2 us-central1 1xL4 STANDARD: succeeded" in out


def test_a_quota_429_on_create_moves_to_the_next_rung(two) -> None:
    vertex = FakeVertex(refuse=("SPOT",))
    code, out = walk(two, vertex, FakeRest({"job-1": ["JOB_STATE_RUNNING"]}))
    assert code == 0, out
    assert vertex.created == ["job-1"]
    assert "rung 1 us-central1 1xL4 SPOT: quota exceeded (429 on create); rung 2" in out


def test_when_every_rung_fails_the_exit_is_1_naming_each_reason(two) -> None:
    vertex = FakeVertex(refuse=("SPOT",))
    code, out = walk(two, vertex, FakeRest({"job-1": [STOCKOUT]}))
    assert code == 1
    assert "no rung got capacity: rung 1: quota exceeded (429 on create); rung 2: STOCKOUT" in out


def test_the_last_rung_waits_past_its_max_wait(two) -> None:
    states = ["JOB_STATE_PENDING"] * 20 + ["JOB_STATE_RUNNING"]
    rest = FakeRest({"job-1": [STOCKOUT], "job-2": states})
    code, out = walk(two, FakeVertex(), rest)
    assert code == 0, out
    assert rest.cancelled == []


def test_a_skipped_rung_is_never_submitted(two) -> None:
    hopeless = Rung(1, two[0].plan, two[0].check, None, "zero quota for x in us-central1")
    vertex = FakeVertex()
    code, out = walk([hopeless, two[1]], vertex, FakeRest({"job-1": ["JOB_STATE_RUNNING"]}))
    assert code == 0, out
    assert vertex.created == ["job-1"]
    assert "rung 1 us-central1 1xL4 SPOT: submitting" not in out
    assert "rung 2 us-central1 1xL4 STANDARD: running" in out


def test_a_failure_of_the_program_stops_the_walk(two) -> None:
    vertex = FakeVertex()
    rest = FakeRest({"job-1": [("JOB_STATE_FAILED", "exit status 1")]})
    code, out = walk(two, vertex, rest)
    assert code == 1
    assert vertex.created == ["job-1"]
    assert "rung 1 us-central1 1xL4 SPOT: FAILED: exit status 1" in out


def test_ctrl_c_leaves_the_attempt_running_and_says_how_to_cancel(two) -> None:
    class Interrupting(FakeRest):
        def get(self, name: str) -> JobRecord:
            raise KeyboardInterrupt

    rest = Interrupting({})
    code, out = walk(two, FakeVertex(), rest)
    assert code == 130
    assert rest.cancelled == []
    assert "interrupted: job-1 is left running; `vtx cancel walk-run` cancels the run" in out


def test_an_attempt_that_expired_before_its_cancel_is_not_cancelled(two) -> None:
    """EXPIRED is an end: the walk moves on without cancelling a job that already ended (Vertex
    refuses to cancel one: FAILED_PRECONDITION)."""
    rest = FakeRest({"job-1": ["JOB_STATE_PENDING"] * 7 + ["JOB_STATE_EXPIRED"]})
    rest.script["job-2"] = ["JOB_STATE_RUNNING"]
    code, out = walk(two, FakeVertex(), rest)
    assert code == 0, out
    assert rest.cancelled == []
    assert "rung 1 us-central1 1xL4 SPOT: still PENDING after 60 s (max_wait); rung 2" in out


@pytest.mark.parametrize("end", ["JOB_STATE_EXPIRED", "JOB_STATE_PARTIALLY_SUCCEEDED"])
def test_an_attempt_that_ends_otherwise_than_succeeded_or_failed_stops_the_walk(
    two, end: str
) -> None:
    vertex = FakeVertex()
    rest = FakeRest({"job-1": ["JOB_STATE_QUEUED", (end, "some results are missing")]})
    code, out = walk(two, vertex, rest)
    assert code == 1, out
    assert vertex.created == ["job-1"]
    assert rest.cancelled == []
    shown = end.removeprefix("JOB_STATE_")
    assert f"rung 1 us-central1 1xL4 SPOT: {shown}: some results are missing" in out
