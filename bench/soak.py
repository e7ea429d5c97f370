"""Soak: the local platform under many clients at once, with a hung model and half-sent requests.

A fresh local platform (`jobs.local`: the control plane and the GCS emulator, as `vtx local up`
starts them) in a temporary directory on free ports gets, for a bounded time:

- `clients` threads, each looping over a weighted mix (`MIX`) through the real clients: create
  a CustomJob whose one replica prints a marker line (`python -c`), get and list jobs (with the
  filters Vertex documents), read a job's logs (`/vtx/logs`, with the platform's token), upload
  (0 bytes to 256 KiB in one request; 512 KiB resumable, in three chunks), download and list
  objects with
  google-cloud-storage, predict against a healthy deployed model, and `/vtx/health`;
- a few of those threads (`hung_clients`) predict only against a second deployed model whose
  container answers its health route and never answers a prediction: each call gives up after
  `HUNG_TIMEOUT_S` at the client, and is counted apart from the routes;
- one socket on the control plane and one on the emulator holding a request whose headers
  never end, for the whole run (opened again if the server closes it; the report says when).

Every call is timed per route family; a call that fails counts with its time and its status.
At the end, nothing may be lost: every job a create answered for is listed and known (ended,
or still queued or running), every job that succeeded logged its marker, and every object an
upload answered for reads back byte-identical. The aim: every route's p99 under 2 s. Beside the
latencies: the CPU each server used, the size of the machine's socket table and the CPU cost of
the owner check the control plane makes for every request (reading that whole table cost a
large share of its CPU under this load before the check asked the kernel for the one
connection).

    python -m bench.soak [--seconds N] [--clients N] [--seed S]
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import logging
import math
import os
import random
import socket
import statistics
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from bench.common import REPO, Section, cpu_time_s, table
from jobs.core.states import is_final
from jobs.local.platform.settings import LocalSettings
from jobs.local.platform.state import LOCAL_PROJECT, LOCAL_REGION, PlatformState
from jobs.local.plumbing.client import LocalApiError, read_logs
from jobs.local.plumbing.client import health as health_check
from jobs.local.plumbing.guard import SOCKET_TABLE, socket_owner
from jobs.local.plumbing.ports import free_port
from jobs.local.plumbing.processes import start_fresh, stop_platform

# gcsfs reads this when imported: the emulator speaks JSON only (see tests/conftest.py).
os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")

PARENT = f"projects/{LOCAL_PROJECT}/locations/{LOCAL_REGION}"
RUN_ID = "soak"
BUCKET = "vtx-soak"
AIM_P99_S = 2.0
CALL_TIMEOUT_S = 30.0
"""A client's patience with one call of the mix: long enough that a slow answer is measured as
slow rather than cut short, short enough that a server that stopped answering shows as errors."""
HUNG_TIMEOUT_S = 5.0
END_WAIT_S = 60.0
"""How long the end checks wait for the jobs still queued or running to end."""
TABLE_SAMPLE_S = 2.0
MIX = {
    "jobs.create": 1,
    "jobs.get": 3,
    "jobs.list": 2,
    "logs": 2,
    "gcs.upload": 3,
    "gcs.upload.resumable": 1,
    "gcs.download": 3,
    "gcs.list": 1,
    "predict": 3,
    "health": 1,
}
"""Route family: weight in each mixed client's draw."""
NEEDS_JOB = ("jobs.get", "logs")
NEEDS_OBJECT = ("gcs.download",)
HUNG = "predict (hung model)"
SIZES = (0, 0, 1, 17, 1000, 4096, 65_536, 262_144 + 13)
RESUMABLE_SIZE = 2 * 256 * 1024 + 7  # three chunks
RESUMABLE_CHUNK = 256 * 1024  # google-cloud-storage's chunk unit

HEALTHY_MODEL = r"""
import json, os
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        self.send(200 if self.path == os.environ["AIP_HEALTH_ROUTE"] else 404, {})
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.send(200, {"predictions": body["instances"]})
    def send(self, code, payload):
        data = json.dumps(payload).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
    def log_message(self, *args):
        pass
ThreadingHTTPServer.daemon_threads = True
ThreadingHTTPServer(("127.0.0.1", int(os.environ["AIP_HTTP_PORT"])), Handler).serve_forever()
"""
"""Answers every prediction with its instances (a stdlib server: the cheapest model there is)."""
HUNG_MODEL = r"""
import os, threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()
    def do_POST(self):
        threading.Event().wait()  # accepts the prediction, never answers it
    def log_message(self, *args):
        pass
ThreadingHTTPServer.daemon_threads = True
ThreadingHTTPServer(("127.0.0.1", int(os.environ["AIP_HTTP_PORT"])), Handler).serve_forever()
"""
"""Healthy (so it deploys), and silent on every prediction: a model stuck in a long generation."""


class WrongAnswer(Exception):
    """A call succeeded with an answer other than the one the client knows is right."""


# -- what was measured ---------------------------------------------------------------------------


@dataclass
class Recorder:
    """Every call's seconds per route family, and how each failed call failed."""

    seconds: dict[str, list[float]] = field(default_factory=dict)
    failures: dict[str, Counter[str]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, route: str, seconds: float, failure: str | None) -> None:
        with self.lock:
            self.seconds.setdefault(route, []).append(seconds)
            counts = self.failures.setdefault(route, Counter())
            if failure is not None:
                counts[failure] += 1

    def timed(self, route: str, call: Callable[[], Any]) -> Any:
        """Run ``call``, record its time and outcome; None when it failed."""
        start = time.perf_counter()
        try:
            result = call()
        except Exception as exc:  # every failure is a figure of the report
            self.add(route, time.perf_counter() - start, failure_kind(exc))
            return None
        self.add(route, time.perf_counter() - start, None)
        return result


def failure_kind(exc: BaseException) -> str:
    """A short name for how a call failed: its HTTP status, or what the client saw."""
    import requests
    from google.api_core import exceptions as google_errors

    if isinstance(exc, WrongAnswer):
        return "wrong answer"
    if isinstance(exc, google_errors.GoogleAPICallError) and exc.code is not None:
        return f"HTTP {int(exc.code)}"
    if isinstance(exc, LocalApiError):
        return exc.status or ("timeout" if "timed out" in str(exc) else "unreachable")
    if isinstance(exc, requests.exceptions.Timeout | TimeoutError | socket.timeout):
        return "timeout"
    if isinstance(exc, requests.exceptions.ConnectionError | ConnectionError):
        return f"connection: {connection_failure(str(exc))}"
    return type(exc).__name__


CONNECTION_FAILURES = {
    "RemoteDisconnected": "closed by the server without an answer",
    "Connection reset": "reset",
    "Connection refused": "refused",
    "Connection aborted": "aborted",
}


def connection_failure(text: str) -> str:
    """What happened to a connection, from the error's text (urllib3 and requests wrap the
    socket's error in theirs)."""
    return next((why for key, why in CONNECTION_FAILURES.items() if key in text), "other")


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..1) of a non-empty list."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


@dataclass
class Ledger:
    """What the platform answered for, so the end can check that none of it was lost."""

    jobs: dict[str, str] = field(default_factory=dict)
    """Job resource name -> the marker its replica prints (its display name)."""
    objects: dict[str, tuple[int, str]] = field(default_factory=dict)
    """Object name -> (size, sha256) of what its upload sent."""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add_job(self, name: str, marker: str) -> None:
        with self.lock:
            self.jobs[name] = marker

    def add_object(self, name: str, data: bytes) -> None:
        with self.lock:
            self.objects[name] = (len(data), hashlib.sha256(data).hexdigest())

    def any_job(self, rng: random.Random) -> str:
        """A job created so far (there must be one)."""
        with self.lock:
            return rng.choice(list(self.jobs))

    def any_object(self, rng: random.Random) -> tuple[str, tuple[int, str]]:
        """An object written so far, and what it holds (there must be one)."""
        with self.lock:
            name = rng.choice(list(self.objects))
            return name, self.objects[name]


# -- the platform and its clients ----------------------------------------------------------------


@contextmanager
def fresh_platform() -> Iterator[PlatformState]:
    """A local platform of its own, as `vtx local up` starts it, in a temporary directory on
    free ports (a short grace: its replicas print a line and exit); stopped after, and any
    process it started that outlived it (a control plane that had to be killed leaves its
    serving processes, which run in sessions of their own) ended by its pid."""
    with tempfile.TemporaryDirectory(prefix="vtx-soak-") as tmp:
        settings = LocalSettings(
            data_dir=Path(tmp) / "platform",
            cwd=REPO,
            port=free_port(),
            gcs_port=free_port(),
            grace_s=2.0,
        )
        state = start_fresh(settings)
        try:
            yield state
        finally:
            started = psutil.Process(state.server_pid).children(recursive=True)
            stop_platform(settings.data_dir)
            for process in started:
                with contextlib.suppress(psutil.NoSuchProcess):
                    process.kill()


def job_client(endpoint: str) -> Any:
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import aiplatform_v1

    return aiplatform_v1.JobServiceClient(
        transport="rest",
        credentials=AnonymousCredentials(),
        client_options={"api_endpoint": endpoint},
    )


def prediction_client(endpoint: str) -> Any:
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import aiplatform_v1

    return aiplatform_v1.PredictionServiceClient(
        transport="rest",
        credentials=AnonymousCredentials(),
        client_options={"api_endpoint": endpoint},
    )


def gcs_bucket(gcs_endpoint: str) -> Any:
    """The soak's bucket through a google-cloud-storage client of its own (one per thread)."""
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    client = storage.Client(
        project=LOCAL_PROJECT,
        credentials=AnonymousCredentials(),
        client_options={"api_endpoint": gcs_endpoint},
    )
    return client.bucket(BUCKET)


@dataclass(frozen=True)
class Deployed:
    """(endpoint resource name, deployed model id) of each model."""

    healthy: tuple[str, str]
    hung: tuple[str, str]


def quiet_sdk() -> None:
    """No INFO lines from the SDK (each of its modules sets INFO on a logger of its own): the
    report is on stdout, and nothing else should be there."""
    for name, logger in logging.root.manager.loggerDict.items():
        if name.startswith("google.cloud.aiplatform") and isinstance(logger, logging.Logger):
            logger.setLevel(logging.WARNING)


def deploy_models(state: PlatformState) -> Deployed:
    """The two models, each on an endpoint of its own, through the Vertex SDK as a user would."""
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import aiplatform

    quiet_sdk()
    aiplatform.init(
        project=LOCAL_PROJECT,
        location=LOCAL_REGION,
        api_endpoint=state.vertex_endpoint,
        api_transport="rest",
        credentials=AnonymousCredentials(),
    )
    deployed = []
    for display, code in (("soak-healthy", HEALTHY_MODEL), ("soak-hung", HUNG_MODEL)):
        model = aiplatform.Model.upload(
            display_name=display,
            artifact_uri=f"gs://{BUCKET}/models/{display}/",
            serving_container_image_uri="us-docker.pkg.dev/acme/vtx/soak:1",
            serving_container_command=["python", "-c"],
            serving_container_args=[code],
        )
        endpoint = model.deploy(machine_type="n1-standard-4")
        deployed.append((endpoint.resource_name, endpoint.list_models()[0].id))
    return Deployed(healthy=deployed[0], hung=deployed[1])


def undeploy_all(state: PlatformState, deployed: Deployed) -> None:
    """Stop both models' processes before the platform stops, so that the calls its proxy still
    holds on the hung one end; each call bounded, for a control plane that stopped answering."""
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import aiplatform_v1

    endpoints = aiplatform_v1.EndpointServiceClient(
        transport="rest",
        credentials=AnonymousCredentials(),
        client_options={"api_endpoint": state.vertex_endpoint},
    )
    for endpoint, model_id in (deployed.hung, deployed.healthy):
        operation = endpoints.undeploy_model(
            endpoint=endpoint, deployed_model_id=model_id, timeout=CALL_TIMEOUT_S
        )
        operation.result(timeout=CALL_TIMEOUT_S)


def replica_pool(marker: str) -> dict[str, Any]:
    return {
        "machine_spec": {"machine_type": "n1-standard-4"},
        "replica_count": 1,
        "container_spec": {
            "image_uri": "local/soak:1",
            "command": ["python", "-c", f"print({marker!r})"],
        },
    }


# -- the clients ---------------------------------------------------------------------------------


class MixedClient:
    """One thread of the mix: its own clients (as separate users would have), its own draws."""

    def __init__(
        self,
        index: int,
        state: PlatformState,
        deployed: Deployed,
        recorder: Recorder,
        ledger: Ledger,
        seed: int,
    ) -> None:
        self.index, self.state, self.deployed = index, state, deployed
        self.recorder, self.ledger = recorder, ledger
        self.rng = random.Random(f"{seed}-{index}")
        self.jobs = job_client(state.vertex_endpoint)
        self.predictions = prediction_client(state.vertex_endpoint)
        self.bucket = gcs_bucket(state.gcs_endpoint)
        self.count = 0

    def run(self, stop: threading.Event) -> None:
        routes, weights = list(MIX), list(MIX.values())
        while not stop.is_set():
            route = self.rng.choices(routes, weights)[0]
            # What reads a job or an object writes one first while there is none to read.
            if route in NEEDS_JOB and not self.ledger.jobs:
                route = "jobs.create"
            if route in NEEDS_OBJECT and not self.ledger.objects:
                route = "gcs.upload"
            self.count += 1
            self.recorder.timed(route, getattr(self, route.replace(".", "_")))

    def jobs_create(self) -> None:
        from google.cloud import aiplatform_v1

        marker = f"soak-{self.index}-{self.count}"
        job = aiplatform_v1.CustomJob(
            display_name=marker,
            job_spec={"worker_pool_specs": [replica_pool(marker)]},
            labels={"vtx-run-id": RUN_ID, "soak-client": str(self.index)},
        )
        created = self.jobs.create_custom_job(parent=PARENT, custom_job=job, timeout=CALL_TIMEOUT_S)
        self.ledger.add_job(created.name, marker)

    def jobs_get(self) -> None:
        name = self.ledger.any_job(self.rng)
        if self.jobs.get_custom_job(name=name, timeout=CALL_TIMEOUT_S).name != name:
            raise WrongAnswer(f"get {name} answered another job")

    def jobs_list(self) -> None:
        filters = [
            f'labels.soak-client="{self.index}"',
            'state="JOB_STATE_SUCCEEDED"',
            f'display_name:"soak-{self.index}-*"',
            f'labels.vtx-run-id="{RUN_ID}" AND state!="JOB_STATE_FAILED"',
            "",
        ]
        request = {"parent": PARENT, "filter": self.rng.choice(filters), "page_size": 50}
        self.jobs.list_custom_jobs(request=request, timeout=CALL_TIMEOUT_S)  # one page

    def logs(self) -> None:
        name = self.ledger.any_job(self.rng)
        read_logs(self.state.vertex_endpoint, self.state.token, job=name)

    def _upload(self, size: int, chunk_size: int | None) -> None:
        data = self.rng.randbytes(size)
        name = f"soak/{self.index}/{self.count}-{size}"
        blob = self.bucket.blob(name, chunk_size=chunk_size)
        blob.upload_from_string(data, timeout=CALL_TIMEOUT_S, retry=None)
        self.ledger.add_object(name, data)

    def gcs_upload(self) -> None:
        self._upload(self.rng.choice(SIZES), None)

    def gcs_upload_resumable(self) -> None:
        self._upload(RESUMABLE_SIZE, RESUMABLE_CHUNK)

    def gcs_download(self) -> None:
        name, (size, digest) = self.ledger.any_object(self.rng)
        data = self.bucket.blob(name).download_as_bytes(timeout=CALL_TIMEOUT_S, retry=None)
        if len(data) != size or hashlib.sha256(data).hexdigest() != digest:
            raise WrongAnswer(f"{name}: {len(data)} bytes read, {size} written")

    def gcs_list(self) -> None:
        blobs = self.bucket.list_blobs(
            prefix=f"soak/{self.index}/", max_results=50, timeout=CALL_TIMEOUT_S, retry=None
        )
        list(blobs)

    def predict(self) -> None:
        from google.protobuf import json_format, struct_pb2

        instance = {"client": self.index, "call": self.count}
        answer = self.predictions.predict(
            endpoint=self.deployed.healthy[0],
            instances=[json_format.ParseDict(instance, struct_pb2.Value())],
            timeout=CALL_TIMEOUT_S,
        )
        got = json_format.MessageToDict(type(answer).pb(answer)).get("predictions")
        if got != [instance]:
            raise WrongAnswer(f"predicted {got} for {instance}")

    def health(self) -> None:
        health_check(self.state.vertex_endpoint)


def hung_client(
    state: PlatformState, deployed: Deployed, recorder: Recorder, stop: threading.Event
) -> None:
    """Predict against the model that never answers, giving up after HUNG_TIMEOUT_S each time."""
    from google.protobuf import struct_pb2

    predictions = prediction_client(state.vertex_endpoint)
    while not stop.is_set():
        recorder.timed(
            HUNG,
            lambda: predictions.predict(
                endpoint=deployed.hung[0],
                instances=[struct_pb2.Value(number_value=1)],
                timeout=HUNG_TIMEOUT_S,
            ),
        )


@dataclass
class HalfSent:
    """A connection holding a request whose headers never end, opened again whenever the server
    closes it; ``closed_after_s``: how long each one was held before the server closed it."""

    server: str
    port: int
    path: str
    closed_after_s: list[float] = field(default_factory=list)

    def run(self, stop: threading.Event) -> None:
        partial = f"GET {self.path} HTTP/1.1\r\nHost: 127.0.0.1:{self.port}\r\nX-Soak: ".encode()
        while not stop.is_set():
            with socket.create_connection(("127.0.0.1", self.port), timeout=5) as sock:
                sock.sendall(partial)
                opened = time.monotonic()
                sock.settimeout(0.5)
                while not stop.is_set():
                    try:
                        if sock.recv(4096) == b"":
                            break
                    except TimeoutError:
                        continue
                    except OSError:
                        break
                else:
                    return
                self.closed_after_s.append(time.monotonic() - opened)


# -- the end checks ------------------------------------------------------------------------------


@dataclass
class Losses:
    jobs_created: int = 0
    jobs_missing: list[str] = field(default_factory=list)
    job_states: Counter[str] = field(default_factory=Counter)
    markers_missing: list[str] = field(default_factory=list)
    objects_written: int = 0
    bytes_written: int = 0
    objects_missing: list[str] = field(default_factory=list)
    objects_corrupt: list[str] = field(default_factory=list)
    check_errors: list[str] = field(default_factory=list)

    @property
    def lost(self) -> int:
        return sum(
            len(x)
            for x in (
                self.jobs_missing,
                self.markers_missing,
                self.objects_missing,
                self.objects_corrupt,
            )
        )


def check_jobs(state: PlatformState, ledger: Ledger, losses: Losses) -> None:
    """Every job a create answered for is listed; wait a bounded time for the ones still queued
    or running, then every job that succeeded must have logged its marker."""
    jobs = job_client(state.vertex_endpoint)
    losses.jobs_created = len(ledger.jobs)
    deadline = time.monotonic() + END_WAIT_S
    while True:
        listed = {
            j.name: j
            for j in jobs.list_custom_jobs(
                request={"parent": PARENT, "filter": f'labels.vtx-run-id="{RUN_ID}"'},
                timeout=CALL_TIMEOUT_S,
            )
        }
        ended = all(is_final(listed[n].state) for n in ledger.jobs if n in listed)
        if ended or time.monotonic() > deadline:
            break
        time.sleep(1.0)
    losses.jobs_missing = sorted(n for n in ledger.jobs if n not in listed)
    for name in losses.jobs_missing:  # not listed: is it at least known?
        try:
            jobs.get_custom_job(name=name, timeout=CALL_TIMEOUT_S)
        except Exception as exc:  # the loss is reported, with how the get failed
            losses.check_errors.append(f"get {name}: {failure_kind(exc)}")
    losses.job_states = Counter(listed[n].state.name for n in ledger.jobs if n in listed)
    logged = logged_lines(state)
    losses.markers_missing = sorted(
        name
        for name, marker in ledger.jobs.items()
        if name in listed
        and listed[name].state.name == "JOB_STATE_SUCCEEDED"
        and marker not in logged.get(name, set())
    )


def logged_lines(state: PlatformState) -> dict[str, set[str]]:
    """Every line the run's jobs logged, by job name (all pages of `/vtx/logs?run_id=`)."""
    lines: dict[str, set[str]] = {}
    cursor = 0
    while True:
        page = read_logs(state.vertex_endpoint, state.token, run_id=RUN_ID, cursor=cursor)
        if not page["entries"]:
            return lines
        for entry in page["entries"]:
            lines.setdefault(entry["job"], set()).add(entry["message"].strip())
        cursor = page["cursor"]


def check_objects(state: PlatformState, ledger: Ledger, losses: Losses) -> None:
    """Every object an upload answered for is listed and reads back byte-identical."""
    bucket = gcs_bucket(state.gcs_endpoint)
    losses.objects_written = len(ledger.objects)
    losses.bytes_written = sum(size for size, _ in ledger.objects.values())
    listed = {b.name for b in bucket.list_blobs(prefix="soak/", timeout=CALL_TIMEOUT_S)}
    for name, (size, digest) in sorted(ledger.objects.items()):
        if name not in listed:
            losses.objects_missing.append(name)
            continue
        data = bucket.blob(name).download_as_bytes(timeout=CALL_TIMEOUT_S)
        if len(data) != size or hashlib.sha256(data).hexdigest() != digest:
            losses.objects_corrupt.append(name)


# -- the run -------------------------------------------------------------------------------------


@dataclass
class Usage:
    """CPU seconds each side used during the run, the socket table's size and the cost of the
    owner check the control plane makes for every request (jobs/local/plumbing/guard.py:
    whose program the connection is)."""

    control_plane_cpu_s: float = 0.0
    gcs_cpu_s: float = 0.0
    clients_cpu_s: float = 0.0
    table_lines: list[int] = field(default_factory=list)
    table_time_wait: list[int] = field(default_factory=list)
    check_cpu_ms: list[float] = field(default_factory=list)

    def sample_table(self, stop: threading.Event) -> None:
        """Every few seconds: how many connections the table lists, and the owner check's CPU
        cost (asked of a connection that does not exist: the same lookup, the same answer
        path as a refusal's)."""
        while not stop.wait(TABLE_SAMPLE_S):
            try:
                rows = SOCKET_TABLE.read_text().splitlines()[1:]
            except OSError:  # no such table (not Linux): the platform has no check either
                return
            start = time.thread_time()
            socket_owner(1, 2)
            self.check_cpu_ms.append((time.thread_time() - start) * 1000)
            self.table_lines.append(len(rows))
            # The 4th field is the connection's state; 06 is TIME_WAIT (closed, kept a while).
            self.table_time_wait.append(sum(row.split()[3] == "06" for row in rows))


def process_cpu_s(pid: int | None) -> float:
    if pid is None:
        return 0.0
    times = psutil.Process(pid).cpu_times()
    return times.user + times.system


@dataclass
class Outcome:
    seconds: float
    clients: int
    hung_clients: int
    recorder: Recorder
    losses: Losses
    half_sent: list[HalfSent]
    usage: Usage

    @property
    def control_plane_calls_per_s(self) -> float:
        routes = [r for r in self.recorder.seconds if r != HUNG and not r.startswith("gcs.")]
        return sum(len(self.recorder.seconds[r]) for r in routes) / self.seconds

    @property
    def calls_per_s(self) -> float:
        calls = sum(len(v) for r, v in self.recorder.seconds.items() if r != HUNG)
        return calls / self.seconds


def drive(state: PlatformState, clients: int, seconds: float, seed: int, outcome: Outcome) -> None:
    """Run the clients, the hung model's clients, the half-sent requests and the sampler for
    ``seconds``; record into ``outcome``."""
    deployed = deploy_models(state)
    ledger = Ledger()
    mixed = [
        MixedClient(i, state, deployed, outcome.recorder, ledger, seed)
        for i in range(clients - outcome.hung_clients)
    ]
    stop = threading.Event()
    hung_args = (state, deployed, outcome.recorder, stop)
    targets: list[tuple[Callable[..., None], tuple[Any, ...]]] = [
        *((h.run, (stop,)) for h in outcome.half_sent),
        *((c.run, (stop,)) for c in mixed),
        *((hung_client, hung_args) for _ in range(outcome.hung_clients)),
        (outcome.usage.sample_table, (stop,)),
    ]
    threads = [threading.Thread(target=t, args=a, daemon=True) for t, a in targets]
    cpu = [process_cpu_s(state.server_pid), process_cpu_s(state.gcs_pid), cpu_time_s()]
    try:
        for thread in threads:
            thread.start()
        started = time.monotonic()
        stop.wait(seconds)
        outcome.seconds = time.monotonic() - started
    finally:
        stop.set()
        # Every call gives up after CALL_TIMEOUT_S: a thread not back by then is left (a
        # daemon), and its call counts only if it returns before the report.
        deadline = time.monotonic() + CALL_TIMEOUT_S + 5
        for thread in threads:
            thread.join(timeout=max(0.0, deadline - time.monotonic()))
    usage = outcome.usage
    usage.control_plane_cpu_s = process_cpu_s(state.server_pid) - cpu[0]
    usage.gcs_cpu_s = process_cpu_s(state.gcs_pid) - cpu[1]
    usage.clients_cpu_s = cpu_time_s() - cpu[2]
    for check in (check_jobs, check_objects):
        try:
            check(state, ledger, outcome.losses)
        except Exception as exc:  # a platform that stopped answering is the finding
            problem = f"{check.__name__}: {failure_kind(exc)}: {exc}"
            outcome.losses.check_errors.append(problem[:300])
    try:
        undeploy_all(state, deployed)
    except Exception as exc:  # stop_platform stops the serving processes anyway
        outcome.losses.check_errors.append(f"undeploy: {failure_kind(exc)}")


def soak(seconds: float, clients: int, seed: int) -> Outcome:
    """Start a platform, run the clients for ``seconds``, check for losses, stop it."""
    with fresh_platform() as state:
        gcs_bucket(state.gcs_endpoint).client.create_bucket(BUCKET)
        outcome = Outcome(
            seconds=seconds,
            clients=clients,
            hung_clients=max(1, clients // 8),
            recorder=Recorder(),
            losses=Losses(),
            half_sent=[
                HalfSent("control plane", state.vertex_port, "/vtx/health"),
                HalfSent("GCS emulator", state.gcs_port, f"/storage/v1/b?project={LOCAL_PROJECT}"),
            ],
            usage=Usage(),
        )
        drive(state, clients, seconds, seed, outcome)
    return outcome


# -- the report ----------------------------------------------------------------------------------


def route_rows(recorder: Recorder) -> tuple[list[list[str]], list[str]]:
    """A table row per route family (the mix's order, the hung model last), and the routes
    whose p99 missed the aim."""
    rows, missed = [], []
    for route in [*MIX, HUNG]:
        values = recorder.seconds.get(route, [])
        if not values:
            continue
        p99 = percentile(values, 0.99)
        failures = recorder.failures.get(route, Counter())
        failed = ", ".join(f"{kind} x{n}" for kind, n in failures.most_common()) or "none"
        if route == HUNG:
            verdict = "(apart)"
        elif p99 < AIM_P99_S:
            verdict = "met"
        else:
            verdict, missed = "**NOT met**", [*missed, route]
        rows.append(
            [
                f"`{route}`",
                str(len(values)),
                failed,
                *(f"{percentile(values, q) * 1000:.0f}" for q in (0.5, 0.95, 0.99)),
                f"{max(values) * 1000:.0f}",
                verdict,
            ]
        )
    return rows, missed


def half_sent_text(half_sent: list[HalfSent], seconds: float) -> str:
    parts = []
    for held in half_sent:
        if not held.closed_after_s:
            parts.append(f"the {held.server} kept its half-sent request open all {seconds:.0f} s")
        else:
            closes = ", ".join(f"{s:.0f} s" for s in held.closed_after_s[:5])
            parts.append(
                f"the {held.server} closed its half-sent request {len(held.closed_after_s)} "
                f"time(s), after {closes} (each time it was opened again)"
            )
    return "; ".join(parts)


def losses_text(losses: Losses) -> str:
    states = ", ".join(f"{s.removeprefix('JOB_STATE_')} {n}" for s, n in losses.job_states.items())
    if losses.lost:
        verdict = "NO"
    elif losses.check_errors:
        verdict = "not shown (the end checks could not finish)"
    else:
        verdict = "yes"
    text = (
        f"Nothing lost: **{verdict}**. "
        f"Jobs created: {losses.jobs_created}, not listed at the end: "
        f"{len(losses.jobs_missing)}; their states at the end: {states or 'none'}; succeeded "
        f"jobs whose marker line is missing from their logs: {len(losses.markers_missing)}. "
        f"Objects written: {losses.objects_written} ({losses.bytes_written / 1e6:.1f} MB), not "
        f"listed: {len(losses.objects_missing)}, read back different: "
        f"{len(losses.objects_corrupt)}."
    )
    if losses.check_errors:
        text += " The end checks could not finish: " + "; ".join(losses.check_errors[:5]) + "."
    return text


def meaning(outcome: Outcome, missed: list[str]) -> str:
    hung = outcome.recorder.seconds.get(HUNG, [])
    if missed:
        verdict = (
            f"the aim (every route's p99 under {AIM_P99_S:g} s) was missed by "
            + ", ".join(f"`{r}`" for r in missed)
            + "."
        )
    else:
        verdict = f"every route's p99 stayed under {AIM_P99_S:g} s."
    return (
        f"What it means: with {outcome.clients} clients at once on this machine, among them "
        f"{outcome.hung_clients} waiting on a model that never answers ({len(hung)} predictions "
        f"given up after {HUNG_TIMEOUT_S:g} s each) and a half-sent request on each server, "
        f"{verdict} The platform answered {outcome.calls_per_s:.0f} calls/s in all; the clients, "
        "both servers, the replicas of the jobs and the two models share the machine's cores, "
        "so the figures are those of a laptop doing everything at once, not of the servers "
        "alone."
    )


def usage_text(outcome: Outcome) -> str:
    usage, seconds = outcome.usage, outcome.seconds
    text = (
        f"CPU over the run, in cores busy on average: control plane "
        f"{usage.control_plane_cpu_s / seconds:.2f}, GCS emulator {usage.gcs_cpu_s / seconds:.2f}, "
        f"the clients (this process) {usage.clients_cpu_s / seconds:.2f}; the jobs' replicas and "
        f"the two models had the rest of the machine's {os.cpu_count()} cores."
    )
    if usage.table_lines:
        lines = statistics.median(usage.table_lines)
        check_ms = statistics.median(usage.check_cpu_ms)
        waiting = statistics.median(usage.table_time_wait)
        share = check_ms / 1000 * outcome.control_plane_calls_per_s
        text += (
            " The machine's socket table listed a median "
            f"{lines:.0f} connections ({waiting:.0f} of them closed ones in TIME_WAIT); the "
            "check of whose program a connection is, made for every request "
            "(jobs/local/plumbing/guard.py: the kernel asked for that one connection), cost "
            f"{check_ms:.3f} ms of CPU, so at the control plane's "
            f"{outcome.control_plane_calls_per_s:.0f} calls/s about {share:.3f} of a core went "
            "to it."
        )
    return text


def render(outcome: Outcome, command: str) -> Section:
    rows, missed = route_rows(outcome.recorder)
    mixed = outcome.clients - outcome.hung_clients
    body = "\n\n".join(
        [
            f"{outcome.seconds:.0f} s on 127.0.0.1: {mixed} clients drawing from the mix "
            f"(weights: {', '.join(f'{r} {w}' for r, w in MIX.items())}) and "
            f"{outcome.hung_clients} predicting against a model that never answers "
            f"(each call given up after {HUNG_TIMEOUT_S:g} s at the client); "
            f"{half_sent_text(outcome.half_sent, outcome.seconds)}. Milliseconds per call, "
            "failed calls included (with their time); a failure is named by its HTTP status or "
            "what the client saw.",
            table(
                ["route", "calls", "failures", "p50 ms", "p95 ms", "p99 ms", "max ms", "p99 < 2 s"],
                rows,
            ),
            losses_text(outcome.losses),
            usage_text(outcome),
            meaning(outcome, missed),
        ]
    )
    raw = {
        "seconds": {k: list(v) for k, v in outcome.recorder.seconds.items()},
        "failures": {k: dict(v) for k, v in outcome.recorder.failures.items()},
        "missed": missed,
        "lost": outcome.losses.lost,
        "losses": outcome.losses,
        "half_sent_closed_after_s": {h.server: h.closed_after_s for h in outcome.half_sent},
        "usage": outcome.usage,
    }
    return Section("Soak: the local platform under many clients", command, body, raw=raw)


def run(seconds: float = 120.0, clients: int = 16, seed: int = 0) -> Section:
    if clients < 2:
        raise ValueError(
            f"--clients {clients}: at least 2 (one of them predicts on the hung model)"
        )
    outcome = soak(seconds, clients, seed)
    command = f"python -m bench.soak --seconds {seconds:g} --clients {clients} --seed {seed}"
    return render(outcome, command)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=120.0)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    section = run(args.seconds, args.clients, args.seed)
    print(section.markdown())
    print(json.dumps({"lost": section.raw["lost"], "missed": section.raw["missed"]}))


if __name__ == "__main__":
    main()
