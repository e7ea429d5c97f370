"""pythonPackageSpec replicas: the SDK's own packaging (CustomJob.from_local_script) uploads a
source distribution to the emulator's staging bucket; the replica installs it offline and runs
its module, under a user's own project id."""

from __future__ import annotations

from pathlib import Path

import pytest

from jobs.core.stack import StackOutputs
from jobs.local.custom_jobs.package_runner import split_gcs_uri
from jobs.local.platform.state import PlatformState, project_number
from tests.jobs.local.local_helpers import (
    SDK_TRANSPORTS,
    client,
    replica_output,
    transport_options,
    wait_terminal,
)

USER_PROJECT = "acme-ml-dev"
SCRIPT = "import os, sys\nprint('script ran', sys.argv[1:], os.environ['CLOUD_ML_PROJECT_ID'])\n"
IMAGE = "us-docker.pkg.dev/vertex-ai/training/pytorch-gpu.2-4.py310:latest"


@pytest.fixture(params=SDK_TRANSPORTS)
def sdk(
    request: pytest.FixtureRequest,
    local_platform: StackOutputs,
    local_platform_state: PlatformState,
    monkeypatch: pytest.MonkeyPatch,
):
    """The high-level SDK as a user sets it up: their own project id, the staging bucket, and
    STORAGE_EMULATOR_HOST so its storage client uploads to the emulator."""
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


def test_split_gcs_uri_refuses_what_is_not_an_object() -> None:
    assert split_gcs_uri("gs://b/dir/pkg-0.1.tar.gz") == ("b", "dir/pkg-0.1.tar.gz")
    for bad in ("gs://b", "gs://b/", "/tmp/pkg.tar.gz", "https://b/pkg.tar.gz"):
        with pytest.raises(ValueError, match="gs://BUCKET/OBJECT"):
            split_gcs_uri(bad)


def test_custom_job_from_local_script_runs_its_package(
    sdk, local_platform: StackOutputs, tmp_path: Path
) -> None:
    script = tmp_path / "task.py"
    script.write_text(SCRIPT)
    job = sdk.CustomJob.from_local_script(
        display_name="from-local-script",
        script_path=str(script),
        container_uri=IMAGE,
        args=["--epochs=2"],
        machine_type="n1-standard-4",
        accelerator_type="NVIDIA_TESLA_T4",
        accelerator_count=1,
    )
    job.run()
    assert job.state.name == "JOB_STATE_SUCCEEDED"
    number = project_number(USER_PROJECT)
    assert job.resource_name.startswith(f"projects/{number}/")
    out = replica_output(local_platform, job.resource_name, "workerpool0-0")
    assert f"script ran ['--epochs=2'] {number}" in out
    assert any(
        line.startswith("Successfully installed aiplatform_custom_trainer_script") for line in out
    )
    service = replica_output(local_platform, job.resource_name, "service")
    assert any("1 x NVIDIA_TESLA_T4" in line and "CPU" in line for line in service)


def test_a_package_that_is_not_there_fails_the_job(local_platform: StackOutputs) -> None:
    from google.cloud import aiplatform_v1

    jobs = client(local_platform.vertex_endpoint)
    spec = {
        "worker_pool_specs": [
            {
                "machine_spec": {"machine_type": "n1-standard-4"},
                "replica_count": 1,
                "python_package_spec": {
                    "executor_image_uri": IMAGE,
                    "package_uris": [f"gs://{local_platform.buckets.staging}/nowhere-0.1.tar.gz"],
                    "python_module": "nowhere.task",
                },
            }
        ]
    }
    parent = f"projects/{USER_PROJECT}/locations/{local_platform.region}"
    job = jobs.create_custom_job(
        parent=parent, custom_job=aiplatform_v1.CustomJob(display_name="missing", job_spec=spec)
    )
    done = wait_terminal(jobs, job.name)
    assert done.state == 5  # FAILED
    out = replica_output(local_platform, job.name, "workerpool0-0")
    assert any("could not fetch the python packages" in line for line in out)


def test_a_package_spec_without_module_or_gcs_uris_is_refused(
    local_platform: StackOutputs,
) -> None:
    from google.api_core import exceptions
    from google.cloud import aiplatform_v1

    jobs = client(local_platform.vertex_endpoint)
    spec = {
        "worker_pool_specs": [
            {
                "machine_spec": {"machine_type": "n1-standard-4"},
                "replica_count": 1,
                "python_package_spec": {
                    "executor_image_uri": IMAGE,
                    "package_uris": ["/home/me/pkg-0.1.tar.gz"],
                },
            }
        ]
    }
    parent = f"projects/{USER_PROJECT}/locations/{local_platform.region}"
    with pytest.raises(exceptions.BadRequest) as caught:
        jobs.create_custom_job(
            parent=parent, custom_job=aiplatform_v1.CustomJob(display_name="bad", job_spec=spec)
        )
    message = caught.value.message
    assert "workerPoolSpecs[0].pythonPackageSpec.pythonModule: required" in message
    assert "pythonPackageSpec.packageUris[0]: package URI '/home/me/pkg-0.1.tar.gz'" in message
