"""Vertex's job states (jobs/core/states.py) against the installed v1 proto: every state the proto
has is known here, by the same name and in the same order, and classified; a state a future
proto adds fails here until someone says whether it is final."""

from __future__ import annotations

import subprocess
import sys

import pytest
from google.cloud import aiplatform_v1

from jobs.core.states import (
    FINAL,
    PLACED,
    WAITING,
    JobState,
    bare_name,
    is_final,
    is_placed,
    is_waiting,
    rest_name,
    short,
    succeeded,
)
from jobs.quota.cloud_quotas import holds_quota
from jobs.tuning.study_records import StudyRecord
from jobs.vertex.client import is_terminal
from jobs.vertex.job_records import JobRecord
from tests.conftest import HANG_S, REPO

PROTO = sorted(aiplatform_v1.JobState, key=int)

CLASSIFIED = {
    "JOB_STATE_UNSPECIFIED": "waiting",
    "JOB_STATE_QUEUED": "waiting",
    "JOB_STATE_PENDING": "waiting",
    "JOB_STATE_RUNNING": "running",
    "JOB_STATE_SUCCEEDED": "final",
    "JOB_STATE_FAILED": "final",
    "JOB_STATE_CANCELLING": "running",
    "JOB_STATE_CANCELLED": "final",
    "JOB_STATE_PAUSED": "running",
    "JOB_STATE_EXPIRED": "final",
    "JOB_STATE_UPDATING": "running",
    "JOB_STATE_PARTIALLY_SUCCEEDED": "final",
}
"""What each v1 state is, said once more by hand (docs/vertex-facts.md, "Job states"):
``running`` is neither waiting for machines nor ended."""


def test_the_enum_is_the_installed_proto_s_name_for_name_in_order() -> None:
    assert [s.value for s in JobState] == [p.name for p in PROTO]
    assert [int(p) for p in PROTO] == list(range(len(PROTO)))  # so the order is the number


@pytest.mark.parametrize("proto", PROTO, ids=lambda p: p.name)
def test_every_proto_state_is_classified(proto: aiplatform_v1.JobState) -> None:
    assert proto.name in CLASSIFIED, f"{proto.name} is new in the proto: is it final?"
    kind = CLASSIFIED[proto.name]
    assert is_final(proto) is (kind == "final")
    assert is_waiting(proto) is (kind == "waiting")
    # as the REST JSON writes it, and as our enum holds it: the same answers
    for given in (proto.name, JobState(proto.name)):
        assert is_final(given) is (kind == "final")
        assert is_waiting(given) is (kind == "waiting")
    assert JobState(proto.name).final is (kind == "final")


@pytest.mark.parametrize("proto", PROTO, ids=lambda p: p.name)
def test_every_judge_of_a_job_agrees_on_what_ended(proto: aiplatform_v1.JobState) -> None:
    """The client (the SDK's proto and the REST JSON), the study records and the quota count."""
    ended = CLASSIFIED[proto.name] == "final"
    rest = {"name": "projects/p/locations/us-central1/customJobs/1", "state": proto.name}
    assert is_terminal(aiplatform_v1.CustomJob(state=proto)) is ended
    assert JobRecord.from_rest(rest).terminal is ended
    assert StudyRecord.from_rest(rest).terminal is ended
    assert holds_quota(rest) is not ended


def test_the_groupings() -> None:
    assert {s.value for s in FINAL} == {n for n, k in CLASSIFIED.items() if k == "final"}
    assert {s.value for s in WAITING} == {n for n, k in CLASSIFIED.items() if k == "waiting"}
    assert {JobState.RUNNING, JobState.SUCCEEDED} == PLACED
    assert not (FINAL & WAITING)
    assert is_placed(aiplatform_v1.JobState.JOB_STATE_RUNNING)
    assert not is_placed("JOB_STATE_PENDING")


def test_only_succeeded_is_success() -> None:
    assert [s for s in JobState if succeeded(s)] == [JobState.SUCCEEDED]
    assert succeeded(aiplatform_v1.JobState.JOB_STATE_SUCCEEDED)
    assert not succeeded("JOB_STATE_PARTIALLY_SUCCEEDED")


def test_names_read_from_each_form() -> None:
    proto = aiplatform_v1.JobState.JOB_STATE_PARTIALLY_SUCCEEDED
    for given in (proto, "JOB_STATE_PARTIALLY_SUCCEEDED", JobState.PARTIALLY_SUCCEEDED):
        assert rest_name(given) == "JOB_STATE_PARTIALLY_SUCCEEDED"
        assert short(given) == "partially_succeeded"
        assert bare_name(given) == "PARTIALLY_SUCCEEDED"
    assert JobState.SUCCEEDED.short == "succeeded"
    assert f"{JobState.EXPIRED}" == "JOB_STATE_EXPIRED"


def test_a_name_v1_lacks_is_not_final() -> None:
    assert not is_final("JOB_STATE_SOMETHING_NEW")
    assert not is_final("")
    assert not is_final(None)


def test_the_module_stays_cheap_to_import() -> None:
    """`vtx status` and `vtx logs` judge states without importing aiplatform (seconds)."""
    code = (
        "import sys, jobs.core.states; "
        "heavy = [m for m in sys.modules if m.startswith(('google.cloud.aiplatform', 'proto'))]; "
        "assert not heavy, heavy"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=HANG_S, cwd=REPO)
