"""`jobs.launch.run.Runner` on its own: the typed events a capacity ladder's walk yields, with a
scripted Vertex and a clock that moves only when the walk sleeps (how `vtx launch` prints them
is tested in tests/vtx/jobs/launch/test_ladder_walk.py)."""

from __future__ import annotations

from jobs.launch.plan import LaunchPlan, Rung
from jobs.launch.run import Event, Failed, MovedOn, Placed, Runner, Submitted, Submitting
from tests.jobs.launch.walk_fakes import RUN_ID, STOCKOUT, Clock, FakeRest, FakeVertex, rung


def events(rungs: list[Rung], vertex: FakeVertex, rest: FakeRest) -> tuple[int, list[Event]]:
    """Every event of the walk and its exit code, the way any caller consumes it."""
    clock = Clock()
    plan = LaunchPlan(RUN_ID, rungs, ladder=True)
    runner = Runner(plan, vertex, poll_s=10.0, sleep=clock.sleep, clock=clock, rest=rest)  # type: ignore[arg-type]
    walk, seen = runner.events(), []
    try:
        while True:
            seen.append(next(walk))
    except StopIteration as end:
        return end.value, seen


def test_a_stockout_moves_on_to_the_next_rung_which_is_placed() -> None:
    two = [rung(1, "spot"), rung(2, "standard")]
    rest = FakeRest({"job-1": ["JOB_STATE_QUEUED", STOCKOUT], "job-2": ["JOB_STATE_RUNNING"]})
    code, seen = events(two, FakeVertex(), rest)
    assert code == 0
    assert [type(e) for e in seen] == [
        Submitting,
        Submitted,
        MovedOn,
        Submitting,
        Submitted,
        Placed,
    ]
    moved = next(e for e in seen if isinstance(e, MovedOn))
    assert (moved.rung.number, moved.then and moved.then.number, moved.cancelled) == (1, 2, False)
    assert "STOCKOUT" in (moved.reason or "")
    assert [e.name for e in seen if isinstance(e, Submitted)] == ["job-1", "job-2"]


def test_a_rung_pending_past_its_max_wait_is_cancelled_before_moving_on() -> None:
    two = [rung(1, "spot"), rung(2, "standard")]
    rest = FakeRest({"job-1": ["JOB_STATE_PENDING"], "job-2": ["JOB_STATE_SUCCEEDED"]})
    code, seen = events(two, FakeVertex(), rest)
    moved = next(e for e in seen if isinstance(e, MovedOn))
    assert code == 0 and moved.cancelled and rest.cancelled == ["job-1"]
    assert seen[-1] == Placed(two[1], succeeded=True)


def test_when_every_rung_is_refused_the_walk_fails_with_exit_1() -> None:
    two = [rung(1, "spot"), rung(2, "standard")]
    code, seen = events(two, FakeVertex(refuse=("SPOT", "STANDARD")), FakeRest({}))
    assert code == 1
    assert isinstance(seen[-1], Failed)
    assert [e.then and e.then.number for e in seen if isinstance(e, MovedOn)] == [2, None]
