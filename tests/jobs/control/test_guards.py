"""The follower's guards on a stack without a controller (`vtx launch --follow`), through the
real REST client against scripted answers: a run over its budget has its running attempt
cancelled once; a run without one is left alone."""

from __future__ import annotations

import json
from typing import Any

import pytest
import requests

from jobs.control.guards import RunBudgetGuard, cancel
from jobs.vertex.errors import VertexError
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


class Answering:
    """A session that answers every request with one HTTP status and Google's error JSON."""

    def __init__(self, status: int, error: str) -> None:
        self.status, self.error = status, error
        self.seen: list[tuple[str, str]] = []

    def request(self, method: str, url: str, timeout: float, **kwargs: Any) -> requests.Response:
        self.seen.append((method, url))
        response = requests.Response()
        response.status_code = self.status
        body = {"error": {"code": self.status, "message": "said", "status": self.error}}
        response._content = json.dumps(body).encode()
        return response


@pytest.mark.parametrize(("status", "error"), [(400, "FAILED_PRECONDITION"), (404, "NOT_FOUND")])
def test_a_cancel_of_a_job_that_ended_first_is_done_with_one_request(
    status: int, error: str
) -> None:
    """The one cancel act (jobs.control.cancels): "it had ended" needs no read of the job."""
    session = Answering(status, error)
    cancel(VertexRest(dev_stack(), session=session, backoff=FAST), f"{PARENT}/customJobs/2")
    assert [m for m, _ in session.seen] == ["POST"]


def test_a_cancel_refused_otherwise_is_explained() -> None:
    session = Answering(403, "PERMISSION_DENIED")
    rest = VertexRest(dev_stack(), session=session, backoff=FAST)
    with pytest.raises(VertexError, match=r"permission denied in .*Vertex said: said"):
        cancel(rest, f"{PARENT}/hyperparameterTuningJobs/3")
