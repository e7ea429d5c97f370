"""The reconciler as a table: a run record and what was seen of its jobs -> the actions, and
the record they leave. No clock, client or storage: each case is data."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from jobs.control.reconcile import (
    Adopt,
    Cancel,
    CancelStudy,
    Finish,
    Observed,
    Place,
    Submit,
    Wait,
    apply,
    decide,
)
from jobs.control.record import Attempt, RungRecord, RunRecord, StudyPlanRecord
from jobs.core.catalog import load_catalog
from jobs.tuning.study_records import StudyRecord
from jobs.vertex.job_records import JobRecord

NOW = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
RUN = "ladder-run"
PARENT = "projects/123/locations/us-central1/customJobs"
CATALOG = load_catalog()


def rung(number: int, hopeless: str | None = None, max_wait_s: float | None = 600) -> RungRecord:
    return RungRecord(
        number=number, label=f"rung {number} us-central1 1xn1-standard-4 SPOT",
        region="us-central1", job={"displayName": RUN, "labels": {"vtx-run-id": RUN}},
        quota={}, usd_per_h=0.2, price_kind="Spot", max_wait_s=max_wait_s, hopeless=hopeless,
    )  # fmt: skip


def record(*attempts: Attempt, rungs: int = 2, budget: float | None = None, **kw) -> RunRecord:
    return RunRecord(run_id=RUN, kind="ladder" if rungs > 1 else "job",
                     rungs=[rung(n + 1) for n in range(rungs)], attempts=list(attempts),
                     budget_usd=budget, **kw)  # fmt: skip


def attempt(mark: str, index: int, job: str | None = None, ago_s: float = 30, **kw) -> Attempt:
    return Attempt(marker=mark, rung=index, claimed_at=NOW - timedelta(seconds=ago_s), job=job,
                   **kw)  # fmt: skip


def job(
    number: int,
    state: str,
    mark: str,
    error: str | None = None,
    ran_h: float = 0.0,
    budget: str | None = None,
    age_min: float = 1.0,
) -> JobRecord:
    labels = {"vtx-run-id": RUN, "vtx-attempt": mark}
    if budget:
        labels["vtx-budget-usd"] = budget
    rest: dict = {
        "name": f"{PARENT}/{number}",
        "state": f"JOB_STATE_{state}",
        "labels": labels,
        "createTime": (NOW - timedelta(hours=ran_h, minutes=age_min)).isoformat(),
        "jobSpec": {"workerPoolSpecs": [{"machineSpec": {"machineType": "n1-standard-4"},
                                         "replicaCount": "1"}]},
    }  # fmt: skip
    if ran_h:
        rest["startTime"] = (NOW - timedelta(hours=ran_h)).isoformat()
    if error:
        rest["error"] = {"code": 8 if "STOCKOUT" in error else 13, "message": error}
    return JobRecord.from_rest(rest)


STOCKOUT = "The zone does not have enough resources: STOCKOUT"

CASES = [
    ("a new run: submit its first rung", record(), Observed(),
     [Submit("a1", 0, "the run's first attempt")]),
    ("a rung over its quota is skipped",
     RunRecord(run_id=RUN, kind="ladder", rungs=[rung(1, "zero quota"), rung(2)]), Observed(),
     [Submit("a1", 1, "the run's first attempt")]),
    ("every rung over its quota: the run ends",
     RunRecord(run_id=RUN, kind="ladder", rungs=[rung(1, "zero quota")]), Observed(),
     [Finish("FAILED", "no rung may run: rung 1: zero quota")]),
    ("a claimed attempt whose job carries its marker is adopted",
     record(attempt("a1", 0)), Observed([job(1, "PENDING", "a1")]),
     [Adopt("a1", f"{PARENT}/1"), Wait(f"watch {PARENT}/1 (PENDING)")]),
    ("a claim still within its lease is left to its pass",
     record(attempt("a1", 0)), Observed(), [Wait("attempt a1 is being submitted")]),
    ("a claim past its lease with no marked job is submitted again",
     record(attempt("a1", 0, ago_s=600)), Observed(),
     [Submit("a1", 0, "claimed 600 s ago and no job carries its marker")]),
    ("nothing to do while a placed job runs",
     record(attempt("a1", 0, f"{PARENT}/1", placed=True)),
     Observed([job(1, "RUNNING", "a1")]), [Wait(f"watch {PARENT}/1 (RUNNING)")]),
    ("a running attempt is noted placed",
     record(attempt("a1", 0, f"{PARENT}/1")), Observed([job(1, "RUNNING", "a1")]),
     [Place("a1", f"{PARENT}/1")]),
    ("a stocked-out attempt: submit the next rung",
     record(attempt("a1", 0, f"{PARENT}/1")), Observed([job(1, "FAILED", "a1", STOCKOUT)]),
     [Submit("a2", 1, "rung 1 us-central1 1xn1-standard-4 SPOT: STOCKOUT after 0 s")]),
    ("a preempted attempt that failed for capacity after it ran: the next rung",
     record(attempt("a1", 0, f"{PARENT}/1", placed=True)),
     Observed([job(1, "FAILED", "a1", STOCKOUT, ran_h=0.1)]),
     [Submit("a2", 1, "rung 1 us-central1 1xn1-standard-4 SPOT: STOCKOUT while running")]),
    ("an attempt that ran between two passes and stocked out: its startTime says it ran",
     record(attempt("a1", 0, f"{PARENT}/1")),
     Observed([job(1, "FAILED", "a1", STOCKOUT, ran_h=0.001)]),
     [Submit("a2", 1, "rung 1 us-central1 1xn1-standard-4 SPOT: STOCKOUT while running")]),
    ("a rung waiting past its max wait is cancelled to move on",
     record(attempt("a1", 0, f"{PARENT}/1", ago_s=3600)),
     Observed([job(1, "PENDING", "a1", age_min=61)]),
     [Cancel(f"{PARENT}/1", "still PENDING after 61 min (max_wait)")]),
    ("the cancelled rung ended: the next one",
     record(attempt("a1", 0, f"{PARENT}/1", gave_up="still PENDING after 61 min (max_wait)")),
     Observed([job(1, "CANCELLED", "a1")]),
     [Submit("a2", 1, "rung 1 us-central1 1xn1-standard-4 SPOT: still PENDING after 61 min "
             "(max_wait)")]),
    ("all rungs exhausted: the outcome is recorded",
     record(attempt("a1", 0, f"{PARENT}/1"), attempt("a2", 1, f"{PARENT}/2")),
     Observed([job(1, "FAILED", "a1", STOCKOUT), job(2, "FAILED", "a2", STOCKOUT)]),
     [Finish("FAILED", "no rung got capacity: STOCKOUT after 0 s")]),
    ("the job's own failure ends the run",
     record(attempt("a1", 0, f"{PARENT}/1", placed=True)),
     Observed([job(1, "FAILED", "a1", "exit code 1", ran_h=0.1)]),
     [Finish("FAILED", "FAILED: exit code 1")]),
    ("success ends the run",
     record(attempt("a1", 0, f"{PARENT}/1", placed=True)),
     Observed([job(1, "SUCCEEDED", "a1", ran_h=0.1)]), [Finish("SUCCEEDED", None)]),
    ("budget crossed: the job is cancelled, why recorded",
     record(attempt("a1", 0, f"{PARENT}/1", placed=True), rungs=1, budget=0.01),
     Observed([job(1, "RUNNING", "a1", ran_h=1.0, budget="0_01")]),
     [Cancel(f"{PARENT}/1", "the run's cost so far $0.19 crossed budget.max_cost_usd $0.01",
             budget=True)]),
    ("the budget's cancel is done: the outcome names the budget",
     record(attempt("a1", 0, f"{PARENT}/1", placed=True), rungs=1, budget=0.01,
            stopping="the run's cost so far $0.19 crossed budget.max_cost_usd $0.01"),
     Observed([job(1, "CANCELLED", "a1", ran_h=1.0, budget="0_01")]),
     [Finish("CANCELLED", "the run's cost so far $0.19 crossed budget.max_cost_usd $0.01")]),
    ("an ended run: nothing", record(outcome={"state": "SUCCEEDED"}), Observed(), []),
]  # fmt: skip


@pytest.mark.parametrize(("case", "run", "seen", "expected"), CASES, ids=[c[0] for c in CASES])
def test_decide(case: str, run: RunRecord, seen: Observed, expected: list) -> None:
    actions = decide(run, seen, NOW, CATALOG)
    if any(isinstance(a, Cancel) and a.budget for a in expected):  # the meter's own figure
        assert len(actions) == 1 and isinstance(actions[0], Cancel) and actions[0].budget
        assert "crossed budget.max_cost_usd $0.01" in actions[0].reason
        return
    assert actions == expected


def study(state: str, labels: dict[str, str]) -> StudyRecord:
    return StudyRecord.from_rest({
        "name": "projects/123/locations/us-central1/hyperparameterTuningJobs/9",
        "state": f"JOB_STATE_{state}", "labels": labels,
        "trials": [{"id": "1", "state": "ACTIVE", "customJob": f"{PARENT}/1"}],
        "studySpec": {"metrics": [{"metricId": "loss", "goal": "MINIMIZE"}], "parameters": []},
        "maxTrialCount": 20, "parallelTrialCount": 1,
    })  # fmt: skip


def test_a_study_over_its_budget_is_cancelled_as_a_whole_and_says_why() -> None:
    labels = {"vtx-run-id": RUN, "vtx-attempt": "a1", "vtx-budget-usd": "0_01"}
    run = RunRecord(run_id=RUN, kind="study", rungs=[rung(1)], budget_usd=0.01,
                    study=StudyPlanRecord(job={}, quota={}, region="us-central1"),
                    attempts=[attempt("a1", 0)])  # fmt: skip
    seen = Observed(study=study("RUNNING", labels),
                    trial_jobs=[job(1, "RUNNING", "a1", ran_h=1.0, budget="0_01")])  # fmt: skip
    actions = decide(run, seen, NOW, CATALOG)
    assert isinstance(actions[0], Adopt)
    assert isinstance(actions[1], CancelStudy) and "budget.max_cost_usd $0.01" in actions[1].reason
    after = apply(run, actions, NOW)
    assert after.stopping == actions[1].reason
    ended = decide(after, Observed(study=study("CANCELLED", labels)), NOW, CATALOG)
    assert ended == [Finish("CANCELLED", actions[1].reason)]


def test_apply_claims_the_attempt_records_each_move_and_the_pass() -> None:
    run = record(attempt("a1", 0, f"{PARENT}/1"))
    actions = decide(run, Observed([job(1, "FAILED", "a1", STOCKOUT)]), NOW, CATALOG)
    after = apply(run, actions, NOW)
    assert [(a.marker, a.rung, a.job) for a in after.attempts] == [
        ("a1", 0, f"{PARENT}/1"), ("a2", 1, None)
    ]  # fmt: skip
    assert after.moves[-1].what.startswith("submit rung 2 us-central1")
    assert after.last_pass is not None and after.last_pass.at == NOW
    assert after.last_pass.decided == [m.what for m in after.moves]
    assert run.attempts[-1].marker == "a1"  # the record read is left as it was


def test_a_pass_that_decides_what_the_last_one_did_leaves_the_record_equal() -> None:
    """Watching a running job again changes nothing in its record, so the driver writes none;
    a changed decision is written, with when it was taken."""
    run = record(attempt("a1", 0, f"{PARENT}/1"))
    running = Observed([job(1, "RUNNING", "a1")])
    placed = apply(run, decide(run, running, NOW - timedelta(minutes=1), CATALOG), NOW)
    first = apply(placed, decide(placed, running, NOW, CATALOG), NOW)  # watched from now on
    later = NOW + timedelta(minutes=5)
    again = apply(first, decide(first, running, later, CATALOG), later)
    assert again == first and again.last_pass is not None and again.last_pass.at == NOW
    ended = Observed([job(1, "SUCCEEDED", "a1")])
    changed = apply(again, decide(again, ended, later, CATALOG), later)
    assert changed != again and changed.last_pass is not None and changed.last_pass.at == later


@pytest.mark.parametrize(("state", "ok"), [("SUCCEEDED", True), ("FAILED", False),
                                           ("PARTIALLY_SUCCEEDED", False)])  # fmt: skip
def test_an_outcome_says_whether_the_run_succeeded(state: str, ok: bool) -> None:
    after = apply(record(), [Finish(state, None)], NOW)
    assert after.outcome is not None and after.outcome.succeeded is ok
