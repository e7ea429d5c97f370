"""jobs/serving/model_upload.py without a platform: the Model it builds, and UploadModel sent once,
a
503 retried only after checking that nothing of the run landed."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from jobs.core.contract import LABEL_RUN_ID
from jobs.core.stack import StackOutputs
from jobs.serving.model_rest import ModelRecord, ModelRest
from jobs.serving.model_upload import (
    ModelPlan,
    UploadOptions,
    UploadRefused,
    plan_upload,
    serving_model,
    upload_model,
)
from jobs.vertex.errors import VertexError
from jobs.vertex.retry import Backoff
from tests.conftest import stack_outputs

NO_WAIT = Backoff(initial_s=0.0, maximum_s=0.0, deadline_s=5.0)


@pytest.fixture
def stack() -> StackOutputs:
    return stack_outputs()


def plan(stack: StackOutputs) -> ModelPlan:
    model = serving_model(
        stack, "gs://c/runs/r1/model/", {LABEL_RUN_ID: "r1"}, UploadOptions(display_name="m")
    )
    return ModelPlan("r1", "projects/123/locations/us-central1/customJobs/1", "full", None, model)


def record(name: str, version: str) -> ModelRecord:
    return ModelRecord.from_rest(
        {"name": name, "versionId": version, "labels": {LABEL_RUN_ID: "r1"}}
    )


class FakeRest(ModelRest):
    """What ListModels answers: ``landed`` appears after the first upload attempt."""

    def __init__(self, stack: StackOutputs) -> None:
        super().__init__(stack)
        self.models: list[ModelRecord] = []

    def list_models(self, filter: str = "") -> list[ModelRecord]:
        return list(self.models)


@dataclass
class Response:
    model: str
    model_version_id: str


class FakeClient:
    def __init__(self, rest: FakeRest, fail_first: bool, lands: bool) -> None:
        self.rest, self.fail_first, self.lands, self.calls = rest, fail_first, lands, 0

    def upload_model(self, request, retry):
        from google.api_core import exceptions

        self.calls += 1
        assert retry is None  # never retried blindly: a retry would register a second version
        assert request.parent == "projects/acme-ml-dev/locations/us-central1"
        assert request.model.container_spec.image_uri.endswith("/vtx/serve:latest")
        if self.fail_first and self.calls == 1:
            if self.lands:
                self.rest.models.append(record("projects/123/locations/us-central1/models/7", "1"))
            raise exceptions.ServiceUnavailable("backend unavailable")
        client = self

        class Operation:
            def result(self, timeout):
                return Response(f"projects/123/locations/us-central1/models/{client.calls}", "1")

        return Operation()


def test_a_503_whose_upload_landed_returns_the_landed_version_without_sending_again(
    stack: StackOutputs,
) -> None:
    rest = FakeRest(stack)
    client = FakeClient(rest, fail_first=True, lands=True)
    uploaded = upload_model(stack, plan(stack), rest, client=client, backoff=NO_WAIT)
    assert (uploaded.model, uploaded.version_id) == (
        "projects/123/locations/us-central1/models/7",
        "1",
    )
    assert client.calls == 1


def test_a_503_that_did_not_land_is_sent_again(stack: StackOutputs) -> None:
    rest = FakeRest(stack)
    client = FakeClient(rest, fail_first=True, lands=False)
    uploaded = upload_model(stack, plan(stack), rest, client=client, backoff=NO_WAIT)
    assert client.calls == 2 and uploaded.model.endswith("/models/2")


def test_a_refusal_is_explained_not_retried(stack: StackOutputs) -> None:
    from google.api_core import exceptions

    class Refusing:
        calls = 0

        def upload_model(self, request, retry):
            self.calls += 1
            raise exceptions.PermissionDenied("no aiplatform.models.upload")

    client = Refusing()
    with pytest.raises(VertexError, match="permission denied in acme-ml-dev"):
        upload_model(stack, plan(stack), FakeRest(stack), client=client, backoff=NO_WAIT)
    assert client.calls == 1


def test_the_model_declares_vertexs_serving_contract_and_keeps_default_once(
    stack: StackOutputs,
) -> None:
    options = UploadOptions(display_name="m", image="serve:v2", aliases=("default", "prod"))
    model = serving_model(stack, "gs://c/runs/r1/model/", {}, options)
    assert model["containerSpec"] == {
        "imageUri": "us-central1-docker.pkg.dev/acme-ml-dev/vtx/serve:v2",
        "predictRoute": "/predict",
        "healthRoute": "/health",
        "ports": [{"containerPort": 8080}],
    }
    assert model["versionAliases"] == ["default", "prod"]
    other = serving_model(
        stack, "gs://x/", {}, UploadOptions(display_name="m", image="ghcr.io/a/b:1")
    )
    assert other["containerSpec"]["imageUri"] == "ghcr.io/a/b:1"
    assert other["versionAliases"] == ["default"]


def test_a_study_run_is_refused_before_its_trials_are_read(stack: StackOutputs) -> None:
    class StudyRest(FakeRest):
        def list_studies(self, run_id: str | None = None) -> list[dict]:
            return [{"name": "projects/123/locations/us-central1/hyperparameterTuningJobs/9"}]

        def list(self, run_id: str | None = None):
            raise AssertionError("a study's trial jobs are not its model")

    with pytest.raises(UploadRefused, match="run r1 is a hyperparameter tuning study"):
        plan_upload(stack, "r1", UploadOptions(), StudyRest(stack), storage=None)  # type: ignore[arg-type]
