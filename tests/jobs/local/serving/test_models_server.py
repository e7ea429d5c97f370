"""The local platform's ModelService through the real SDK (`aiplatform.Model.upload`, versions,
aliases, list, delete) and over raw REST (the operation's poll, int enums, Google's errors)."""

from __future__ import annotations

import pytest

from jobs.core.stack import StackOutputs
from tests.jobs.local.local_helpers import init_sdk, rest

IMAGE = "us-docker.pkg.dev/acme/vtx/serve:latest"


@pytest.fixture
def sdk(local_platform: StackOutputs):
    return init_sdk(local_platform)


def test_sdk_uploads_a_model_then_a_second_version_under_it(sdk) -> None:
    from google.api_core import exceptions

    first = sdk.Model.upload(
        display_name="tiny-sft",
        artifact_uri="gs://vtx-local-checkpoints/runs/r1/model/",
        serving_container_image_uri=IMAGE,
        serving_container_predict_route="/predict",
        serving_container_health_route="/health",
        serving_container_ports=[8080],
        labels={"vtx-run-id": "r1"},
    )
    assert first.version_id == "1"
    assert list(first.version_aliases) == ["default"]
    assert first.uri == "gs://vtx-local-checkpoints/runs/r1/model/"
    assert first.labels == {"vtx-run-id": "r1"}
    spec = first.gca_resource.container_spec
    assert (spec.image_uri, spec.predict_route, spec.health_route) == (IMAGE, "/predict", "/health")
    assert [p.container_port for p in spec.ports] == [8080]
    assert first.create_time and first.update_time

    second = sdk.Model.upload(
        display_name="tiny-sft",
        parent_model=first.resource_name,
        version_aliases=["candidate"],
        artifact_uri="gs://vtx-local-checkpoints/runs/r2/model/",
        serving_container_image_uri=IMAGE,
        labels={"vtx-run-id": "r2"},
    )
    assert second.resource_name == first.resource_name
    assert second.version_id == "2"
    assert set(second.version_aliases) == {"candidate", "default"}  # the SDK adds default

    versions = first.versioning_registry.list_versions()
    assert [(v.version_id, sorted(v.version_aliases)) for v in versions] == [
        ("1", []),
        ("2", ["candidate", "default"]),
    ]
    # No @: the default version; @1 and @candidate pick theirs.
    assert sdk.Model(first.resource_name).version_id == "2"
    assert sdk.Model(first.resource_name, version="1").uri.endswith("/r1/model/")
    assert sdk.Model(first.resource_name, version="candidate").version_id == "2"

    listed = [m for m in sdk.Model.list() if m.resource_name == first.resource_name]
    assert [m.version_id for m in listed] == ["2"]  # one entry per model
    assert [m.resource_name for m in sdk.Model.list(filter='labels.vtx-run-id="r2"')] == [
        first.resource_name
    ]

    registry = first.versioning_registry
    registry.add_version_aliases(["golden", "candidate"], version="1")  # candidate moves to 1
    registry.remove_version_aliases(["golden"], version="1")
    assert [(v.version_id, sorted(v.version_aliases)) for v in registry.list_versions()] == [
        ("1", ["candidate"]),
        ("2", ["default"]),
    ]
    with pytest.raises(exceptions.BadRequest, match="exactly one default version"):
        registry.remove_version_aliases(["default"], version="2")

    first.versioning_registry.delete_version("1")
    assert [v.version_id for v in first.versioning_registry.list_versions()] == ["2"]
    sdk.Model(first.resource_name).delete()
    assert first.resource_name not in [m.resource_name for m in sdk.Model.list()]


def test_upload_answers_an_operation_that_its_poll_finds_done(
    local_platform: StackOutputs,
) -> None:
    parent = f"projects/{local_platform.project}/locations/{local_platform.region}"
    model = {"displayName": "m", "containerSpec": {"imageUri": IMAGE}}
    code, operation = rest(local_platform, "POST", f"{parent}/models:upload", {"model": model})
    assert code == 200 and operation.get("done") is not True
    assert operation["metadata"]["@type"].endswith("UploadModelOperationMetadata")
    model_name = operation["name"].split("/operations/")[0]
    assert "/models/" in model_name

    code, polled = rest(local_platform, "GET", operation["name"])
    assert code == 200 and polled["done"] is True
    assert polled["response"] == {
        "@type": "type.googleapis.com/google.cloud.aiplatform.v1.UploadModelResponse",
        "model": model_name,
        "modelVersionId": "1",
    }
    code, as_ints = rest(local_platform, "GET", f"{model_name}?$alt=json;enum-encoding=int")
    assert as_ints["supportedDeploymentResourcesTypes"] == [1]  # DEDICATED_RESOURCES
    code, deleted = rest(local_platform, "DELETE", model_name)
    assert code == 200 and deleted["done"] is True
    assert rest(local_platform, "GET", deleted["name"])[1]["done"] is True
    code, error = rest(local_platform, "GET", model_name)
    assert code == 404 and error["error"]["status"] == "NOT_FOUND"


@pytest.mark.parametrize(
    ("body", "said"),
    [
        ({"model": {"containerSpec": {"imageUri": IMAGE}}}, "displayName: empty"),
        ({"model": {"displayName": "m", "artifactUri": "/tmp/m"}}, "must be a gs:// folder"),
        ({"model": {"displayName": "m", "versionAliases": ["1st"]}}, "not a valid alias"),
        ({"model": {"displayName": "m", "labels": {"Run": "x"}}}, "invalid label key"),
        ({"model": {"displayName": "m"}, "parentModel": "nope"}, "must be a model of"),
        ({"model": {"displayName": "m", "invented": 1}}, "invented"),
    ],
)
def test_upload_refusals_have_googles_shape(
    local_platform: StackOutputs, body: dict, said: str
) -> None:
    parent = f"projects/{local_platform.project}/locations/{local_platform.region}"
    code, error = rest(local_platform, "POST", f"{parent}/models:upload", body)
    assert code == 400 and error["error"]["status"] == "INVALID_ARGUMENT"
    assert said in error["error"]["message"]


def test_list_pages_and_filters_models(local_platform: StackOutputs) -> None:
    parent = f"projects/{local_platform.project}/locations/{local_platform.region}"
    for i in range(3):
        model = {"displayName": f"paged-{i}", "labels": {"batch": "paging"}}
        assert rest(local_platform, "POST", f"{parent}/models:upload", {"model": model})[0] == 200
    wanted = "filter=labels.batch%3D%22paging%22"
    code, page = rest(local_platform, "GET", f"{parent}/models?{wanted}&pageSize=2")
    assert [m["displayName"] for m in page["models"]] == ["paged-2", "paged-1"]
    token = page["nextPageToken"]
    code, rest_page = rest(local_platform, "GET", f"{parent}/models?{wanted}&pageToken={token}")
    assert [m["displayName"] for m in rest_page["models"]] == ["paged-0"]
    assert "nextPageToken" not in rest_page
    code, error = rest(local_platform, "GET", f"{parent}/models?filter=state%3DX")
    assert code == 400 and "cannot filter on 'state'" in error["error"]["message"]
