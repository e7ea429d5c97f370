"""API failures through the real JobServiceClient: transient ones are retried, quota errors are
explained. The server here is a minimal FastAPI app started in-test that *injects* the failures
(429 quota, 503) the local control plane never produces; it records every request it gets."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from jobs.core.stack import StackOutputs
from jobs.local.plumbing.ports import free_port
from jobs.vertex.client import Vertex
from jobs.vertex.errors import VertexError
from jobs.vertex.retry import Backoff
from tests.conftest import stack_outputs, wait_for_port

JOB_NAME = "projects/p/locations/us-central1/customJobs/7"
QUOTA_MESSAGE = (
    "The following quota metrics exceed quota limits: "
    "aiplatform.googleapis.com/custom_model_training_nvidia_l4_gpus"
)
FAST = Backoff(initial_s=0.01, maximum_s=0.02, multiplier=1.5, deadline_s=5.0)


@dataclass
class Faults:
    """Status codes to answer, in order, before answering normally; and what was received."""

    get: list[int] = field(default_factory=list)
    create: list[int] = field(default_factory=list)
    seen: list[str] = field(default_factory=list)
    lands_despite_503: bool = False
    """A create answered 503 was accepted all the same (the reply was lost, not the job)."""
    jobs: list[dict] = field(default_factory=list)


def _error(code: int) -> JSONResponse:
    status = {429: "RESOURCE_EXHAUSTED", 503: "UNAVAILABLE"}[code]
    message = QUOTA_MESSAGE if code == 429 else "backend unavailable"
    return JSONResponse({"error": {"code": code, "message": message, "status": status}}, code)


def make_app(faults: Faults) -> FastAPI:
    app = FastAPI()

    @app.get("/v1/projects/{p}/locations/{l}/customJobs/{job_id}")
    def get_job(p: str, l: str, job_id: str) -> JSONResponse:  # noqa: E741
        faults.seen.append("GET")
        if faults.get:
            return _error(faults.get.pop(0))
        return JSONResponse({"name": JOB_NAME, "displayName": "x", "state": "JOB_STATE_RUNNING"})

    @app.get("/v1/projects/{p}/locations/{l}/customJobs")
    def list_jobs(p: str, l: str) -> JSONResponse:  # noqa: E741
        faults.seen.append("LIST")
        return JSONResponse({"customJobs": faults.jobs})

    @app.post("/v1/projects/{p}/locations/{l}/customJobs")
    async def create_job(p: str, l: str, request: Request) -> JSONResponse:  # noqa: E741
        faults.seen.append("POST")
        body = await request.json()
        job = {
            "name": f"{JOB_NAME[:-1]}{len(faults.jobs) + 1}",
            "displayName": body.get("displayName", "x"),
            "labels": body.get("labels", {}),
            "state": "JOB_STATE_PENDING",
            "createTime": f"2026-11-22T10:00:{len(faults.jobs):02d}Z",
        }
        if faults.create:
            code = faults.create.pop(0)
            if code == 503 and faults.lands_despite_503:
                faults.jobs.append(job)
            return _error(code)
        faults.jobs.append(job)
        return JSONResponse(job)

    return app


@pytest.fixture
def faults() -> Iterator[tuple[Faults, StackOutputs]]:
    import uvicorn

    state = Faults()
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(make_app(state), host="127.0.0.1", port=port, log_level="warning")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        wait_for_port(port)
        stack = stack_outputs(project="p", vertex_endpoint=f"http://127.0.0.1:{port}")
        yield state, stack
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def _job(run_id: str | None = None):
    from google.cloud import aiplatform_v1

    labels = {"vtx-run-id": run_id} if run_id else {}
    return aiplatform_v1.CustomJob(display_name="x", labels=labels)


def test_polling_retries_503_and_429_then_succeeds(faults: tuple[Faults, StackOutputs]) -> None:
    state, stack = faults
    state.get = [503, 429, 503]
    job = Vertex(stack, backoff=FAST).get(JOB_NAME)
    assert job.name == JOB_NAME
    assert state.seen == ["GET"] * 4


def test_create_retries_503(faults: tuple[Faults, StackOutputs]) -> None:
    state, stack = faults
    state.create = [503]
    created = Vertex(stack, backoff=FAST).create(_job())
    assert [j["name"] for j in state.jobs] == [created.name]
    assert state.seen == ["POST", "POST"]


def test_a_create_that_landed_despite_its_503_is_not_submitted_twice(
    faults: tuple[Faults, StackOutputs],
) -> None:
    state, stack = faults
    earlier = {"name": f"{JOB_NAME}0", "displayName": "x", "labels": {"vtx-run-id": "r1"}}
    state.jobs = [{**earlier, "createTime": "2026-11-22T09:00:00Z"}]
    state.create = [503]
    state.lands_despite_503 = True
    created = Vertex(stack, backoff=FAST).create(_job(run_id="r1"))
    assert state.seen == ["LIST", "POST", "LIST"]  # looked before retrying, found it: no 2nd POST
    assert [j["name"] for j in state.jobs] == [f"{JOB_NAME}0", created.name]


def test_quota_429_on_create_names_metric_and_stack_config_without_retrying(
    faults: tuple[Faults, StackOutputs],
) -> None:
    state, stack = faults
    state.create = [429, 429, 429]
    needed = {"aiplatform.googleapis.com/custom_model_training_nvidia_l4_gpus": 8}
    with pytest.raises(VertexError) as err:
        Vertex(stack, backoff=FAST).create(_job(), needed=needed)
    message = str(err.value)
    assert "custom_model_training_nvidia_l4_gpus (this job needs 8)" in message
    assert "add {accelerator: NVIDIA_L4, count: 8, spot: false} to Pulumi.dev.yaml" in message
    assert state.seen == ["POST"]  # a quota error is not transient on create


def test_persistent_503_gives_up_with_a_message(faults: tuple[Faults, StackOutputs]) -> None:
    state, stack = faults
    state.get = [503] * 10_000
    short = Backoff(initial_s=0.01, maximum_s=0.02, multiplier=1.5, deadline_s=0.3)
    with pytest.raises(VertexError, match="unavailable after retries"):
        Vertex(stack, backoff=short).get(JOB_NAME)
    assert len(state.seen) > 1


def test_an_unreachable_local_endpoint_is_explained_not_a_traceback(tmp_path) -> None:
    from typer.testing import CliRunner

    from vtx.cli import app

    closed = free_port()  # nothing listens there
    stack = {
        "project": "p",
        "project_number": "1",
        "region": "us-central1",
        "environment": "local",
        "trainer_service_account": "t@p.iam.gserviceaccount.com",
        "launcher_service_account": "l@p.iam.gserviceaccount.com",
        "buckets": {"data": "d", "checkpoints": "c", "staging": "s", "models": "m"},
        "artifact_registry": "local-docker.pkg.dev/p/r",
        "vertex_endpoint": f"http://127.0.0.1:{closed}",
    }
    stack_file = tmp_path / "stack.json"
    stack_file.write_text(json.dumps(stack))
    result = CliRunner(env={"COLUMNS": "300"}).invoke(
        app, ["list", "--stack-file", str(stack_file)]
    )
    assert result.exit_code == 1, result.output
    assert isinstance(result.exception, SystemExit)
    assert f"cannot reach Vertex AI at http://127.0.0.1:{closed}" in result.output
    assert "vtx local status" in result.output
