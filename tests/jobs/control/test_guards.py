"""The follower's guards on a stack without a controller (`vtx launch --follow`), through the
real REST client against scripted answers: a run over its budget has its running attempt
cancelled once; a run without one is left alone."""

from __future__ import annotations

from jobs.control.guards import RunBudgetGuard
from jobs.vertex.job_records import JobRecord
from jobs.vertex.rest import VertexRest
from tests.conftest import dev_stack
from tests.jobs.runs.run_records import PARENT, rest_job
from tests.jobs.tuning.study_fakes import FAST, Scripted

CANCEL = ("POST", "/customJobs/2:cancel")


def budgeted(job_id: str, state: str, started_s: float, ended_s: float | None = None) -> dict:
    job = rest_job(job_id, 0, state, started_s, ended_s)  # three n1-standard-4, on-demand
    job["labels"]["vtx-budget-usd"] = "0_01"
    return job


def test_a_run_over_its_budget_has_its_running_attempt_cancelled_once() -> None:
    # An earlier attempt ran an hour (its cost counts) and the newest runs: over $0.01.
    attempts = [budgeted("2", "JOB_STATE_RUNNING", 0), budgeted("1", "JOB_STATE_FAILED", 0, 3600)]
    session = Scripted({CANCEL: [{}]})
    guard = RunBudgetGuard(VertexRest(dev_stack(), session=session, backoff=FAST))
    why = guard.check([JobRecord.from_rest(j) for j in attempts])
    assert why is not None and "crossed budget.max_cost_usd $0.01" in why
    assert guard.cancelled == why
    assert session.seen[-1][:2] == (
        "POST", f"https://us-central1-aiplatform.googleapis.com/v1/{PARENT}/customJobs/2:cancel"
    )  # fmt: skip
    assert guard.check([JobRecord.from_rest(j) for j in attempts]) is None  # once only
    assert [m for m, *_ in session.seen].count("POST") == 1


def test_a_run_without_a_budget_is_left_alone() -> None:
    job = rest_job("2", 0, "JOB_STATE_RUNNING", 0)
    session = Scripted({})
    guard = RunBudgetGuard(VertexRest(dev_stack(), session=session, backoff=FAST))
    assert guard.check([JobRecord.from_rest(job)]) is None
    assert session.seen == []
