"""Vertex AI v1 over gRPC: the transcoder's pure parts, then hand-built aiplatform_v1 clients
over gRPC (TLS, the platform's CA) against the session's platform, each answer compared with the
REST transport's for the same request."""

from __future__ import annotations

import json
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.api_core import exceptions
from google.protobuf import empty_pb2, field_mask_pb2
from google.rpc import error_details_pb2, status_pb2

from jobs.local.api.grpc_methods import vertex_method
from jobs.local.api.grpc_transcoding import NoBinding, grpc_error, http_request
from jobs.local.platform.state import PlatformState, stack_outputs_for
from jobs.local.plumbing.tls import tls_files
from tests.jobs.local.local_helpers import PARENT, custom_job, pool, wait_terminal

JOBS = "/google.cloud.aiplatform.v1.JobService/"
SLEEPER = "import time; time.sleep(600)"


# -- the method table and the transcoding ---------------------------------------------------------


def test_methods_come_with_their_messages_and_http_rules() -> None:
    create = vertex_method(JOBS + "CreateCustomJob")
    assert create is not None
    assert (
        create.request.DESCRIPTOR.full_name == "google.cloud.aiplatform.v1.CreateCustomJobRequest"
    )
    assert create.response.DESCRIPTOR.full_name == "google.cloud.aiplatform.v1.CustomJob"
    assert create.http_rules[0] == {
        "method": "post",
        "uri": "/v1/{parent=projects/*/locations/*}/customJobs",
        "body": "custom_job",
    }
    operations = vertex_method("/google.longrunning.Operations/GetOperation")
    assert operations is not None and operations.response.DESCRIPTOR.name == "Operation"
    uris = [rule["uri"] for rule in operations.http_rules]
    assert "/v1/{name=projects/*/locations/*/customJobs/*/operations/*}" in uris
    streaming = vertex_method("/google.cloud.aiplatform.v1.PredictionService/StreamingPredict")
    assert streaming is not None and streaming.kind == "stream_stream"
    assert vertex_method("/google.cloud.aiplatform.v1.NoSuchService/Get") is None


def test_a_request_becomes_the_rest_transports_http_request() -> None:
    from google.cloud.aiplatform_v1 import CustomJob, ListCustomJobsRequest

    listing = vertex_method(JOBS + "ListCustomJobs")
    assert listing is not None
    request = ListCustomJobsRequest(
        parent=PARENT,
        filter='display_name="a b"',
        page_size=7,
        read_mask=field_mask_pb2.FieldMask(paths=["display_name", "job_spec.worker_pool_specs"]),
    )
    call = http_request(listing, ListCustomJobsRequest.pb(request))
    assert (call.verb, call.path, call.body) == ("GET", f"/v1/{PARENT}/customJobs", None)
    assert call.query == [
        ("filter", 'display_name="a b"'),
        ("pageSize", "7"),
        ("readMask", "displayName,jobSpec.workerPoolSpecs"),
        ("$alt", "json;enum-encoding=int"),
    ]
    create = vertex_method(JOBS + "CreateCustomJob")
    assert create is not None
    job = CustomJob.pb(custom_job("x", pool("print(1)")))
    message = create.request(parent=PARENT, custom_job=job)
    call = http_request(create, message)
    assert (call.verb, call.path) == ("POST", f"/v1/{PARENT}/customJobs")
    assert json.loads(call.body or b"")["jobSpec"]["workerPoolSpecs"][0]["replicaCount"] == "1"
    with pytest.raises(NoBinding, match="CreateCustomJob"):
        http_request(create, create.request())  # no parent: no path


def test_rest_errors_map_to_grpc_codes_and_status_details() -> None:
    def body(**error: Any) -> bytes:
        return json.dumps({"error": error}).encode()

    named = grpc_error(400, body(code=400, message="ended", status="FAILED_PRECONDITION"))
    assert (named.code, named.message, named.status) == (
        grpc.StatusCode.FAILED_PRECONDITION,
        "ended",
        None,
    )
    assert grpc_error(409, body(message="x", status="ALREADY_EXISTS")).code.name == "ALREADY_EXISTS"
    for http_code, code in [
        (401, "UNAUTHENTICATED"),
        (403, "PERMISSION_DENIED"),
        (404, "NOT_FOUND"),
        (409, "ABORTED"),
        (412, "FAILED_PRECONDITION"),
        (429, "RESOURCE_EXHAUSTED"),
        (499, "CANCELLED"),
        (500, "INTERNAL"),
        (501, "UNIMPLEMENTED"),
        (503, "UNAVAILABLE"),
        (504, "DEADLINE_EXCEEDED"),
    ]:
        assert grpc_error(http_code, body(message="m")).code.name == code
    assert grpc_error(502, b"<html>bad gateway</html>").code == grpc.StatusCode.UNKNOWN
    info = {
        "@type": "type.googleapis.com/google.rpc.ErrorInfo",
        "reason": "QUOTA",
        "domain": "aiplatform.googleapis.com",
    }
    detailed = grpc_error(429, body(message="over", status="RESOURCE_EXHAUSTED", details=[info]))
    assert detailed.status is not None
    key, value = detailed.trailing_metadata()[0]
    assert key == "grpc-status-details-bin"
    status = status_pb2.Status.FromString(value)
    assert (status.code, status.message) == (8, "over")
    unpacked = error_details_pb2.ErrorInfo()
    assert status.details[0].Unpack(unpacked) and unpacked.reason == "QUOTA"


# -- over the wire ---------------------------------------------------------------------------------


def _channel(state: PlatformState) -> grpc.Channel:
    from google.api_core import grpc_helpers
    from google.auth.credentials import AnonymousCredentials

    assert state.grpc_endpoint is not None
    roots = tls_files(Path(state.data_dir)).ca.read_bytes()
    return grpc_helpers.create_channel(
        state.grpc_endpoint,
        credentials=AnonymousCredentials(),
        ssl_credentials=grpc.ssl_channel_credentials(roots),
    )


def _clients(state: PlatformState, service: str) -> dict[str, Any]:
    """The service's client over each transport: gRPC (default) and REST."""
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import aiplatform_v1

    cls = getattr(aiplatform_v1, f"{service}Client")
    transport_cls = cls.get_transport_class("grpc")
    return {
        "grpc": cls(transport=transport_cls(channel=_channel(state))),
        "rest": cls(
            transport="rest",
            credentials=AnonymousCredentials(),
            client_options={"api_endpoint": state.vertex_endpoint},
        ),
    }


def _as_dict(message: Any) -> dict:
    return type(message).to_dict(message)


def test_tls_files_are_the_users_alone(local_platform_state: PlatformState) -> None:
    files = tls_files(Path(local_platform_state.data_dir))
    assert stat.S_IMODE(files.directory.stat().st_mode) == 0o700
    for path in (files.ca, files.cert, files.key):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert not list(files.directory.glob("ca-key*"))  # the CA's key is never written


def test_certificates_are_kept_and_made_again_near_their_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import datetime

    from cryptography import x509

    from jobs.local.plumbing import tls

    files = tls.ensure_certificates(tmp_path)
    ca, cert = files.ca.read_bytes(), files.cert.read_bytes()
    server = x509.load_pem_x509_certificate(cert)
    names = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == ["localhost"]
    assert [str(a) for a in names.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    assert server.issuer == x509.load_pem_x509_certificate(ca).subject
    assert tls.ensure_certificates(tmp_path).ca.read_bytes() == ca  # kept
    monkeypatch.setattr(tls, "RENEW_BEFORE", tls.VALIDITY + datetime.timedelta(days=1))
    assert tls.ensure_certificates(tmp_path).ca.read_bytes() != ca  # near its end: made again
    files.key.unlink()
    monkeypatch.undo()
    renewed = files.ca.read_bytes()
    assert tls.ensure_certificates(tmp_path).ca.read_bytes() != renewed  # a file missing


def test_custom_jobs_answer_the_same_over_both_transports(
    local_platform_state: PlatformState,
) -> None:
    clients = _clients(local_platform_state, "JobService")
    grpc_jobs, rest_jobs = clients["grpc"], clients["rest"]
    job = grpc_jobs.create_custom_job(
        parent=PARENT, custom_job=custom_job("grpc-same", pool("print(1)"), labels={"t": "g"})
    )
    assert job.name.startswith("projects/424242424242/locations/us-central1/customJobs/")
    done = wait_terminal(grpc_jobs, job.name)
    assert done.state == 4  # SUCCEEDED
    assert _as_dict(grpc_jobs.get_custom_job(name=job.name)) == _as_dict(
        rest_jobs.get_custom_job(name=job.name)
    )
    listing = {
        "parent": PARENT,
        "filter": 'labels.t="g" AND display_name="grpc-same"',
        "page_size": 5,
        "read_mask": field_mask_pb2.FieldMask(paths=["name", "display_name", "state"]),
    }
    over = {
        t: [_as_dict(j) for j in c.list_custom_jobs(request=listing)] for t, c in clients.items()
    }
    assert over["grpc"] == over["rest"]
    assert [(j["name"], j["display_name"], j["state"]) for j in over["grpc"]] == [
        (job.name, "grpc-same", 4)
    ]
    assert "create_time" not in over["grpc"][0]  # the readMask cut it
    # The same refusals: a cancel of an ended job, a job that does not exist.
    for method, kwargs in [
        ("cancel_custom_job", {"name": job.name}),
        ("get_custom_job", {"name": f"{PARENT}/customJobs/1"}),
    ]:
        raised = {}
        for transport, jobs in clients.items():
            with pytest.raises(exceptions.GoogleAPICallError) as caught:
                getattr(jobs, method)(**kwargs)
            raised[transport] = caught.value
        over_rest, over_grpc = raised["rest"], raised["grpc"]
        # REST: the HTTP code, Google's status name in the body; gRPC: the code itself.
        assert over_grpc.code == over_rest.code, method
        assert over_grpc.grpc_status_code.name == over_rest.response.json()["error"]["status"]
        assert over_rest.message.endswith(f": {over_grpc.message}")
    assert over_grpc.grpc_status_code == grpc.StatusCode.NOT_FOUND
    deleted = grpc_jobs.delete_custom_job(name=job.name).result(timeout=30)
    assert deleted == empty_pb2.Empty()
    with pytest.raises(exceptions.NotFound):
        rest_jobs.get_custom_job(name=job.name)


def test_a_cancel_over_grpc_stops_a_running_job(local_platform_state: PlatformState) -> None:
    jobs = _clients(local_platform_state, "JobService")["grpc"]
    job = jobs.create_custom_job(parent=PARENT, custom_job=custom_job("grpc-cancel", pool(SLEEPER)))
    jobs.cancel_custom_job(name=job.name)
    assert wait_terminal(jobs, job.name).state == 7  # CANCELLED


@pytest.mark.parametrize(
    ("path", "fields", "why"),
    [
        (JOBS + "CreateDataLabelingJob", {"parent": PARENT}, "no route takes POST"),
        ("/google.cloud.aiplatform.v1.PredictionService/StreamingPredict", {}, "streaming"),
        ("/google.cloud.aiplatform.v1.PredictionService/ServerStreamingPredict", {}, "streaming"),
        ("/google.cloud.aiplatform.v1.NoSuchService/Get", None, "has no such method"),
        (
            "/google.cloud.location.Locations/ListLocations",
            {"name": "projects/vtx-local"},
            "no route takes GET",
        ),
    ],
)
def test_what_is_not_served_is_unimplemented_naming_it(
    local_platform_state: PlatformState, path: str, fields: dict | None, why: str
) -> None:
    """Every kind of call gets its answer at once; the deadline only catches a hang."""
    method = vertex_method(path)
    request = method.request(**fields).SerializeToString() if method and fields is not None else b""
    kind = method.kind if method else "unary_unary"
    stub = getattr(_channel(local_platform_state), kind)(path)  # bytes in, bytes out
    with pytest.raises(grpc.RpcError) as caught:
        answer = stub(request if kind.startswith("unary") else iter([request]), timeout=30)
        if kind.endswith("stream"):
            list(answer)
    assert caught.value.code() == grpc.StatusCode.UNIMPLEMENTED
    assert path.lstrip("/").replace("/", ".") in caught.value.details()
    assert why in caught.value.details()


def test_the_local_platform_names_its_grpc_endpoint(local_platform_state: PlatformState) -> None:
    outputs = stack_outputs_for(local_platform_state)
    assert local_platform_state.grpc_endpoint == f"127.0.0.1:{local_platform_state.grpc_port}"
    assert outputs.vertex_endpoint != local_platform_state.grpc_endpoint


# -- other users -------------------------------------------------------------------------------


def test_other_users_are_refused_over_grpc_as_over_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The control plane in this process, its kernel lookup told that the gRPC port's clients
    belong to nobody (uid 65534): their calls are refused before any route runs, with the
    REST side's words, while REST callers of the same user are served. Running a client as
    another user needs an interpreter that user can read, which this venv may not be."""
    from jobs.local.platform.settings import LocalSettings
    from jobs.local.plumbing import guard
    from jobs.local.plumbing.ports import free_port
    from tests.conftest import REPO
    from tests.jobs.local.api.test_races import InProcess

    settings = LocalSettings(
        data_dir=tmp_path, cwd=REPO, port=free_port(), gcs_port=free_port(), grace_s=1.0
    )
    with InProcess(settings) as server:
        grpc_port = server.app.state.grpc_port
        state = PlatformState(
            data_dir=str(tmp_path),
            cwd=str(REPO),
            vertex_port=settings.port,
            gcs_port=settings.gcs_port,
            grpc_port=grpc_port,
            server_pid=0,
            server_create_time=0.0,
            token="t",
        )
        clients = _clients(state, "JobService")
        request = {"parent": PARENT}
        assert list(clients["grpc"].list_custom_jobs(request=request)) == []  # the user: served
        real_owner = guard.socket_owner

        def nobody_on_grpc(client_port: int, server_port: int, *args: Any) -> int | None:
            return 65534 if server_port == grpc_port else real_owner(client_port, server_port)

        monkeypatch.setattr(guard, "socket_owner", nobody_on_grpc)
        with pytest.raises(exceptions.PermissionDenied, match="uid 65534"):
            clients["grpc"].list_custom_jobs(request=request)
        with pytest.raises(grpc.RpcError) as unserved:  # what no route serves: refused first
            _channel(state).unary_unary(JOBS + "CreateDataLabelingJob")(b"", timeout=30)
        assert unserved.value.code() == grpc.StatusCode.PERMISSION_DENIED
        assert list(clients["rest"].list_custom_jobs(request=request)) == []


# -- with the platform -------------------------------------------------------------------------


def test_grpc_comes_back_with_the_control_plane_on_its_port_with_its_ca(
    gcs_emulator: str, tmp_path: Path
) -> None:
    """kill -9 of the control plane, then `vtx local up`'s recovery: the gRPC endpoint is back
    on its recorded port, with the same CA (a shell's exported variables stay good)."""
    import psutil

    from jobs.local.platform.settings import LocalSettings
    from jobs.local.plumbing.ports import free_port
    from jobs.local.plumbing.processes import bring_up, start_fresh, stop_platform
    from tests.conftest import REPO

    data_dir = tmp_path / "platform"
    settings = LocalSettings(data_dir=data_dir, cwd=REPO, port=free_port(), grace_s=1.0)
    state = start_fresh(settings, gcs_endpoint=gcs_emulator)
    try:
        ca = tls_files(data_dir).ca.read_bytes()
        jobs = _clients(state, "JobService")["grpc"]
        assert list(jobs.list_custom_jobs(request={"parent": PARENT})) == []
        server = psutil.Process(state.server_pid)
        server.kill()  # kill -9, as a crash
        server.wait(timeout=10)
        again = bring_up(settings).state
        assert again.grpc_port == state.grpc_port
        assert tls_files(data_dir).ca.read_bytes() == ca
        job = _clients(again, "JobService")["grpc"].create_custom_job(
            parent=PARENT, custom_job=custom_job("back", pool("print(1)"))
        )
        assert wait_terminal(jobs, job.name).state == 4  # the first channel reconnects
    finally:
        stop_platform(data_dir)
    with pytest.raises(grpc.RpcError) as stopped:  # stopped with the platform
        _channel(state).unary_unary(JOBS + "ListCustomJobs")(b"", timeout=10)
    assert stopped.value.code() == grpc.StatusCode.UNAVAILABLE


# -- every served service, both transports ---------------------------------------------------------


def _answer(transport: str, client: Any, method: str, request: dict) -> tuple[str, Any]:
    """("ok", the response as a dict) or ("error", (HTTP code, Google's status name, message))."""
    from google.protobuf import json_format

    try:
        call = getattr(client, method)
        # PredictRequest(instances=[...]) is refused by proto-plus; the flattened form extends.
        response = call(**request) if "instances" in request else call(request=request)
    except exceptions.GoogleAPICallError as exc:
        if transport == "grpc":  # the code and the message as sent
            return "error", (exc.code, exc.grpc_status_code.name, exc.message)
        # REST: Google's status name in the body; the message after "VERB URL: "
        status = exc.response.json()["error"]["status"]
        return "error", (exc.code, status, exc.message.split(": ", 1)[1])
    if hasattr(response, "pages"):  # a pager: its first page
        response = next(iter(response.pages))
    if hasattr(type(response), "to_dict"):
        return "ok", type(response).to_dict(response)
    return "ok", json_format.MessageToDict(response)


@pytest.fixture(scope="module")
def resources(local_platform_state: PlatformState) -> dict[str, str]:
    """A model and an endpoint (no model deployed) to read, made over REST."""
    from google.cloud import aiplatform_v1

    models = _clients(local_platform_state, "ModelService")["rest"]
    model = aiplatform_v1.Model(
        display_name="both-transports",
        container_spec={"image_uri": "local/serve:1", "command": ["python", "-m", "x"]},
        labels={"t": "both"},
    )
    uploaded = models.upload_model(parent=PARENT, model=model).result(timeout=30)
    endpoints = _clients(local_platform_state, "EndpointService")["rest"]
    endpoint = endpoints.create_endpoint(
        parent=PARENT, endpoint={"display_name": "both-transports"}
    ).result(timeout=30)
    return {"model": uploaded.model, "endpoint": endpoint.name}


CALLS = [
    ("JobService", "list_hyperparameter_tuning_jobs", {"parent": PARENT, "page_size": 3}),
    (
        "JobService",
        "get_hyperparameter_tuning_job",
        {"name": f"{PARENT}/hyperparameterTuningJobs/9"},
    ),
    ("PipelineService", "list_training_pipelines", {"parent": PARENT, "filter": "bad filter"}),
    ("ModelService", "get_model", {"name": "{model}"}),
    ("ModelService", "list_models", {"parent": PARENT, "filter": 'labels.t="both"'}),
    ("ModelService", "list_model_versions", {"name": "{model}"}),
    ("ModelService", "list_models", {"parent": PARENT, "order_by": "no_such_field"}),
    ("EndpointService", "get_endpoint", {"name": "{endpoint}"}),
    ("EndpointService", "list_endpoints", {"parent": PARENT, "order_by": "display_name desc"}),
    (
        "PredictionService",
        "predict",
        {"endpoint": "{endpoint}", "instances": [8]},
    ),
    ("ModelService", "get_model", {"name": f"{PARENT}/models/404"}),
]


@pytest.mark.parametrize(("service", "method", "request_"), CALLS)
def test_each_method_answers_the_same_over_both_transports(
    local_platform_state: PlatformState,
    resources: dict[str, str],
    service: str,
    method: str,
    request_: dict,
) -> None:
    request = {k: v.format(**resources) if isinstance(v, str) else v for k, v in request_.items()}
    answers = {
        t: _answer(t, c, method, request)
        for t, c in _clients(local_platform_state, service).items()
    }
    assert answers["grpc"] == answers["rest"]


def test_operations_answer_the_same_over_both_transports(
    local_platform_state: PlatformState,
) -> None:
    """google.longrunning.Operations: each transport's operations client reads the other's."""
    from google.protobuf import json_format

    clients = _clients(local_platform_state, "EndpointService")
    names = {
        t: c.create_endpoint(parent=PARENT, endpoint={"display_name": f"op-{t}"}).operation.name
        for t, c in clients.items()
    }
    for name in names.values():
        read = {
            t: json_format.MessageToDict(c._transport.operations_client.get_operation(name))
            for t, c in clients.items()
        }
        assert read["grpc"] == read["rest"]
        assert read["grpc"]["done"] is True
        assert read["grpc"]["response"]["@type"].endswith("aiplatform.v1.Endpoint")


@pytest.fixture(scope="module")
def echo_endpoint(local_platform_state: PlatformState) -> Iterator[str]:
    """An endpoint serving bench/soak.py's echo model (a stdlib server answering each
    prediction with its instances), deployed over REST; undeployed and deleted after."""
    from google.cloud import aiplatform_v1

    from bench.soak import HEALTHY_MODEL

    models = _clients(local_platform_state, "ModelService")["rest"]
    model = aiplatform_v1.Model(
        display_name="echo",
        container_spec={"image_uri": "local/echo:1", "command": ["python", "-c", HEALTHY_MODEL]},
    )
    uploaded = models.upload_model(parent=PARENT, model=model).result(timeout=30)
    endpoints = _clients(local_platform_state, "EndpointService")["rest"]
    endpoint = endpoints.create_endpoint(parent=PARENT, endpoint={"display_name": "echo"}).result(
        timeout=30
    )
    deployed = endpoints.deploy_model(
        endpoint=endpoint.name,
        deployed_model={
            "model": uploaded.model,
            "dedicated_resources": {
                "machine_spec": {"machine_type": "n1-standard-2"},
                "min_replica_count": 1,
            },
        },
        traffic_split={"0": 100},
    ).result(timeout=120)
    yield endpoint.name
    endpoints.undeploy_model(
        endpoint=endpoint.name, deployed_model_id=deployed.deployed_model.id
    ).result(timeout=60)
    endpoints.delete_endpoint(name=endpoint.name).result(timeout=30)


def test_a_prediction_answers_the_same_over_both_transports(
    local_platform_state: PlatformState, echo_endpoint: str
) -> None:
    """A hand-built PredictionServiceClient over each transport, the same instances."""
    request = {"endpoint": echo_endpoint, "instances": ["a", 8, {"k": [True, None]}]}
    answers = {
        t: _answer(t, c, "predict", request)
        for t, c in _clients(local_platform_state, "PredictionService").items()
    }
    assert answers["grpc"] == answers["rest"]
    kind, response = answers["grpc"]
    assert kind == "ok"
    assert response["predictions"] == ["a", 8, {"k": [True, None]}]
