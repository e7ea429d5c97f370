"""Progress guards in the reconciler, as a table: a guarded run's record, its running attempt
and its newest heartbeat -> the actions, and the record they leave (why, in its moves and its
outcome). Starting, restoring and evaluating are never hangs; a beat of an earlier attempt says
nothing of the current one."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from jobs.control.driver import GuardBreach, guard_breaches
from jobs.control.progress import judge_progress
from jobs.control.reconcile import (
    MAX_GUARD_RESTARTS,
    Breach,
    Finish,
    Observed,
    Slow,
    Submit,
    Wait,
    apply,
    decide,
)
from jobs.control.record import RunRecord
from jobs.core.guard import RunGuard
from jobs.core.heartbeat import Heartbeat, Phase
from tests.jobs.control.test_reconcile import CATALOG, NOW, PARENT, attempt, job, record

STALL = RunGuard(no_progress_s=180.0)
RUNNING = f"{PARENT}/1"


def ago(seconds: float) -> datetime:
    return NOW - timedelta(seconds=seconds)


def beat(
    phase: Phase = Phase.TRAINING,
    stepped_s: float | None = 10,
    since_s: float = 3000,
    job_id: str | None = "1",
    time_s: float = 1,
    rate: float | None = 500.0,
) -> Heartbeat:
    return Heartbeat(
        job=job_id, phase=phase, phase_since=ago(since_s), step=42, tokens=4200,
        tokens_per_s=rate, window_s=60, stepped_at=None if stepped_s is None else ago(stepped_s),
        time=ago(time_s),
    )  # fmt: skip


def guarded(guard: RunGuard = STALL, rungs: int = 1, **kw) -> RunRecord:
    return record(attempt("a1", 0, RUNNING, placed=True, **kw), rungs=rungs, guard=guard)


def seen(heartbeat: Heartbeat | None) -> Observed:
    return Observed([job(1, "RUNNING", "a1", ran_h=1.0)], heartbeat=heartbeat)


WATCH = [Wait(f"watch {RUNNING} (RUNNING)")]

QUIET = [
    ("a step 10 s ago", beat()),
    ("no heartbeat yet: starting", None),
    ("starting for an hour (no step yet)", beat(Phase.STARTING, stepped_s=None, time_s=3600)),
    ("restoring for an hour", beat(Phase.RESTORING, stepped_s=None, time_s=3600)),
    ("evaluating for an hour after a step", beat(Phase.EVALUATING, stepped_s=3600, time_s=3600)),
    ("saving for an hour", beat(Phase.SAVING, stepped_s=3600, time_s=3600)),
    ("training but no first step for an hour", beat(stepped_s=None, since_s=3600)),
    ("an earlier attempt's beat, stale", beat(job_id="0", stepped_s=3600, time_s=3600)),
    ("back to training after a long eval, 60 s ago", beat(stepped_s=3600, since_s=60)),
    ("a beat naming no job, written before this attempt", beat(job_id=None, stepped_s=4000,
                                                               time_s=4000, since_s=4000)),
]  # fmt: skip


@pytest.mark.parametrize(("case", "heartbeat"), QUIET, ids=[c[0] for c in QUIET])
def test_no_hang_is_seen_where_there_is_none(case: str, heartbeat: Heartbeat | None) -> None:
    assert decide(guarded(), seen(heartbeat), NOW, CATALOG) == WATCH


def test_no_step_past_no_progress_cancels_the_run_and_says_why() -> None:
    run = guarded()
    actions = decide(run, seen(beat(stepped_s=200)), NOW, CATALOG)
    (breach,) = actions
    assert isinstance(breach, Breach) and breach.action == "cancel" and breach.job == RUNNING
    assert breach.reason.startswith("guard.no_progress: no training step for 3m 20s (limit 3m")
    assert "the last was step 42 at 2026-11-28 11:56:40 UTC" in breach.reason
    after = apply(run, actions, NOW)
    assert after.stopping == breach.reason and after.breaches == [f"cancel: {breach.reason}"]
    assert after.moves[-1].what == f"cancel {RUNNING} to stop the run: {breach.reason}"
    cancelling = decide(after, seen(beat(stepped_s=260)), NOW, CATALOG)
    assert cancelling == [Wait(f"{RUNNING} is being cancelled")]
    ended = Observed([job(1, "CANCELLED", "a1", ran_h=1.0)])
    assert decide(after, ended, NOW, CATALOG) == [Finish("CANCELLED", breach.reason)]


def test_restart_submits_the_same_rung_again_until_it_has_restarted_enough() -> None:
    run = guarded(RunGuard(no_progress_s=180.0, action="restart"))
    (breach,) = decide(run, seen(beat(stepped_s=200)), NOW, CATALOG)
    assert breach.action == "restart"
    after = apply(run, [breach], NOW)
    assert after.stopping is None and after.current.breached == breach.reason
    ended = Observed([job(1, "CANCELLED", "a1", ran_h=1.0)])
    assert decide(after, ended, NOW, CATALOG) == [Submit("a2", 0, f"restart after {breach.reason}")]
    worn = run.model_copy(deep=True)
    worn.attempts = [
        attempt(f"a{n}", 0, f"{PARENT}/{n}", breached="hung") for n in range(MAX_GUARD_RESTARTS)
    ] + [attempt("a9", 0, RUNNING, placed=True)]
    (last,) = decide(worn, seen(beat(stepped_s=200)), NOW, CATALOG)
    assert last.action == "cancel" and last.reason.endswith(
        f"restarted {MAX_GUARD_RESTARTS} times already"
    )


def test_next_rung_moves_on_as_after_a_stockout_and_cancels_on_the_last() -> None:
    run = guarded(RunGuard(no_progress_s=180.0, action="next_rung"), rungs=2)
    (breach,) = decide(run, seen(beat(stepped_s=200)), NOW, CATALOG)
    assert breach.action == "next_rung"
    after = apply(run, [breach], NOW)
    assert after.current.gave_up == breach.reason and after.stopping is None
    ended = Observed([job(1, "CANCELLED", "a1", ran_h=1.0)])
    (submit,) = decide(after, ended, NOW, CATALOG)
    assert isinstance(submit, Submit) and submit.rung == 1 and breach.reason in submit.why
    last = guarded(RunGuard(no_progress_s=180.0, action="next_rung"), rungs=1)
    (final,) = decide(last, seen(beat(stepped_s=200)), NOW, CATALOG)
    assert final.action == "cancel" and final.reason.endswith("no rung left to move to")


def test_tokens_per_s_under_the_floor_for_the_window_acts() -> None:
    guard = RunGuard(min_tokens_per_s=1000.0, window_s=600.0)
    run = guarded(guard)
    first = decide(run, seen(beat(rate=120.0)), NOW, CATALOG)
    assert first == [Slow("a1", NOW, "120 tokens/s, under 1,000"), *WATCH]
    after = apply(run, first, NOW)
    assert after.current.slow_since == NOW
    later = NOW + timedelta(seconds=300)
    assert decide(after, seen(beat(rate=120.0, time_s=-299)), later, CATALOG) == WATCH
    done = NOW + timedelta(seconds=601)
    (breach,) = decide(after, seen(beat(rate=120.0, time_s=-600, stepped_s=-600)), done, CATALOG)
    assert isinstance(breach, Breach) and breach.reason.startswith(
        "guard.min_tokens_per_s: 120 tokens/s, under 1,000 since 2026-11-28 12:00:00 UTC"
    )
    recovered = decide(after, seen(beat(rate=5000.0, time_s=-299)), later, CATALOG)
    assert recovered[0] == Slow("a1", None, None)
    assert apply(after, recovered, later).current.slow_since is None


def test_a_beat_that_stopped_coming_counts_as_no_tokens() -> None:
    guard = RunGuard(min_tokens_per_s=10.0, window_s=60.0)
    frozen = beat(rate=5000.0, time_s=600, stepped_s=600, since_s=3000)
    verdict = judge_progress(guard, frozen, job(1, "RUNNING", "a1", ran_h=1.0), None, NOW)
    assert verdict.slow_since == NOW and verdict.slow == "0 tokens/s, under 10"


def test_a_breach_is_reported_with_its_run_action_job_and_team_for_the_alerts() -> None:
    run = guarded(RunGuard(no_progress_s=180.0, action="restart"))
    run.rungs[0].job["labels"]["vtx-team"] = "nlp"
    actions = decide(run, seen(beat(stepped_s=200)), NOW, CATALOG)
    (breach,) = guard_breaches(run, actions)
    assert breach == GuardBreach(run.run_id, "restart", RUNNING, actions[0].reason, "nlp")
    assert guard_breaches(run, decide(run, seen(beat()), NOW, CATALOG)) == []
    untagged = guarded()
    (said,) = guard_breaches(untagged, decide(untagged, seen(beat(stepped_s=200)), NOW, CATALOG))
    assert said.team == "" and said.action == "cancel"
