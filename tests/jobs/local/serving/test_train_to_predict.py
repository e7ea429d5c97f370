"""From a local script to a prediction, through the real SDK only, as a user writes it against
their own project: `CustomTrainingJob(script_path=...).run()` trains (here: puts the trainer's
tiny export into AIP_MODEL_DIR) and returns the uploaded Model, `model.deploy()` starts its
serving container's command (`python -m trainer.serve`) behind an endpoint, and
`endpoint.predict()` answers with what transformers generates from that model."""

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


@pytest.fixture(params=SDK_TRANSPORTS)
def sdk(
    request: pytest.FixtureRequest,
    local_platform: StackOutputs,
    local_platform_state: PlatformState,
    monkeypatch: pytest.MonkeyPatch,
):
    """The SDK as a user sets it up: their project id, a staging bucket, the emulator for its
    storage client; polling every 0.2 s. Over either transport: the default, gRPC (its CA is
    the session's GRPC_DEFAULT_SSL_ROOTS_FILE_PATH), and REST."""
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import aiplatform
    from google.cloud.aiplatform import jobs, training_jobs

    monkeypatch.setattr(jobs, "_JOB_WAIT_TIME", 0.2)
    monkeypatch.setattr(training_jobs, "_JOB_WAIT_TIME", 0.2)
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", local_platform.gcs_endpoint or "")
    aiplatform.init(
        project=USER_PROJECT,
        location=local_platform.region,
        **transport_options(request.param, local_platform_state),
        credentials=AnonymousCredentials(),
        staging_bucket=f"gs://{local_platform.buckets.staging}",
    )
    return aiplatform


@pytest.mark.slow(cost_s=25)
def test_a_local_script_is_trained_registered_deployed_and_answers(
    sdk, exported: Path, tmp_path: Path
) -> None:
    script = tmp_path / "task.py"
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

    endpoint = model.deploy(machine_type="n1-standard-4", min_replica_count=1)
    try:
        prediction = endpoint.predict(instances=[PROMPT], parameters={"max_new_tokens": 8})
        expected = reference_text(exported, "full", 8)
        assert expected and prediction.predictions == [{"generated_text": expected}]
        assert prediction.model_resource_name == model.resource_name
    finally:
        endpoint.undeploy_all()
        endpoint.delete()
