"""From a local script to a prediction, through the real SDK only, as a user writes it against
their own project: `CustomTrainingJob(script_path=...).run()` trains (here: puts the trainer's
tiny export into AIP_MODEL_DIR) and returns the uploaded Model, `model.deploy()` starts its
serving container's command (`python -m trainer.serve`) behind an endpoint, and
`endpoint.predict()` answers with what transformers generates from that model. Trained,
registered and deployed once; asked over each of the SDK's transports."""

from __future__ import annotations

from pathlib import Path

import pytest

from jobs.core.stack import StackOutputs
from jobs.local.platform.state import PlatformState
from tests.jobs.local.local_helpers import SDK_TRANSPORTS, transport_options
from tests.trainer.conftest import run_in_process, tiny_config, write_small_dataset
from tests.trainer.serving.test_serve import PROMPT, reference_text

USER_PROJECT = "acme-ml-dev"
SERVE_IMAGE = "us-docker.pkg.dev/acme/vtx/serve:latest"  # vtx's own: `python -m trainer.serve`
TRAIN_IMAGE = "us-docker.pkg.dev/vertex-ai/training/pytorch-xla.2-4.py310:latest"
COPIES_THE_EXPORT = """
import os, pathlib, fsspec
src, d = pathlib.Path({src!r}), os.environ["AIP_MODEL_DIR"]
for p in sorted(src.rglob("*")):
    if p.is_file():
        with fsspec.open(d + p.relative_to(src).as_posix(), "wb") as f:
            f.write(p.read_bytes())
print("exported to", d)
"""


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The trainer's export of a tiny model (2 steps), on local disk."""
    root = tmp_path_factory.mktemp("train-to-predict")
    data = str(write_small_dataset(root))
    assert run_in_process(tiny_config(data, str(root / "run"), max_steps=2, save_steps=None)) == 0
    return root / "run" / "model"


def init_sdk(transport: str, stack: StackOutputs, state: PlatformState):
    """The SDK as a user sets it up: their project id, a staging bucket, the emulator for its
    storage client (STORAGE_EMULATOR_HOST, set by the caller). Over either transport: the
    default, gRPC (its CA is the session's GRPC_DEFAULT_SSL_ROOTS_FILE_PATH), and REST."""
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import aiplatform

    aiplatform.init(
        project=USER_PROJECT,
        location=stack.region,
        **transport_options(transport, state),
        credentials=AnonymousCredentials(),
        staging_bucket=f"gs://{stack.buckets.staging}",
    )
    return aiplatform


@pytest.fixture(scope="module")
def trained(
    exported: Path,
    local_platform: StackOutputs,
    local_platform_state: PlatformState,
    tmp_path_factory: pytest.TempPathFactory,
) -> str:
    """`CustomTrainingJob(script_path=...).run()` through the SDK's default transport (gRPC),
    polling every 0.2 s: the uploaded Model's resource name. (test_training_pipelines.py runs
    CustomTrainingJob over both transports.)"""
    from google.cloud.aiplatform import jobs, training_jobs

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(jobs, "_JOB_WAIT_TIME", 0.2)
        patch.setattr(training_jobs, "_JOB_WAIT_TIME", 0.2)
        patch.setenv("STORAGE_EMULATOR_HOST", local_platform.gcs_endpoint or "")
        sdk = init_sdk("grpc", local_platform, local_platform_state)
        script = tmp_path_factory.mktemp("script") / "task.py"
        script.write_text(COPIES_THE_EXPORT.format(src=str(exported)))
        job = sdk.CustomTrainingJob(
            display_name="train-to-predict",
            script_path=str(script),
            container_uri=TRAIN_IMAGE,
            model_serving_container_image_uri=SERVE_IMAGE,
            model_serving_container_predict_route="/predict",
            model_serving_container_health_route="/health",
            model_serving_container_ports=[8080],
        )
        model = job.run(machine_type="n1-standard-4", replica_count=1)
        assert job.state.name == "PIPELINE_STATE_SUCCEEDED"
        assert model is not None and model.gca_resource.training_pipeline == job.resource_name
        return model.resource_name


@pytest.mark.slow(cost_s=20)
def test_a_local_script_is_trained_registered_deployed_and_answers(
    trained: str,
    exported: Path,
    local_platform: StackOutputs,
    local_platform_state: PlatformState,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from google.cloud.aiplatform import jobs

    monkeypatch.setattr(jobs, "_JOB_WAIT_TIME", 0.2)
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", local_platform.gcs_endpoint or "")
    expected = reference_text(exported, "full", 8)
    assert expected
    sdk = init_sdk("grpc", local_platform, local_platform_state)
    model = sdk.Model(trained)
    assert model.gca_resource.container_spec.image_uri == SERVE_IMAGE
    endpoint = model.deploy(machine_type="n1-standard-4", min_replica_count=1)
    try:
        # One serving process (torch + transformers), asked over each transport; the REST
        # deploy and undeploy of the trainer's model are test_endpoints_platform.py's.
        for transport in SDK_TRANSPORTS:
            sdk = init_sdk(transport, local_platform, local_platform_state)
            endpoint = sdk.Endpoint(endpoint.resource_name)
            prediction = endpoint.predict(instances=[PROMPT], parameters={"max_new_tokens": 8})
            assert prediction.predictions == [{"generated_text": expected}], transport
            assert prediction.model_resource_name == model.resource_name, transport
    finally:
        endpoint.undeploy_all()
        endpoint.delete()
