"""Submission through the real google-cloud-aiplatform JobServiceClient (REST transport) to the
local control plane (`local_platform` fixture: a real FastAPI server on 127.0.0.1 running jobs
as processes), driven through the `vtx` CLI."""

from __future__ import annotations

import pytest

from jobs.core.stack import StackOutputs, load_stack_file
from jobs.vertex.client import Vertex
from jobs.vertex.errors import VertexError
from tests.conftest import TEST_DATA


def test_server_side_rejection_becomes_an_actionable_error(local_platform: StackOutputs) -> None:
    from google.cloud import aiplatform_v1

    # Bypass vtx's own validation: the control plane answers 400, the client raises
    # InvalidArgument, and vtx says what happened.
    pool = {
        "machine_spec": {"machine_type": "n1-standard-4"},
        "replica_count": 1,
        "container_spec": {"image_uri": "img"},
    }
    job = aiplatform_v1.CustomJob(display_name="x", job_spec={"worker_pool_specs": [pool]})
    with pytest.raises(VertexError, match="rejected the job"):
        Vertex(local_platform).create(job)


class ListedVertex(Vertex):
    """A Vertex whose run has one earlier attempt in ``state``; creating only records the job."""

    def __init__(self, stack: StackOutputs, state: str) -> None:
        super().__init__(stack)
        self.state = state
        self.created: list[object] = []

    def list(self, run_id: str | None = None) -> list:
        from google.cloud import aiplatform_v1

        name = "projects/p/locations/us-central1/customJobs/1"
        return [aiplatform_v1.CustomJob(name=name, state=self.state, labels={"vtx-run-id": "r"})]

    def create(self, job, needed=None, existing=None, region=None):  # type: ignore[override]
        self.created.append(job)
        return job


@pytest.mark.parametrize(
    ("previous", "refused"),
    [
        ("JOB_STATE_EXPIRED", False),
        ("JOB_STATE_PARTIALLY_SUCCEEDED", False),
        ("JOB_STATE_FAILED", False),
        ("JOB_STATE_PAUSED", True),  # it can be resumed: still the run's live attempt
        ("JOB_STATE_CANCELLING", True),
    ],
)
def test_submit_refuses_a_new_attempt_only_while_the_previous_one_has_not_ended(
    previous: str, refused: bool
) -> None:
    from google.cloud import aiplatform_v1

    stack = load_stack_file(TEST_DATA / "stack-dev.json")
    vertex = ListedVertex(stack, previous)
    job = aiplatform_v1.CustomJob(display_name="r", labels={"vtx-run-id": "r"})
    if refused:
        with pytest.raises(VertexError, match=f"still active as .*{previous}"):
            vertex.submit(job, {}, stack.region)
        assert vertex.created == []
    else:
        assert vertex.submit(job, {}, stack.region).attempt == 2
        assert vertex.created == [job]
