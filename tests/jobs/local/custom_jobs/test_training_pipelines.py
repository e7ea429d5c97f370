"""trainingPipelines through the real clients: the SDK's CustomTrainingJob (seed 000's example,
unchanged) under a user's own project id, and PipelineService's REST calls for the states,
cancel, delete, list and the create checks."""

from __future__ import annotations

from pathlib import Path

import pytest
from google.api_core import exceptions

from jobs.core.stack import StackOutputs
from jobs.local.platform.state import PlatformState, project_number
from tests.jobs.local.local_helpers import (
    SDK_TRANSPORTS,
    TRAIN_IMAGE,
    client,
    container_pipeline,
    pipelines_client,
    replica_output,
    transport_options,
    wait_for,
    wait_pipeline,
)

USER_PROJECT = "acme-ml-dev"
SCRIPT = "import os, sys\nprint('script ran', sys.argv[1:], os.environ['AIP_MODEL_DIR'])\n"
SERVE_IMAGE = "us-docker.pkg.dev/vertex-ai/prediction/pytorch-cpu.2-4:latest"


@pytest.fixture(params=SDK_TRANSPORTS)
def sdk(
    request: pytest.FixtureRequest,
    local_platform: StackOutputs,
    local_platform_state: PlatformState,
    monkeypatch: pytest.MonkeyPatch,
):
    """The high-level SDK as a user sets it up (their project id, the staging bucket, the
    emulator for its storage client), polling every 0.2 s."""
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import aiplatform
    from google.cloud.aiplatform import jobs, training_jobs

    monkeypatch.setattr(jobs, "_JOB_WAIT_TIME", 0.2)
    monkeypatch.setattr(training_jobs, "_JOB_WAIT_TIME", 0.2)
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", local_platform.gcs_endpoint)
    aiplatform.init(
        project=USER_PROJECT,
        location=local_platform.region,
        **transport_options(request.param, local_platform_state),
        credentials=AnonymousCredentials(),
        staging_bucket=f"gs://{local_platform.buckets.staging}",
    )
    return aiplatform


def test_custom_training_job_runs_and_uploads_its_model(
    sdk, local_platform: StackOutputs, tmp_path: Path
) -> None:
    script = tmp_path / "task.py"
    script.write_text(SCRIPT)
    job = sdk.CustomTrainingJob(
        display_name="seed-000-example",
        script_path=str(script),
        container_uri=TRAIN_IMAGE,
        model_serving_container_image_uri=SERVE_IMAGE,
    )
    model = job.run(
        machine_type="n1-standard-4",
        accelerator_type="NVIDIA_TESLA_T4",
        accelerator_count=1,
        replica_count=2,
        args=["--epochs=1"],
    )
    number = project_number(USER_PROJECT)
    assert job.state.name == "PIPELINE_STATE_SUCCEEDED"
    assert job.resource_name.startswith(
        f"projects/{number}/locations/us-central1/trainingPipelines/"
    )
    backing = job.gca_resource.training_task_metadata["backingCustomJob"]
    assert backing.startswith(f"projects/{number}/locations/us-central1/customJobs/")
    base = job.gca_resource.training_task_inputs["base_output_directory"]["output_uri_prefix"]
    # The chief ran the script. The worker may not get as far: as on Vertex, the job succeeds
    # when the chief does, and the other replicas are then stopped wherever they are (here,
    # often still installing the package).
    ran = f"script ran ['--epochs=1'] {base}/model/"
    wait_for(lambda: ran in replica_output(local_platform, backing, "workerpool0-0"))
    service = replica_output(local_platform, backing, "service")
    assert "workerpool1-0 started" in service
    assert any("NVIDIA_TESLA_T4" in line and "CPU" in line for line in service)

    assert model is not None
    assert model.resource_name.startswith(f"projects/{number}/locations/us-central1/models/")
    assert model.uri == f"{base}/model"
    assert model.gca_resource.training_pipeline == job.resource_name
    assert model.gca_resource.container_spec.image_uri == SERVE_IMAGE


def test_a_failing_task_fails_the_pipeline_with_its_job_error(local_platform: StackOutputs) -> None:
    pipelines = pipelines_client(local_platform.vertex_endpoint)
    parent = f"projects/{USER_PROJECT}/locations/us-central1"
    created = pipelines.create_training_pipeline(
        parent=parent, training_pipeline=container_pipeline("fails", "raise SystemExit(3)")
    )
    # Google's create example answers PENDING (docs/vertex-facts.md, "TrainingPipeline").
    assert created.state.name == "PIPELINE_STATE_PENDING"
    done = wait_pipeline(pipelines, created.name)
    assert done.state.name == "PIPELINE_STATE_FAILED"
    assert done.error.code != 0 and done.end_time
    job = client(local_platform.vertex_endpoint).get_custom_job(
        name=done.training_task_metadata["backingCustomJob"]
    )
    assert job.state.name == "JOB_STATE_FAILED"
    assert done.error.message == job.error.message


def test_cancel_then_delete(local_platform: StackOutputs) -> None:
    pipelines = pipelines_client(local_platform.vertex_endpoint)
    parent = f"projects/{USER_PROJECT}/locations/us-central1"
    hang = "import time; print('up', flush=True); time.sleep(600)"
    created = pipelines.create_training_pipeline(
        parent=parent,
        training_pipeline=container_pipeline("hangs", hang, labels={"vtx-run-id": "pipe"}),
    )
    running = wait_for(
        lambda: (
            (p := pipelines.get_training_pipeline(name=created.name)).state.name
            == "PIPELINE_STATE_RUNNING"
            and p
        )
    )
    assert running.start_time
    listed = pipelines.list_training_pipelines(
        request={"parent": parent, "filter": 'labels.vtx-run-id="pipe"'}
    )
    assert [p.name for p in listed] == [created.name]
    with pytest.raises(exceptions.BadRequest, match="cancel it first"):
        pipelines.delete_training_pipeline(name=created.name).result()
    pipelines.cancel_training_pipeline(name=created.name)
    done = wait_pipeline(pipelines, created.name)
    assert done.state.name == "PIPELINE_STATE_CANCELLED" and done.error.code == 1
    backing = done.training_task_metadata["backingCustomJob"]
    assert client(local_platform.vertex_endpoint).get_custom_job(name=backing).state == 7
    with pytest.raises(exceptions.BadRequest, match="already ended"):
        pipelines.cancel_training_pipeline(name=created.name)
    pipelines.delete_training_pipeline(name=created.name).result()
    with pytest.raises(exceptions.NotFound):
        pipelines.get_training_pipeline(name=created.name)


def test_creates_that_are_not_custom_tasks_are_refused(local_platform: StackOutputs) -> None:
    pipelines = pipelines_client(local_platform.vertex_endpoint)
    parent = f"projects/{USER_PROJECT}/locations/us-central1"
    automl = container_pipeline("automl", "pass")
    automl.training_task_definition = (
        "gs://google-cloud-aiplatform/schema/trainingjob/definition/automl_tables_1.0.0.yaml"
    )
    with pytest.raises(exceptions.BadRequest, match="custom training tasks only"):
        pipelines.create_training_pipeline(parent=parent, training_pipeline=automl)
    no_command = container_pipeline("no-command", "pass")
    pool = no_command.training_task_inputs["worker_pool_specs"][0]
    del pool["container_spec"]["command"]
    with pytest.raises(exceptions.BadRequest, match=r"trainingTaskInputs\.workerPoolSpecs\[0\]"):
        pipelines.create_training_pipeline(parent=parent, training_pipeline=no_command)
    with pytest.raises(exceptions.NotFound):
        pipelines.get_training_pipeline(name=f"{parent}/trainingPipelines/1")


def test_custom_container_training_job_runs_without_a_model(
    sdk, local_platform: StackOutputs
) -> None:
    job = sdk.CustomContainerTrainingJob(
        display_name="container-task",
        container_uri=TRAIN_IMAGE,
        command=["python", "-c", "import sys; print('container ran', sys.argv[1:])"],
    )
    model = job.run(machine_type="n1-standard-4", replica_count=1, args=["--steps=3"])
    assert model is None  # no serving image: nothing to upload
    assert job.state.name == "PIPELINE_STATE_SUCCEEDED"
    backing = job.gca_resource.training_task_metadata["backingCustomJob"]
    assert replica_output(local_platform, backing, "workerpool0-0") == [
        "container ran ['--steps=3']"
    ]
