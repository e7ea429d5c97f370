"""Small builders for the local platform tests: REST-form jobs whose replicas are one-line
Python programs, and a client pointed at the session's control plane."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from jobs.core.stack import StackOutputs
from jobs.core.states import is_final
from jobs.local.custom_jobs.pipelines import CUSTOM_TASK
from jobs.local.platform.capacity import Capacity
from jobs.local.platform.settings import LocalSettings
from jobs.local.platform.state import (
    LOCAL_PROJECT,
    LOCAL_REGION,
    PlatformState,
    stack_outputs_for,
)
from jobs.local.plumbing.ports import free_port
from jobs.local.plumbing.processes import start_fresh, stop_platform
from tests.conftest import HANG_S, REPO

PARENT = f"projects/{LOCAL_PROJECT}/locations/{LOCAL_REGION}"


def client(endpoint: str):
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import aiplatform_v1

    return aiplatform_v1.JobServiceClient(
        transport="rest",
        credentials=AnonymousCredentials(),
        client_options={"api_endpoint": endpoint},
    )


def rest(platform: StackOutputs, method: str, path: str, body: dict | None = None):
    """One REST call to the control plane: (HTTP status, the JSON answer), errors included."""
    request = urllib.request.Request(
        f"{platform.vertex_endpoint}/v1/{path}",
        data=json.dumps(body).encode() if body is not None else None,
        headers={"Content-Type": "application/json"} if body is not None else {},
        method=method,
    )
    try:
        with urllib.request.urlopen(request) as resp:
            return resp.status, json.load(resp)
    except urllib.error.HTTPError as exc:
        return exc.code, json.load(exc)


def init_sdk(platform: StackOutputs, project: str | None = None, **more: Any):
    """The high-level SDK initialised as a local user would: REST, anonymous, the platform's
    endpoint, their project (the platform's own unless ``project``); ``more`` for
    ``aiplatform.init``'s other arguments (a staging bucket)."""
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import aiplatform

    aiplatform.init(
        project=project or platform.project,
        location=platform.region,
        api_endpoint=platform.vertex_endpoint,
        api_transport="rest",
        credentials=AnonymousCredentials(),
        **more,
    )
    return aiplatform


SDK_TRANSPORTS = ("grpc", "rest")
"""The SDK's two transports: gRPC (its default) and REST. A fixture parametrized over them runs
a real-SDK flow under each."""


def transport_options(transport: str, state: PlatformState) -> dict[str, Any]:
    """``aiplatform.init``'s endpoint and transport for ``transport``. gRPC's CA is the session's
    GRPC_DEFAULT_SSL_ROOTS_FILE_PATH (tests/conftest.py). The SDK's config is reset first, as a
    fresh process has it: ``init`` keeps an ``api_transport`` an earlier test gave it."""
    from google.cloud.aiplatform import initializer

    initializer.global_config.__init__()
    if transport == "grpc":
        return {"api_endpoint": state.grpc_endpoint}
    return {"api_endpoint": state.vertex_endpoint, "api_transport": "rest"}


def pool(code: str, replicas: int = 1, env: dict[str, str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"image_uri": "local/test:1", "command": ["python", "-c", code]}
    if env:
        spec["env"] = [{"name": k, "value": v} for k, v in env.items()]
    return {
        "machine_spec": {"machine_type": "n1-standard-4"},
        "replica_count": replicas,
        "container_spec": spec,
    }


def custom_job(name: str, *pools: dict[str, Any], labels=None, scheduling=None, base=None):
    from google.cloud import aiplatform_v1

    spec: dict[str, Any] = {"worker_pool_specs": list(pools)}
    if scheduling:
        spec["scheduling"] = scheduling
    if base:
        spec["base_output_directory"] = {"output_uri_prefix": base}
    return aiplatform_v1.CustomJob(display_name=name, job_spec=spec, labels=labels or {})


def wait_terminal(jobs_client, name: str, timeout_s: float = HANG_S):
    """Poll until the job is terminal (the deadline only catches a hang: the job is returned
    as it is then, and the caller's assertion on its state fails)."""
    deadline = time.monotonic() + timeout_s
    while True:
        job = jobs_client.get_custom_job(name=name)
        if is_final(job.state) or time.monotonic() > deadline:
            return job
        time.sleep(0.2)


def wait_for(predicate, timeout_s: float = HANG_S, interval_s: float = 0.2):
    """Poll ``predicate`` until it returns something true; return that. The deadline only
    catches a hang (see ``HANG_S``): wait on a state that surely comes, never on a speed."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval_s)
    raise AssertionError(f"{predicate.__qualname__} still false after {timeout_s:.0f} s: hung")


def logs(platform: StackOutputs, **query: str | int) -> dict:
    """GET /vtx/logs with the platform's token."""
    params = urllib.parse.urlencode(query)
    request = urllib.request.Request(
        f"{platform.vertex_endpoint}/vtx/logs?{params}",
        headers={"Authorization": f"Bearer {platform.local_token}"},
    )
    with urllib.request.urlopen(request) as resp:
        return json.load(resp)


def replica_output(platform: StackOutputs, job_name: str, replica: str) -> list[str]:
    """Every line one replica of a job logged (all pages: pip alone may log a thousand)."""
    lines, cursor = [], 0
    while True:
        page = logs(platform, job=job_name, cursor=cursor)
        lines += [e["message"] for e in page["entries"] if e["replica"] == replica]
        if not page["entries"]:
            return lines
        cursor = page["cursor"]


def post(platform: StackOutputs, path: str, body: dict | None = None) -> tuple[int, dict]:
    """POST a JSON body with the platform's token."""
    request = urllib.request.Request(
        f"{platform.vertex_endpoint}{path}",
        data=json.dumps(body or {}).encode(),
        headers={
            "Content-Type": "application/json",
            "Authorization": f"Bearer {platform.local_token}",
        },
        method="POST",
    )
    try:
        with urllib.request.urlopen(request) as resp:
            return resp.status, json.load(resp)
    except urllib.error.HTTPError as exc:
        return exc.code, json.load(exc)


def tuning_job(
    name: str,
    code: str,
    *,
    max_trials: int = 2,
    parallel: int = 2,
    max_failed: int = 0,
    values: tuple[int, ...] = (1, 2),
    algorithm: str = "GRID_SEARCH",
    run_id: str | None = None,
):
    """A study over one DISCRETE parameter ``rank`` whose trials run ``code``."""
    from google.cloud import aiplatform_v1

    return aiplatform_v1.HyperparameterTuningJob(
        display_name=name,
        study_spec={
            "metrics": [{"metric_id": "loss", "goal": "MINIMIZE"}],
            "parameters": [{"parameter_id": "rank", "discrete_value_spec": {"values": values}}],
            "algorithm": algorithm,
        },
        max_trial_count=max_trials,
        parallel_trial_count=parallel,
        max_failed_trial_count=max_failed,
        trial_job_spec={"worker_pool_specs": [pool(code)]},
        labels={"vtx-run-id": run_id or name},
    )


def wait_study(jobs, name: str, timeout_s: float = HANG_S):
    """Poll a HyperparameterTuningJob until it is terminal; return it."""
    return wait_for(
        lambda: is_final((s := jobs.get_hyperparameter_tuning_job(name=name)).state) and s,
        timeout_s,
    )


# A replica program: counts its starts in $STARTS, hangs on the first, exits 0 on later ones.
RESTARTS_THEN_SUCCEEDS = """
import os, pathlib, sys, time
starts = pathlib.Path(os.environ["STARTS"])
n = len(starts.read_text()) if starts.exists() else 0
starts.write_text("x" * (n + 1))
print(f"start {n}", flush=True)
if n:
    sys.exit(0)
time.sleep(600)
"""


@contextmanager
def capacity_platform(data_dir: Path, gcs_endpoint: str, model: dict) -> Iterator[StackOutputs]:
    """A control plane of its own with a capacity model (short grace: nothing here checkpoints),
    stopped after."""
    settings = LocalSettings(
        data_dir=data_dir,
        cwd=REPO,
        port=free_port(),
        grace_s=2.0,
        capacity=Capacity.model_validate(model),
    )
    state = start_fresh(settings, gcs_endpoint=gcs_endpoint)
    try:
        yield stack_outputs_for(state)
    finally:
        stop_platform(settings.data_dir)


# -- training pipelines --------------------------------------------------------------------------

TRAIN_IMAGE = "us-docker.pkg.dev/vertex-ai/training/pytorch-gpu.2-4.py310:latest"
PIPELINE_ENDED = {"PIPELINE_STATE_SUCCEEDED", "PIPELINE_STATE_FAILED", "PIPELINE_STATE_CANCELLED"}


def pipelines_client(endpoint: str):
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import aiplatform_v1

    return aiplatform_v1.PipelineServiceClient(
        transport="rest",
        credentials=AnonymousCredentials(),
        client_options={"api_endpoint": endpoint},
    )


def container_pipeline(name: str, code: str, **extra):
    """What CustomContainerTrainingJob sends: a custom task over one container pool."""
    from google.cloud import aiplatform_v1
    from google.protobuf import json_format, struct_pb2

    inputs = {
        "worker_pool_specs": [
            {
                "machine_spec": {"machine_type": "n1-standard-4"},
                "replica_count": 1,
                "container_spec": {"image_uri": TRAIN_IMAGE, "command": ["python", "-c", code]},
            }
        ],
        "base_output_directory": {"output_uri_prefix": "gs://vtx-local-staging/pipelines/" + name},
    }
    return aiplatform_v1.TrainingPipeline(
        display_name=name,
        training_task_definition=CUSTOM_TASK,
        training_task_inputs=json_format.ParseDict(inputs, struct_pb2.Value()),
        **extra,
    )


def wait_pipeline(pipelines, name: str):
    return wait_for(
        lambda: (p := pipelines.get_training_pipeline(name=name)).state.name in PIPELINE_ENDED and p
    )
