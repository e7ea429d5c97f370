"""The pure parts of the local EndpointService: traffic routing, the checks of a create and a
deploy, and how a deployed model's serving command and environment are built."""

from __future__ import annotations

import sys

import pytest

from jobs.local.serving.endpoint_checks import (
    endpoint_problems,
    machine_problems,
    resources_problems,
)
from jobs.local.serving.predictions import integral
from jobs.local.serving.serving_process import (
    ServingCommandError,
    expand,
    is_vtx_serving_image,
    routes_of,
    serving_argv,
    serving_env,
)
from jobs.local.serving.traffic import pick_deployed, split_problems

MODEL = {
    "name": "projects/424242424242/locations/us-central1/models/77",
    "versionId": "2",
    "artifactUri": "gs://vtx-local-models/runs/r1/model",
    "containerSpec": {"imageUri": "us-docker.pkg.dev/acme/vtx/serve:latest"},
}


def picks(split: dict[str, int], order: list[str], n: int) -> list[str | None]:
    credit: dict[str, int] = {}
    return [pick_deployed(split, order, credit) for _ in range(n)]


def test_traffic_follows_the_split_exactly_every_100_predictions_interleaved() -> None:
    assert picks({"a": 50, "b": 50}, ["a", "b"], 4) == ["a", "b", "a", "b"]
    assert picks({"a": 100}, ["a", "b"], 3) == ["a", "a", "a"]
    served = picks({"a": 70, "b": 20, "c": 10}, ["a", "b", "c"], 100)
    assert (served.count("a"), served.count("b"), served.count("c")) == (70, 20, 10)
    assert served[:6] == ["a", "a", "b", "a", "a", "c"]  # interleaved, not 70 in a row
    assert picks({}, ["a"], 1) == [None] and picks({"a": 0}, ["a"], 1) == [None]


def test_a_split_names_deployed_models_and_sums_to_100() -> None:
    assert split_problems({"1": 60, "0": 40}, {"1", "0"}) == []
    assert split_problems({}, set()) == []
    assert any("sum to 90" in p for p in split_problems({"1": 90}, {"1"}))
    assert any("'9' is not a deployed model" in p for p in split_problems({"9": 100}, {"1"}))


def test_endpoint_and_resource_checks_name_the_field() -> None:
    assert endpoint_problems({"displayName": "e"}, None) == []
    assert endpoint_problems({"displayName": "e"}, "my-endpoint") == []
    assert "endpoint.displayName: empty; a display name has 1 to 128 characters" in (
        endpoint_problems({}, None)
    )
    assert any(p.startswith("endpointId") for p in endpoint_problems({"displayName": "e"}, "01"))
    dedicated = {"machineSpec": {"machineType": "n1-standard-4"}, "minReplicaCount": 1}
    assert resources_problems({"dedicatedResources": dedicated}) == []
    assert "DEDICATED_RESOURCES" in resources_problems({"automaticResources": {}})[0]
    low = resources_problems({"dedicatedResources": {**dedicated, "minReplicaCount": 0}})
    assert low == ["deployedModel.dedicatedResources.minReplicaCount: must be at least 1"]
    high = {**dedicated, "minReplicaCount": 3, "maxReplicaCount": 2}
    assert "below minReplicaCount" in resources_problems({"dedicatedResources": high})[0]


def test_machines_are_checked_by_the_catalogs_rules() -> None:
    assert machine_problems({"machineType": "n1-standard-4"}, "d") == []
    t4 = {"machineType": "n1-standard-4", "acceleratorType": "NVIDIA_TESLA_T4"}
    assert machine_problems({**t4, "acceleratorCount": 1}, "d") == []
    (wrong,) = machine_problems({**t4, "acceleratorCount": 3}, "d")
    assert wrong.startswith("d.machineSpec.acceleratorCount: 3 x NVIDIA_TESLA_T4")
    (unknown,) = machine_problems({"machineType": "n9-huge"}, "d")
    assert "unknown machine type 'n9-huge'" in unknown


@pytest.mark.parametrize("machine", ["n1-standard-2", "e2-standard-2", "e2-highcpu-4"])
def test_serving_machines_are_predictions_own_list(machine: str) -> None:
    # n1-standard-2 is the SDK's default for Model.deploy; neither it nor the E2 ones below
    # n1-standard-4 are training machines.
    assert machine_problems({"machineType": machine}, "d") == []


def test_the_serving_command_is_the_containers_or_vtxs_own_entry_point() -> None:
    env = {"AIP_HTTP_PORT": "9000"}
    assert serving_argv(MODEL["containerSpec"], env) == [sys.executable, "-m", "trainer.serve"]
    spec = {
        "imageUri": "x/y:1",
        "command": ["python3", "s.py"],
        "args": ["--port=$(AIP_HTTP_PORT)"],
    }
    assert serving_argv(spec, env) == [sys.executable, "s.py", "--port=9000"]
    with pytest.raises(ServingCommandError, match=r"containerSpec\.command"):
        serving_argv({"imageUri": "us-docker.pkg.dev/p/r/other:1"}, env)
    assert is_vtx_serving_image("europe-docker.pkg.dev/p/vtx/serve@sha256:abc")
    assert not is_vtx_serving_image("europe-docker.pkg.dev/p/vtx/server:1")
    assert (
        expand("$$(AIP_HTTP_PORT) $(NOPE) $(AIP_HTTP_PORT)", env) == "$(AIP_HTTP_PORT) $(NOPE) 9000"
    )


def test_the_serving_environment_is_vertexs_and_replaces_inherited_aip_variables() -> None:
    container = {**MODEL["containerSpec"], "env": [{"name": "MODE", "value": "$(AIP_MODE)"}]}
    env = serving_env(
        {**MODEL, "containerSpec": container},
        endpoint_id="5",
        deployed_model_id="6",
        project_number="424242424242",
        port=9000,
        machine_spec={"machineType": "g2-standard-8", "acceleratorType": "NVIDIA_L4"},
        gcs_endpoint="http://127.0.0.1:8471",
        base_env={"AIP_STALE": "x", "CLOUD_ML_JOB_ID": "j", "HOME": "/h"},
    )
    assert "AIP_STALE" not in env and "CLOUD_ML_JOB_ID" not in env and env["HOME"] == "/h"
    assert env["AIP_HTTP_PORT"] == "9000" and env["AIP_MODE"] == "PREDICTION"
    assert env["AIP_HEALTH_ROUTE"] == "/v1/endpoints/5/deployedModels/6"
    assert env["AIP_PREDICT_ROUTE"] == "/v1/endpoints/5/deployedModels/6:predict"
    assert env["AIP_STORAGE_URI"] == MODEL["artifactUri"] and env["MODE"] == "PREDICTION"
    assert (env["AIP_MODEL_NAME"], env["AIP_VERSION_NAME"]) == ("77", "2")
    assert env["AIP_ACCELERATOR_TYPE"] == "NVIDIA_L4"
    assert env["STORAGE_EMULATOR_HOST"] == "http://127.0.0.1:8471"
    routes = routes_of({"healthRoute": "/h", "predictRoute": "/p"}, "5", "6")
    assert (routes.health, routes.predict) == ("/h", "/p")


def test_integral_doubles_reach_the_container_as_integers() -> None:
    assert integral({"max_new_tokens": 8.0, "t": 0.5, "xs": [1.0, "a"]}) == {
        "max_new_tokens": 8,
        "t": 0.5,
        "xs": [1, "a"],
    }
