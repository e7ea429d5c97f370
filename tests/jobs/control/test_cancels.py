"""The cancel act both the controller and the team budget's function use (jobs.control.cancels):
studies first, an ended job left alone, "it had ended" answers taken as done. Vertex's answers
here are the shapes the local platform and Vertex give (Google's error JSON); the act against
the real routes is tested through its two users (tests/jobs/control/test_guards.py,
tests/infra/functions/test_budget_cancel_function.py)."""

from __future__ import annotations

import json

import pytest

from jobs.control.cancels import CancelError, cancel, cancel_active

PARENT = "projects/p/locations/us-central1"
ENDED = json.dumps(
    {"error": {"code": 400, "message": "job already ended", "status": "FAILED_PRECONDITION"}}
)
DENIED = json.dumps({"error": {"code": 403, "message": "no", "status": "PERMISSION_DENIED"}})


class Vertex:
    """Answers each cancel from ``answers`` (by name; 200 otherwise) and keeps their order."""

    def __init__(self, answers: dict[str, tuple[int, str]] | None = None) -> None:
        self.answers = answers or {}
        self.sent: list[str] = []

    def post(self, name: str) -> tuple[int, str]:
        self.sent.append(name)
        return self.answers.get(name, (200, "{}"))


def test_studies_are_cancelled_before_jobs_and_ended_ones_not_at_all() -> None:
    job, trial = f"{PARENT}/customJobs/1", f"{PARENT}/customJobs/2"
    study, done = f"{PARENT}/hyperparameterTuningJobs/3", f"{PARENT}/customJobs/4"
    vertex = Vertex()
    listed = [
        {"name": job, "state": "JOB_STATE_RUNNING"},
        {"name": trial, "state": "JOB_STATE_PENDING"},
        {"name": done, "state": "JOB_STATE_SUCCEEDED"},
        {"name": study, "state": "JOB_STATE_QUEUED"},
    ]
    assert cancel_active(vertex.post, listed) == [study, job, trial]
    assert vertex.sent == [study, job, trial]


@pytest.mark.parametrize("answer", [(404, "{}"), (400, ENDED)])
def test_a_job_that_ended_before_its_cancel_is_done(answer: tuple[int, str]) -> None:
    name = f"{PARENT}/customJobs/1"
    vertex = Vertex({name: answer})
    assert cancel(vertex.post, name) is False
    assert cancel_active(vertex.post, [{"name": name, "state": "JOB_STATE_RUNNING"}]) == []


def test_any_other_refusal_is_raised_with_vertexs_message() -> None:
    name = f"{PARENT}/customJobs/1"
    with pytest.raises(CancelError, match="HTTP 403") as raised:
        cancel(Vertex({name: (403, DENIED)}).post, name)
    assert (raised.value.status, raised.value.said) == (403, "no")
    bad = json.dumps({"error": {"code": 400, "message": "bad", "status": "INVALID_ARGUMENT"}})
    with pytest.raises(CancelError):
        cancel(Vertex({name: (400, bad)}).post, name)
