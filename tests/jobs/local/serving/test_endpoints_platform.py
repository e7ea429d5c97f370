"""Endpoints through the real SDK on a local platform of this module's own: create, deploy a
model version as a serving process, predict, undeploy, delete. The trainer's own serving entry
point (`python -m trainer.serve`) serves a tiny exported model from the emulated GCS and answers
what transformers generates; a stdlib echo server stands in as a custom container where only
the contract matters (environment, routes, traffic, crashes, restarts)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from jobs.core.stack import StackOutputs
from jobs.local.platform.settings import LocalSettings
from jobs.local.platform.state import read_state, stack_outputs_for
from jobs.local.platform.store import Store
from jobs.local.plumbing.ports import free_port
from jobs.local.plumbing.processes import NotRunning, bring_up, start_fresh, stop_platform
from jobs.local.storage.upload import plan, upload_all
from tests.conftest import REPO
from tests.jobs.local.local_helpers import wait_for
from tests.trainer.conftest import run_in_process, tiny_config, write_small_dataset
from tests.trainer.serving.test_serve import PROMPT, reference_text

SERVE_IMAGE = "us-docker.pkg.dev/acme/vtx/serve:latest"
ECHO_IMAGE = "us-docker.pkg.dev/acme/vtx/echo:1"
ECHO = r"""
import json, os
from http.server import BaseHTTPRequestHandler, HTTPServer
SEEN = ("EXTRA", "STORAGE_EMULATOR_HOST")
ENV = {k: v for k, v in os.environ.items() if k.startswith("AIP_") or k in SEEN}
class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        self.send(200 if self.path == os.environ["AIP_HEALTH_ROUTE"] else 404, {})
    def do_POST(self):
        if self.path != os.environ["AIP_PREDICT_ROUTE"]:
            return self.send(404, {"error": {"code": 404, "message": "no such route"}})
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.send(200, {"predictions": [
            {"instance": i, "pid": os.getpid(), "env": ENV, "parameters": body.get("parameters")}
            for i in body["instances"]]})
    def send(self, code, payload):
        data = json.dumps(payload).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
    def log_message(self, *args):
        pass
print("echo serving", flush=True)
HTTPServer(("127.0.0.1", int(os.environ["AIP_HTTP_PORT"])), Handler).serve_forever()
"""


@pytest.fixture(scope="module")
def settings(tmp_path_factory: pytest.TempPathFactory) -> LocalSettings:
    return LocalSettings(
        data_dir=tmp_path_factory.mktemp("vtx-local-endpoints"),
        cwd=REPO,
        port=free_port(),
        gcs_port=free_port(),
        grace_s=2.0,
    )


@pytest.fixture(scope="module")
def platform(settings: LocalSettings) -> Iterator[StackOutputs]:
    state = start_fresh(settings)
    try:
        yield stack_outputs_for(state)
    finally:
        with contextlib.suppress(NotRunning):  # the restart test stops it itself
            stop_platform(settings.data_dir)


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory, platform: StackOutputs) -> tuple[Path, str]:
    """The trainer's export of a tiny model (2 steps), locally and in the platform's GCS."""
    root = tmp_path_factory.mktemp("export")
    data = str(write_small_dataset(root))
    assert run_in_process(tiny_config(data, str(root / "run"), max_steps=2, save_steps=None)) == 0
    uri = "gs://vtx-local-models/runs/r1/model"
    upload_all(platform.gcs_endpoint, plan(root / "run" / "model", uri))
    return root / "run" / "model", uri


@pytest.fixture
def sdk(platform: StackOutputs):
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import aiplatform

    aiplatform.init(
        project="acme-ml-dev",
        location=platform.region,
        api_endpoint=platform.vertex_endpoint,
        api_transport="rest",
        credentials=AnonymousCredentials(),
    )
    return aiplatform


def echo_model(sdk, name: str = "echo", code: str = ECHO, **extra):
    return sdk.Model.upload(
        display_name=name,
        artifact_uri="gs://vtx-local-models/echo/",
        serving_container_image_uri=ECHO_IMAGE,
        serving_container_command=["python", "-c"],
        serving_container_args=[code],
        **extra,
    )


def post(platform: StackOutputs, name: str, body: dict) -> tuple[int, dict]:
    request = urllib.request.Request(
        f"{platform.vertex_endpoint}/v1/{name}",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as exc:
        return exc.code, json.load(exc)


def record(settings: LocalSettings, endpoint: str, deployed_id: str) -> dict | None:
    return Store(settings.data_dir / "jobs.sqlite").get_deployment(endpoint, deployed_id)


def running(pid: int) -> bool:
    return psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE


def test_the_trainers_model_is_deployed_and_predicts_its_greedy_text(
    sdk, settings: LocalSettings, exported: tuple[Path, str]
) -> None:
    local, uri = exported
    endpoint = sdk.Endpoint.create(display_name="tiny-endpoint")
    assert endpoint.resource_name.startswith("projects/") and not endpoint.list_models()
    model = sdk.Model.upload(
        display_name="tiny-sft",
        artifact_uri=uri,
        serving_container_image_uri=SERVE_IMAGE,  # vtx's own: `python -m trainer.serve`
        serving_container_predict_route="/predict",
        serving_container_health_route="/health",
        serving_container_ports=[8080],
    )
    model.deploy(
        endpoint=endpoint,
        machine_type="n1-standard-4",
        accelerator_type="NVIDIA_TESLA_T4",
        accelerator_count=1,
        min_replica_count=1,
        max_replica_count=2,
        traffic_percentage=100,
    )
    (deployed,) = endpoint.list_models()
    assert deployed.model == model.resource_name and deployed.model_version_id == "1"
    resources = deployed.dedicated_resources
    assert resources.machine_spec.machine_type == "n1-standard-4"
    assert resources.machine_spec.accelerator_count == 1
    assert (resources.min_replica_count, resources.max_replica_count) == (1, 2)
    assert dict(endpoint.traffic_split) == {deployed.id: 100}

    prediction = endpoint.predict(instances=[PROMPT], parameters={"max_new_tokens": 8})
    expected = reference_text(local, "full", 8)
    assert expected and prediction.predictions == [{"generated_text": expected}]
    assert prediction.deployed_model_id == deployed.id
    assert prediction.model_resource_name == model.resource_name
    assert prediction.model_version_id == "1"

    found = record(settings, endpoint.resource_name, deployed.id)
    assert found is not None and running(found["pid"])
    listening = {
        c.laddr.ip
        for c in psutil.Process(found["pid"]).net_connections("inet")
        if c.status == psutil.CONN_LISTEN
    }
    assert listening == {"127.0.0.1"}  # local clients only, whatever Vertex's contract says
    log = Path(found["logPath"]).read_text()
    assert "1 x NVIDIA_TESLA_T4 on n1-standard-4" in log and "this machine's CPU" in log

    endpoint.undeploy(deployed.id)
    assert not endpoint.list_models() and not endpoint.traffic_split
    assert (
        not running(found["pid"]) and record(settings, endpoint.resource_name, deployed.id) is None
    )
    endpoint.delete()
    assert endpoint.resource_name not in [e.resource_name for e in sdk.Endpoint.list()]


def test_a_container_gets_vertexs_serving_environment_and_default_routes(
    sdk, platform: StackOutputs
) -> None:
    from google.api_core import exceptions

    model = echo_model(sdk, serving_container_environment_variables={"EXTRA": "$(AIP_MODE)-x"})
    endpoint = model.deploy(machine_type="n1-standard-4")  # a new endpoint, as the SDK does
    (deployed,) = endpoint.list_models()
    (answer,) = endpoint.predict(instances=[{"x": 1}], parameters={"p": 2}).predictions
    assert answer["instance"] == {"x": 1} and answer["parameters"] == {"p": 2}
    env = answer["env"]
    endpoint_id = endpoint.name
    route = f"/v1/endpoints/{endpoint_id}/deployedModels/{deployed.id}"
    assert env["AIP_HEALTH_ROUTE"] == route and env["AIP_PREDICT_ROUTE"] == f"{route}:predict"
    assert env["AIP_MODE"] == "PREDICTION" and env["EXTRA"] == "PREDICTION-x"
    assert env["AIP_DEPLOYED_MODEL_ID"] == deployed.id and env["AIP_ENDPOINT_ID"] == endpoint_id
    assert env["AIP_PROJECT_NUMBER"] == endpoint.resource_name.split("/")[1]
    assert env["AIP_STORAGE_URI"] == "gs://vtx-local-models/echo/"
    assert env["AIP_MACHINE_TYPE"] == "n1-standard-4"
    assert env["STORAGE_EMULATOR_HOST"] == platform.gcs_endpoint
    assert int(env["AIP_HTTP_PORT"]) != 8080  # a free port of its own, told by AIP_HTTP_PORT

    # FAILED_PRECONDITION is HTTP 400: the REST transport raises BadRequest for it.
    with pytest.raises(exceptions.BadRequest, match="undeploy them"):
        endpoint.delete()
    # The Model says where it is deployed, and cannot be deleted from under the endpoint.
    refs = sdk.Model(model.resource_name).gca_resource.deployed_models
    assert [(r.endpoint, r.deployed_model_id) for r in refs] == [
        (endpoint.resource_name, deployed.id)
    ]
    with pytest.raises(exceptions.BadRequest, match="undeploy it first"):
        model.delete()
    endpoint.undeploy_all()
    assert not sdk.Model(model.resource_name).gca_resource.deployed_models
    endpoint.delete()
    model.delete()


def test_traffic_is_split_deterministically_between_deployed_models(
    sdk, platform: StackOutputs
) -> None:
    endpoint = sdk.Endpoint.create(display_name="split")
    first, second = echo_model(sdk, "first"), echo_model(sdk, "second")
    endpoint.deploy(first, machine_type="n1-standard-4")
    endpoint.deploy(second, machine_type="n1-standard-4", traffic_percentage=25)
    ids = {d.display_name: d.id for d in endpoint.list_models()}
    assert dict(endpoint.traffic_split) == {ids["first"]: 75, ids["second"]: 25}
    served = [endpoint.predict(instances=[i]).deployed_model_id for i in range(8)]
    # Smooth weighted round robin: 3 of every 4 to the 75% model, interleaved.
    assert served == [ids[n] for n in ["first", "first", "second", "first"] * 2]
    # The SDK refuses this itself; the service refuses it too, for other clients.
    status, answer = post(
        platform, f"{endpoint.resource_name}:undeployModel", {"deployedModelId": ids["first"]}
    )
    assert status == 400 and "give it to the others" in answer["error"]["message"]
    endpoint.undeploy_all()
    endpoint.delete()


def test_a_crashed_serving_process_makes_predict_unavailable(sdk, settings: LocalSettings) -> None:
    from google.api_core import exceptions

    endpoint = echo_model(sdk).deploy(machine_type="n1-standard-4")
    (deployed,) = endpoint.list_models()
    pid = int(endpoint.predict(instances=[1]).predictions[0]["pid"])  # a Value: a float
    os.killpg(pid, signal.SIGKILL)
    wait_for(lambda: not running(pid))
    with pytest.raises(exceptions.ServiceUnavailable, match="exited with code -9") as raised:
        endpoint.predict(instances=[1])
    assert deployed.id in str(raised.value) and "undeploy" in str(raised.value)
    endpoint.undeploy_all()
    endpoint.delete()


def test_a_process_that_exits_fails_the_deploy_with_its_last_lines(sdk) -> None:
    from google.api_core import exceptions

    crashing = echo_model(sdk, "broken", code="print('no weights here'); raise SystemExit(3)")
    endpoint = sdk.Endpoint.create(display_name="broken")
    with pytest.raises(exceptions.FailedPrecondition) as raised:
        crashing.deploy(endpoint=endpoint, machine_type="n1-standard-4")
    assert "exited with code 3" in str(raised.value) and "no weights here" in str(raised.value)
    assert not endpoint.list_models()
    endpoint.delete()


def test_a_command_that_cannot_start_is_refused(sdk) -> None:
    from google.api_core import exceptions

    missing = sdk.Model.upload(
        display_name="missing",
        artifact_uri="gs://vtx-local-models/echo/",
        serving_container_image_uri=ECHO_IMAGE,
        serving_container_command=["/nonexistent/serve"],
    )
    endpoint = sdk.Endpoint.create(display_name="missing")
    with pytest.raises(exceptions.BadRequest, match=r"cannot be started.*nonexistent"):
        missing.deploy(endpoint=endpoint, machine_type="n1-standard-4")
    assert not endpoint.list_models()
    endpoint.delete()


def deploy_as(platform: StackOutputs, endpoint: str, model: str, deployed_id: str) -> None:
    """DeployModel with a deployedModel.id of the client's choosing, through the SDK's GAPIC
    client (``Endpoint.deploy`` has no argument for it)."""
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import aiplatform_v1

    client = aiplatform_v1.EndpointServiceClient(
        transport="rest",
        credentials=AnonymousCredentials(),
        client_options={"api_endpoint": platform.vertex_endpoint},
    )
    resources = {"machine_spec": {"machine_type": "n1-standard-4"}, "min_replica_count": 1}
    client.deploy_model(
        endpoint=endpoint,
        deployed_model={"id": deployed_id, "model": model, "dedicated_resources": resources},
        traffic_split={"0": 100},
    ).result()


def test_a_deployed_model_id_is_unique_within_its_endpoint_only(
    sdk, settings: LocalSettings, platform: StackOutputs
) -> None:
    """endpoint.proto: a DeployedModel's id is unique within its endpoint. The same id on two
    endpoints (of one endpoint id, in two projects) is two serving processes, two records, two
    logs; undeploying one leaves the other serving."""
    projects = ("acme-ml-dev", "vtx-local")
    endpoints, models = [], []
    for project in projects:
        endpoints.append(
            sdk.Endpoint.create(display_name="twin", endpoint_id="twin", project=project)
        )
        models.append(echo_model(sdk, "twin", project=project))
    for project, endpoint, model in zip(projects, endpoints, models, strict=True):
        # The model named by its project's id, as a client may write it: the same model.
        by_id = f"projects/{project}/{model.resource_name.split('/', 2)[2]}"
        deploy_as(platform, endpoint.resource_name, by_id, "shared")
    served = [endpoint.predict(instances=[1]) for endpoint in endpoints]
    assert [p.deployed_model_id for p in served] == ["shared", "shared"]
    pids = [int(p.predictions[0]["pid"]) for p in served]
    assert pids[0] != pids[1]
    records = [record(settings, e.resource_name, "shared") for e in endpoints]
    assert [r["pid"] for r in records if r] == pids
    assert len({r["logPath"] for r in records if r}) == 2
    for endpoint, model in zip(endpoints, models, strict=True):
        listed = sdk.Model(model.resource_name).gca_resource.deployed_models
        assert [(d.endpoint, d.deployed_model_id) for d in listed] == [
            (endpoint.resource_name, "shared")
        ]

    endpoints[0].undeploy("shared")
    assert not running(pids[0]) and record(settings, endpoints[0].resource_name, "shared") is None
    again = endpoints[1].predict(instances=[2])
    assert again.deployed_model_id == "shared" and int(again.predictions[0]["pid"]) == pids[1]
    kept = record(settings, endpoints[1].resource_name, "shared")
    assert kept is not None and kept["pid"] == pids[1] and running(pids[1])
    endpoints[1].undeploy("shared")
    for endpoint, model in zip(endpoints, models, strict=True):
        endpoint.delete()
        model.delete()


@pytest.mark.parametrize(
    ("machine", "named"),
    [
        ({"machine_type": "n1-standrd-4"}, "unknown machine type 'n1-standrd-4'"),
        (
            {
                "machine_type": "n1-standard-4",
                "accelerator_type": "NVIDIA_TESLA_T4",
                "accelerator_count": 3,
            },
            "3 x NVIDIA_TESLA_T4 is not a valid count",
        ),
    ],
)
def test_deploys_are_checked_against_the_catalog(sdk, machine: dict, named: str) -> None:
    from google.api_core import exceptions

    endpoint = sdk.Endpoint.create(display_name="checked")
    with pytest.raises(exceptions.BadRequest, match=named):
        echo_model(sdk).deploy(endpoint=endpoint, **machine)
    endpoint.delete()


def test_a_deploy_without_a_machine_type_gets_the_sdks_serving_default(sdk) -> None:
    endpoint = sdk.Endpoint.create(display_name="default-machine")
    echo_model(sdk).deploy(endpoint=endpoint)  # the SDK sends n1-standard-2
    (deployed,) = endpoint.list_models()
    assert deployed.dedicated_resources.machine_spec.machine_type == "n1-standard-2"
    endpoint.undeploy_all()
    endpoint.delete()


def test_a_peering_private_endpoint_serves_one_model_at_its_private_predict_uri(
    sdk, platform: StackOutputs
) -> None:
    network = "projects/123456789012/global/networks/acme-vtx-vpc"
    endpoint = sdk.PrivateEndpoint.create(display_name="private", network=network)
    endpoint.deploy(echo_model(sdk, "private-echo"), machine_type="n1-standard-4")
    (deployed,) = endpoint.list_models()
    assert deployed.private_endpoints.predict_http_uri.startswith("http://127.0.0.1:")
    # The SDK's PrivateEndpoint posts to that URI itself, as it posts to the VPC address on Vertex.
    prediction = endpoint.predict(instances=[7])
    assert (
        prediction.predictions[0]["instance"] == 7 and prediction.deployed_model_id == deployed.id
    )
    assert endpoint.health_check()
    second = echo_model(sdk, "second-private")
    body = {
        "deployedModel": {
            "model": second.resource_name,
            "dedicatedResources": {
                "machineSpec": {"machineType": "n1-standard-4"},
                "minReplicaCount": 1,
            },
        }
    }
    status, answer = post(platform, f"{endpoint.resource_name}:deployModel", body)
    assert status == 400 and answer["error"]["status"] == "FAILED_PRECONDITION"
    assert "serves one model" in answer["error"]["message"]
    endpoint.undeploy_all()
    endpoint.delete()


@pytest.mark.parametrize(
    ("endpoint", "expected"),
    [
        ({"network": "projects/acme-ml-dev/global/networks/vpc"}, "the project's number"),
        (
            {
                "network": "projects/123/global/networks/vpc",
                "privateServiceConnectConfig": {"enablePrivateServiceConnect": True},
            },
            "mutually exclusive",
        ),
    ],
)
def test_a_private_endpoint_vertex_would_refuse_is_refused(
    platform: StackOutputs, endpoint: dict, expected: str
) -> None:
    parent = f"projects/acme-ml-dev/locations/{platform.region}"
    status, answer = post(platform, f"{parent}/endpoints", {"displayName": "x", **endpoint})
    assert status == 400 and expected in answer["error"]["message"]


def test_a_psc_endpoint_gets_its_service_attachment_once_a_model_is_deployed(sdk) -> None:
    config = sdk.PrivateEndpoint.PrivateServiceConnectConfig(project_allowlist=["acme-ml-dev"])
    endpoint = sdk.PrivateEndpoint.create(display_name="psc", private_service_connect_config=config)
    assert not endpoint.gca_resource.private_service_connect_config.service_attachment
    endpoint.deploy(echo_model(sdk, "psc-echo"), machine_type="n1-standard-4")
    endpoint = sdk.PrivateEndpoint(endpoint.resource_name)
    attachment = endpoint.gca_resource.private_service_connect_config.service_attachment
    assert attachment.startswith("projects/") and "/serviceAttachments/" in attachment
    assert endpoint.list_models()[0].private_endpoints.service_attachment == attachment
    endpoint.undeploy_all()
    endpoint.delete()


# Last: it stops the platform the module shares.
def test_a_restarted_control_plane_serves_deployed_models_again_and_down_stops_them(
    sdk, settings: LocalSettings, platform: StackOutputs
) -> None:
    endpoint = echo_model(sdk).deploy(machine_type="n1-standard-4")
    before = int(endpoint.predict(instances=[1]).predictions[0]["pid"])
    server = psutil.Process(bring_up_state_pid(settings))
    server.kill()  # kill -9, as a crash: the serving process lives on
    server.wait(timeout=10)
    assert running(before)
    bring_up(settings)
    assert not running(before)  # the new control plane stopped it and started its own
    after = wait_for(lambda: _predicted_pid(endpoint))
    assert after != before and running(after)
    stop_platform(settings.data_dir)  # `vtx local down`
    assert not running(after)


def bring_up_state_pid(settings: LocalSettings) -> int:
    state = read_state(settings.data_dir.resolve())
    assert state is not None
    return state.server_pid


def _predicted_pid(endpoint) -> int | None:
    from google.api_core import exceptions

    try:
        return int(endpoint.predict(instances=[1]).predictions[0]["pid"])
    except exceptions.ServiceUnavailable:
        return None
