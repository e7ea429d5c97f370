"""`vtx local env` and the real SDK with its default (gRPC) transport, given nothing but those
variables and anonymous credentials: CustomJob run, list with filter and order_by, cancel,
delete, and a HyperparameterTuningJob run."""

from __future__ import annotations

import os
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from jobs.core.contract import LABEL_RUN_ID
from jobs.local.platform.state import PlatformState
from jobs.local.plumbing.tls import tls_files
from tests.jobs.local.local_helpers import pool, wait_for
from tests.jobs.local.tuning.test_studies_platform import TRIAL, _study
from vtx.cli import app

SLEEPER = "import time; print('up', flush=True); time.sleep(600)"


def _exports(data_dir: str) -> dict[str, str]:
    result = CliRunner().invoke(app, ["local", "env", "--data-dir", data_dir])
    assert result.exit_code == 0, result.output
    variables = {}
    for line in result.output.splitlines():
        [word] = shlex.split(line.removeprefix("export "))
        name, _, value = word.partition("=")
        variables[name] = value
    return variables


def test_env_prints_what_a_shell_needs(local_platform_state: PlatformState) -> None:
    variables = _exports(local_platform_state.data_dir)
    assert variables == {
        "VERTEX_API_ENDPOINT": f"127.0.0.1:{local_platform_state.grpc_port}",
        "VERTEX_REST_ENDPOINT": local_platform_state.vertex_endpoint,
        "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH": str(tls_files(Path(local_platform_state.data_dir)).ca),
        "STORAGE_EMULATOR_HOST": local_platform_state.gcs_endpoint,
        "GOOGLE_CLOUD_PROJECT": "vtx-local",
        "GOOGLE_CLOUD_REGION": "us-central1",
    }


def test_env_of_a_platform_that_is_not_running_says_so(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["local", "env", "--data-dir", str(tmp_path)])
    assert result.exit_code == 1
    assert "run `vtx local up`" in " ".join(result.output.split())


@pytest.fixture
def sdk(local_platform_state: PlatformState, monkeypatch: pytest.MonkeyPatch):
    """aiplatform as `eval "$(vtx local env)"` leaves a shell: endpoint, project and region
    from the environment, the default transport; polling every 0.2 s. The project is passed:
    without one the SDK picks REST itself (aiplatform/initializer.py)."""
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import aiplatform
    from google.cloud.aiplatform import jobs

    for name, value in _exports(local_platform_state.data_dir).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(jobs, "_JOB_WAIT_TIME", 0.2)
    # A fresh process's config: `init` keeps an api_transport an earlier test gave it.
    aiplatform.initializer.global_config.__init__()
    aiplatform.init(
        project=os.environ["GOOGLE_CLOUD_PROJECT"],
        location=os.environ["GOOGLE_CLOUD_REGION"],
        api_endpoint=os.environ["VERTEX_API_ENDPOINT"],
        credentials=AnonymousCredentials(),
        staging_bucket="gs://vtx-local-staging",
    )
    yield aiplatform
    aiplatform.initializer.global_config.__init__()  # no later test inherits this endpoint


def test_custom_jobs_through_the_default_transport(sdk) -> None:
    from google.cloud.aiplatform_v1.services.job_service.transports import JobServiceGrpcTransport

    run = "grpc-sdk-run"
    done = sdk.CustomJob(
        display_name=run, worker_pool_specs=[pool("print('hi')")], labels={LABEL_RUN_ID: run}
    )
    done.run()  # raises unless it SUCCEEDED
    assert isinstance(done.api_client._transport, JobServiceGrpcTransport)
    assert done.resource_name.startswith("projects/424242424242/locations/us-central1/")

    sleeper = sdk.CustomJob(
        display_name=f"{run}-cancel", worker_pool_specs=[pool(SLEEPER)], labels={LABEL_RUN_ID: run}
    )
    sleeper.submit()
    sleeper.cancel()
    # A job that started meanwhile is CANCELLING until its replica exits; .state reads again.
    wait_for(lambda: sleeper.state.name == "JOB_STATE_CANCELLED")

    listed = sdk.CustomJob.list(filter=f'labels.{LABEL_RUN_ID}="{run}"', order_by="create_time")
    assert [j.display_name for j in listed] == [run, f"{run}-cancel"]
    newest_first = sdk.CustomJob.list(
        filter=f'labels.{LABEL_RUN_ID}="{run}"', order_by="create_time desc"
    )
    assert [j.resource_name for j in newest_first] == [sleeper.resource_name, done.resource_name]

    done.delete()
    assert [j.display_name for j in sdk.CustomJob.list(filter=f'display_name="{run}"')] == []


def test_a_study_runs_through_the_default_transport(sdk) -> None:
    base = "gs://vtx-local-checkpoints/runs/grpc-study"
    study = _study(sdk, "grpc-study", TRIAL, base, max_trial_count=2, parallel_trial_count=2)
    study.run()  # raises unless it SUCCEEDED
    assert study.state.name == "JOB_STATE_SUCCEEDED"
    assert sorted(t.state.name for t in study.trials) == ["SUCCEEDED", "SUCCEEDED"]
    assert all(t.final_measurement.metrics[0].metric_id == "loss" for t in study.trials)


def test_hand_built_clients_need_nothing_but_the_variables(
    local_platform_state: PlatformState, monkeypatch: pytest.MonkeyPatch
) -> None:
    """aiplatform_v1's clients as a tool builds them: the default transport (gRPC), the
    endpoint and the CA from the environment, no channel of its own."""
    from google.api_core import exceptions
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import aiplatform_v1

    for name, value in _exports(local_platform_state.data_dir).items():
        monkeypatch.setenv(name, value)
    options = {"api_endpoint": os.environ["VERTEX_API_ENDPOINT"]}
    parent = f"projects/{os.environ['GOOGLE_CLOUD_PROJECT']}/locations/us-central1"
    jobs = aiplatform_v1.JobServiceClient(
        client_options=options, credentials=AnonymousCredentials()
    )
    assert jobs.transport.kind == "grpc"
    listed = jobs.list_custom_jobs(request={"parent": parent, "filter": 'display_name="none"'})
    assert list(listed) == []
    predictions = aiplatform_v1.PredictionServiceClient(
        client_options=options, credentials=AnonymousCredentials()
    )
    with pytest.raises(exceptions.NotFound, match="endpoints/1"):
        predictions.predict(endpoint=f"{parent}/endpoints/1", instances=[1])
