"""The control plane under a careless or hostile local client: deletes and cancels that race,
predictions a model never answers, an undeploy of a container that ignores SIGTERM, a list
filter built to backtrack, creates that wait for the executor. Each test checks the server's
answers and that other routes keep answering (generous client timeouts, never a timing
assertion), on a platform of this module's own: a stalled server must not stall the others."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from jobs.core.stack import StackOutputs
from jobs.local.custom_jobs.executor import Executor
from jobs.local.custom_jobs.pipelines import Pipelines
from jobs.local.platform.settings import LocalSettings
from jobs.local.platform.state import LOCAL_PROJECT_NUMBER, stack_outputs_for
from jobs.local.platform.store import Store
from jobs.local.plumbing.ports import free_port
from jobs.local.plumbing.processes import start_fresh, stop_platform
from jobs.local.tuning.studies import Studies
from tests.conftest import REPO
from tests.jobs.local.local_helpers import PARENT, wait_for

ANSWERS_WITHIN_S = 10.0
"""A client's patience for a route that must keep answering: generous, never asserted on."""
GRACE_S = 8.0
"""The module's SIGTERM-to-SIGKILL grace: what an undeploy of a container that ignores SIGTERM
waits for. Long enough for the other routes to answer within it on a busy machine: their answer
must come while the undeploy's operation is still pending."""

HANGS = r"""
import os, signal, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a container that never handles SIGTERM
class Handler(BaseHTTPRequestHandler):
    def do_GET(self):  # healthy
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")
    def do_POST(self):  # never answers a prediction
        time.sleep(3600)
    def log_message(self, *args):
        pass
ThreadingHTTPServer(("127.0.0.1", int(os.environ["AIP_HTTP_PORT"])), Handler).serve_forever()
"""


def ended_job(name: str) -> dict[str, Any]:
    return {
        "displayName": name,
        "jobSpec": {
            "workerPoolSpecs": [
                {
                    "machineSpec": {"machineType": "n1-standard-4"},
                    "replicaCount": "1",
                    "containerSpec": {"imageUri": "local/t:1", "command": ["python", "-c", ""]},
                }
            ]
        },
    }


@pytest.fixture(scope="module")
def platform(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StackOutputs]:
    settings = LocalSettings(
        data_dir=tmp_path_factory.mktemp("vtx-local-races"),
        cwd=REPO,
        port=free_port(),
        gcs_port=free_port(),
        grace_s=GRACE_S,
        max_replicas=8,
    )
    state = start_fresh(settings)
    try:
        yield stack_outputs_for(state)
    finally:
        stop_platform(settings.data_dir)


@pytest.fixture
def http(platform: StackOutputs) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=f"{platform.vertex_endpoint}/v1", timeout=60.0) as client:
        yield client


def answers(platform: StackOutputs) -> bool:
    """Whether health and a list of jobs both answer 200 within ANSWERS_WITHIN_S."""
    base = platform.vertex_endpoint
    with httpx.Client(timeout=ANSWERS_WITHIN_S) as client:
        health = client.get(f"{base}/vtx/health")
        listed = client.get(f"{base}/v1/{PARENT}/customJobs", params={"pageSize": 1})
    return health.status_code == 200 and listed.status_code == 200


def wait_job(http: httpx.Client, name: str) -> dict:
    final = ("JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED")
    return wait_for(lambda: (job := http.get(name).json())["state"] in final and job)


def in_parallel(calls: int, call: Any) -> list[httpx.Response]:
    with ThreadPoolExecutor(max_workers=calls) as pool:
        return list(pool.map(lambda _: call(), range(calls)))


# -- deletes and cancels that race ---------------------------------------------------------------


def test_racing_deletes_and_cancels_of_a_job_get_one_success_and_vertexs_answers(
    platform: StackOutputs, http: httpx.Client
) -> None:
    """200 concurrent DELETEs of one ended job used to give 500s (a KeyError between the
    route's check and the executor's delete)."""
    name = http.post(f"{PARENT}/customJobs", json=ended_job("raced")).json()["name"]
    wait_job(http, name)
    with httpx.Client(base_url=f"{platform.vertex_endpoint}/v1", timeout=60.0) as client:

        def delete_or_cancel(i: int) -> tuple[str, int, str]:
            if i % 4 == 3:
                answer = client.post(f"{name}:cancel")
                return "cancel", answer.status_code, answer.json().get("error", {}).get("status")
            answer = client.delete(name)
            return "delete", answer.status_code, answer.json().get("error", {}).get("status")

        with ThreadPoolExecutor(max_workers=40) as pool:
            results = list(pool.map(delete_or_cancel, range(120)))
    deletes = [(code, status) for kind, code, status in results if kind == "delete"]
    cancels = {(code, status) for kind, code, status in results if kind == "cancel"}
    assert deletes.count((200, None)) == 1
    assert set(deletes) == {(200, None), (404, "NOT_FOUND")}
    assert cancels <= {(400, "FAILED_PRECONDITION"), (404, "NOT_FOUND")}
    assert http.get(name).status_code == 404


def test_a_second_delete_and_a_cancel_of_what_a_race_removed_find_nothing(tmp_path: Path) -> None:
    """What the routes are answered from, after the check they made passed and another
    request removed the resource: nothing to delete (404), no state to cancel (404)."""
    store = Store(tmp_path / "jobs.sqlite")
    settings = LocalSettings(data_dir=tmp_path, cwd=tmp_path, gcs_port=1, grace_s=1.0)
    executor = Executor(store, settings)
    name = f"projects/{LOCAL_PROJECT_NUMBER}/locations/us-central1/customJobs/7"
    executor.submit({**ended_job("seven"), "name": name})
    executor.cancel("7")  # QUEUED: cancelled at once, so it ended
    assert executor.delete("7") is True
    assert executor.delete("7") is False
    assert executor.cancel("7") is None
    studies, pipelines = Studies(store, executor, settings), Pipelines(store, executor)
    assert studies.delete("8") is False and studies.cancel("8") is None
    assert pipelines.delete("9") is False and pipelines.cancel("9") is None


def test_a_created_studys_answer_is_a_copy_its_service_does_not_change(tmp_path: Path) -> None:
    """The create's answer is rendered outside the studies' lock: it must not be the live
    study a tick or a cancel changes meanwhile."""
    store = Store(tmp_path / "jobs.sqlite")
    settings = LocalSettings(data_dir=tmp_path, cwd=tmp_path, gcs_port=1, grace_s=1.0)
    studies = Studies(store, Executor(store, settings), settings)
    name = f"projects/{LOCAL_PROJECT_NUMBER}/locations/us-central1/hyperparameterTuningJobs/8"
    answer = studies.create({"name": name, "displayName": "eight"})
    assert answer["state"] == "JOB_STATE_QUEUED"
    studies.cancel("8")
    assert answer["state"] == "JOB_STATE_QUEUED"


# -- predictions a model never answers, and its undeploy ---------------------------------------


@pytest.fixture(scope="module")
def hung_endpoint(platform: StackOutputs) -> Iterator[tuple[str, str]]:
    """An endpoint (inference timeout 2 s) serving a model that never answers a prediction and
    ignores SIGTERM; (endpoint name, deployed model id)."""
    with httpx.Client(base_url=f"{platform.vertex_endpoint}/v1", timeout=60.0) as client:
        upload = client.post(
            f"{PARENT}/models:upload",
            json={
                "model": {
                    "displayName": "hangs",
                    "containerSpec": {
                        "imageUri": "us-docker.pkg.dev/acme/vtx/hangs:1",
                        "command": ["python", "-c", HANGS],
                    },
                }
            },
        ).json()
        model = wait_for(lambda: client.get(upload["name"]).json().get("response"))["model"]
        created = client.post(
            f"{PARENT}/endpoints",
            json={"displayName": "hangs", "clientConnectionConfig": {"inferenceTimeout": "2s"}},
        ).json()
        endpoint = created["name"].split("/operations/")[0]
        dedicated = {"machineSpec": {"machineType": "n1-standard-4"}, "minReplicaCount": 1}
        deploy = client.post(
            f"{endpoint}:deployModel",
            json={
                "deployedModel": {"model": model, "dedicatedResources": dedicated},
                "trafficSplit": {"0": 100},
            },
        ).json()
        done = wait_for(lambda: (op := client.get(deploy["name"]).json()).get("done") and op)
        yield endpoint, done["response"]["deployedModel"]["id"]


def test_predictions_a_model_never_answers_leave_every_other_route_answering(
    platform: StackOutputs, hung_endpoint: tuple[str, str]
) -> None:
    """45 predictions used to hold every worker thread: health and lists timed out, and stayed
    stuck after their clients left."""
    endpoint, _ = hung_endpoint
    url = f"{platform.vertex_endpoint}/v1/{endpoint}:predict"

    # One client, a connection each: 45 clients of their own cost 2 CPU-seconds of TLS set-up
    # (httpx builds an SSL context per client, even for http) and the server sees the same.
    with httpx.Client(timeout=3.0, limits=httpx.Limits(max_connections=45)) as client:

        def impatient() -> str:
            with contextlib.suppress(httpx.TimeoutException):
                client.post(url, json={"instances": [1]})
            return "left"

        assert in_parallel(45, impatient) == ["left"] * 45
    assert answers(platform)  # while those 45 still wait for the model


def test_a_prediction_past_the_inference_timeout_is_deadline_exceeded(
    platform: StackOutputs, http: httpx.Client, hung_endpoint: tuple[str, str]
) -> None:
    endpoint, deployed_id = hung_endpoint
    answer = http.post(f"{endpoint}:predict", json={"instances": [1]})
    assert answer.status_code == 504
    error = answer.json()["error"]
    assert error["status"] == "DEADLINE_EXCEEDED" and error["code"] == 504
    assert deployed_id in error["message"] and "within 2 s" in error["message"]


def test_undeploying_a_model_that_ignores_sigterm_answers_at_once(
    platform: StackOutputs, http: httpx.Client, hung_endpoint: tuple[str, str]
) -> None:
    """The undeploy used to stop the process on the event loop: every request froze for the
    grace period. Now its operation is answered at once and is done once the process is gone."""
    endpoint, deployed_id = hung_endpoint
    answered: dict[str, Any] = {}

    def undeploy() -> None:
        undeployed = http.post(f"{endpoint}:undeployModel", json={"deployedModelId": deployed_id})
        answered["operation"] = undeployed.json()

    thread = threading.Thread(target=undeploy)
    thread.start()
    assert answers(platform)
    thread.join(timeout=ANSWERS_WITHIN_S)
    operation = answered["operation"]
    # The container ignores SIGTERM: it is only gone once the grace ends with a SIGKILL. Still
    # pending once the other routes answered: they did not wait for the stop.
    assert not operation.get("done") and operation["name"].startswith(endpoint + "/operations/")
    assert not http.get(operation["name"]).json().get("done")
    again = http.post(f"{endpoint}:undeployModel", json={"deployedModelId": deployed_id})
    assert again.status_code == 404  # it left the endpoint at once: a second undeploy races none
    assert "deployedModels" not in http.get(endpoint).json()
    done = wait_for(lambda: (op := http.get(operation["name"]).json()).get("done") and op)
    assert done["response"]["@type"].endswith("UndeployModelResponse")
    assert http.delete(endpoint).status_code == 200


# -- a filter built to backtrack -----------------------------------------------------------------


def test_a_filter_of_many_wildcards_does_not_stall_the_server(
    platform: StackOutputs, http: httpx.Client
) -> None:
    """A dozen `*` in a `:` match used to backtrack for seconds with the interpreter held:
    health checks stalled meanwhile."""
    long_name = "a" * 120
    wait_job(http, http.post(f"{PARENT}/customJobs", json=ended_job(long_name)).json()["name"])
    hostile = 'display_name:"' + "*a" * 12 + '*b"'
    listed: dict[str, int] = {}

    def list_hostile() -> None:
        with contextlib.suppress(httpx.TimeoutException):
            answer = httpx.get(
                f"{platform.vertex_endpoint}/v1/{PARENT}/customJobs",
                params={"filter": hostile},
                timeout=ANSWERS_WITHIN_S,
            )
            listed["jobs"] = len(answer.json().get("customJobs", []))

    thread = threading.Thread(target=list_hostile)
    thread.start()
    assert answers(platform)
    thread.join(timeout=ANSWERS_WITHIN_S)
    assert listed == {"jobs": 0}
    matching = http.get(f"{PARENT}/customJobs", params={"filter": 'display_name:"*a*a*a"'})
    assert long_name in [j["displayName"] for j in matching.json()["customJobs"]]


# -- creates that wait for the executor ----------------------------------------------------------


class InProcess:
    """The control plane's app under uvicorn in a thread of this process, so that a test can
    hold its executor's lock as a long tick would."""

    def __init__(self, settings: LocalSettings) -> None:
        import uvicorn

        from jobs.local.api.server import create_app

        self.app = create_app(settings, token="t" * 32)
        config = uvicorn.Config(self.app, host="127.0.0.1", port=settings.port, log_config=None)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.base = settings.vertex_endpoint

    def __enter__(self) -> InProcess:
        self.thread.start()
        wait_for(lambda: self.server.started)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)


def test_creates_waiting_for_the_executor_do_not_stop_other_requests(tmp_path: Path) -> None:
    """A create used to wait for the executor's lock on the event loop: while a tick held it,
    no other request was answered, and fifty creates queued behind each other's waits."""
    settings = LocalSettings(
        data_dir=tmp_path, cwd=REPO, port=free_port(), gcs_port=free_port(), grace_s=1.0
    )
    # One client, a connection per request (see the predictions test: a client each costs TLS
    # set-up the server never sees).
    shared = httpx.Client(timeout=60.0, limits=httpx.Limits(max_connections=50))
    with InProcess(settings) as server, shared, ThreadPoolExecutor(max_workers=50) as pool:
        url = f"{server.base}/v1/{PARENT}/customJobs"
        executor: Executor = server.app.state.executor
        with executor._lock:  # a tick that takes its time
            waiting = [pool.submit(shared.post, url, json=ended_job(f"c{i}")) for i in range(8)]
            time.sleep(0.5)  # let them reach the lock (not asserted on: they may not)
            listed = shared.get(url, timeout=ANSWERS_WITHIN_S)
            assert listed.status_code == 200
        assert [f.result().status_code for f in waiting] == [200] * 8
        fifty = [pool.submit(shared.post, url, json=ended_job(f"d{i}")) for i in range(50)]
        assert [f.result().status_code for f in fifty] == [200] * 50


# -- uploads that race -------------------------------------------------------------------------


def test_concurrent_uploads_of_versions_keep_every_version(
    platform: StackOutputs, http: httpx.Client
) -> None:
    """20 concurrent version uploads to one model used to leave 12 versions, each answered
    200: two uploads took the same next version number and the second overwrote the first."""
    body = {"model": {"displayName": "raced-versions"}}
    first = http.post(f"{PARENT}/models:upload", json=body).json()
    model = first["name"].split("/operations/")[0]
    with httpx.Client(base_url=f"{platform.vertex_endpoint}/v1", timeout=60.0) as client:
        answers_ = in_parallel(
            20, lambda: client.post(f"{PARENT}/models:upload", json={**body, "parentModel": model})
        )
    assert [a.status_code for a in answers_] == [200] * 20
    listed = http.get(f"{model}:listVersions", params={"pageSize": 100}).json()["models"]
    assert sorted(int(v["versionId"]) for v in listed) == list(range(1, 22))


def test_concurrent_uploads_of_one_model_id_make_one_model_and_409s(http: httpx.Client) -> None:
    """10 concurrent uploads with one modelId used to answer 200 twice (or more): both found
    the id free before either stored it."""
    body = {"modelId": "raced-id", "model": {"displayName": "raced-id"}}
    answers_ = in_parallel(10, lambda: http.post(f"{PARENT}/models:upload", json=body))
    codes = sorted(a.status_code for a in answers_)
    assert codes == [200] + [409] * 9
    refused = [a.json()["error"] for a in answers_ if a.status_code == 409]
    assert {e["status"] for e in refused} == {"ALREADY_EXISTS"}
    versions = http.get(f"{PARENT}/models/raced-id:listVersions").json()["models"]
    assert [v["versionId"] for v in versions] == ["1"]
