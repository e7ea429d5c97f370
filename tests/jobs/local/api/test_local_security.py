"""The local platform serves local, non-browser clients only, and answers bad requests cleanly.

Each request is sent raw (http.client, every header as written) the way an attacker's page or
a careless script would send it; the real SDKs' own traffic is covered by the other tests of
this package, which keep passing through the same guards.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import stat
import subprocess
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import pytest

from jobs.core.stack import StackOutputs
from jobs.local.custom_jobs.executor import Executor, ExecutorError
from jobs.local.custom_jobs.lifecycle import JobState
from jobs.local.platform.settings import LocalSettings
from jobs.local.platform.state import LOCAL_PROJECT_NUMBER, PlatformState
from jobs.local.platform.store import Store
from jobs.local.plumbing.guard import (
    MAX_BODY_BYTES,
    SOCKET_TABLE,
    _sock_diag_owner,
    _table_owner,
    socket_owner,
)
from jobs.local.plumbing.ports import port_free
from tests.conftest import HANG_S
from tests.jobs.local.local_helpers import (
    PARENT,
    client,
    custom_job,
    pool,
    wait_for,
    wait_terminal,
)

JOBS_PATH = f"/v1/{PARENT}/customJobs"


def raw(
    endpoint: str,
    method: str,
    path: str,
    body: bytes = b"",
    headers: dict[str, str] | None = None,
) -> tuple[int, dict[str, Any] | None]:
    """One request with exactly these headers (Host too, when given); status and JSON body."""
    parts = urlsplit(endpoint)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=HANG_S)
    headers = dict(headers or {})
    conn.putrequest(method, path, skip_host="Host" in headers, skip_accept_encoding=True)
    if body:
        headers.setdefault("Content-Length", str(len(body)))
    for name, value in headers.items():
        conn.putheader(name, value)
    conn.endheaders(body or None)
    response = conn.getresponse()
    data = response.read()
    conn.close()
    try:
        return response.status, json.loads(data)
    except ValueError:
        return response.status, None


def host_of(endpoint: str) -> str:
    return urlsplit(endpoint).netloc


def job_body(job_spec: dict[str, Any] | None = None, **pool_fields: Any) -> bytes:
    spec = {
        "machineSpec": {"machineType": "n1-standard-4"},
        "replicaCount": "1",
        "containerSpec": {"imageUri": "local/test:1", "command": ["python", "-c", "pass"]},
    } | pool_fields
    body = {"displayName": "x", "jobSpec": {"workerPoolSpecs": [spec], **(job_spec or {})}}
    return json.dumps(body).encode()


COMMAND = ["python", "-c", "pass"]


def assert_google_error(answer: dict[str, Any] | None, code: int) -> str:
    assert answer is not None, "not a JSON error body"
    assert answer["error"]["code"] == code
    assert answer["error"]["status"]
    return answer["error"]["message"]


def jobs_named(platform: StackOutputs, name: str) -> list[Any]:
    listed = client(platform.vertex_endpoint).list_custom_jobs(parent=PARENT)
    return [j for j in listed if j.display_name == name]


# -- who may call the control plane -------------------------------------------------------------


@pytest.mark.parametrize(
    "headers",
    [
        # A web page's form or no-cors fetch: no preflight for text/plain.
        {"Content-Type": "text/plain", "Origin": "https://evil.example"},
        # DNS rebinding: the page's own host name, now resolving to 127.0.0.1.
        {"Content-Type": "application/json", "Host": "evil.example:{port}"},
        {"Content-Type": "application/json", "Host": "evil.example"},
        # A page on another local port: same host, browser markers.
        {"Content-Type": "application/json", "Origin": "http://127.0.0.1:3000"},
        {"Content-Type": "application/json", "Sec-Fetch-Site": "cross-site"},
    ],
)
def test_browser_and_rebinding_requests_cannot_create_jobs(
    local_platform: StackOutputs, headers: dict[str, str]
) -> None:
    port = str(urlsplit(local_platform.vertex_endpoint).port)
    headers = {k: v.replace("{port}", port) for k, v in headers.items()}
    name = f"drive-by-{time.monotonic_ns()}"
    body = job_body().replace(b'"x"', json.dumps(name).encode())
    status, answer = raw(local_platform.vertex_endpoint, "POST", JOBS_PATH, body, headers)
    assert status == 403
    assert_google_error(answer, 403)
    assert jobs_named(local_platform, name) == []


def test_bodies_must_be_json_and_small(local_platform: StackOutputs) -> None:
    endpoint = local_platform.vertex_endpoint
    status, answer = raw(endpoint, "POST", JOBS_PATH, job_body(), {"Content-Type": "text/plain"})
    assert (status, assert_google_error(answer, 415)[:30]) == (
        415,
        "request bodies must be Content",
    )
    big = b"{" + b" " * (MAX_BODY_BYTES + 1) + b"}"
    status, answer = raw(endpoint, "POST", JOBS_PATH, big, {"Content-Type": "application/json"})
    assert status == 413
    assert "over the limit" in assert_google_error(answer, 413)


def test_vtx_endpoints_want_the_platform_token(local_platform: StackOutputs) -> None:
    endpoint = local_platform.vertex_endpoint
    status, answer = raw(endpoint, "GET", "/vtx/logs?run_id=x")
    assert status == 401
    assert "token" in assert_google_error(answer, 401)
    wrong = {"Authorization": "Bearer not-the-token"}
    assert raw(endpoint, "GET", "/vtx/logs?run_id=x", headers=wrong)[0] == 401
    right = {"Authorization": f"Bearer {local_platform.local_token}"}
    assert raw(endpoint, "GET", "/vtx/logs?run_id=x", headers=right)[0] == 200
    assert raw(endpoint, "GET", "/vtx/health")[0] == 200  # liveness needs no token
    assert raw(endpoint, "GET", "/docs")[0] == 404  # no pages for a browser


# -- bad requests are 4xx in Google's shape -----------------------------------------------------


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/vtx/logs?run_id=x&cursor=-1", b""),
        ("/vtx/logs?run_id=x&cursor=100000000000000000000000", b""),
        ("/vtx/logs?run_id=x&cursor=abc", b""),
        ("/vtx/logs", b""),
        ("/vtx/jobs/1:preempt", b"{not json"),
        ("/vtx/jobs/1:preempt", b'{"replica": 5}'),
        ("/vtx/jobs/1:preempt", b'{"replica": "\xff\xfe"}'),
        ("/vtx/jobs/1:preempt", b'{"unknown": 1}'),
        ("/vtx/jobs/1:preempt", b"[" * 5000 + b"]" * 5000),
    ],
)
def test_bad_vtx_requests_are_4xx_never_500(
    local_platform: StackOutputs, path: str, body: bytes
) -> None:
    headers = {"Authorization": f"Bearer {local_platform.local_token}"}
    if body:
        headers["Content-Type"] = "application/json"
    method = "POST" if body else "GET"
    status, answer = raw(local_platform.vertex_endpoint, method, path, body, headers)
    assert 400 <= status < 500, (status, answer)
    assert_google_error(answer, status)


@pytest.mark.parametrize(
    ("body", "code", "says"),
    [
        (b'{"displayName": "\xff\xfe"}', 400, "Not UTF-8"),
        (b'{"a":' * 5000 + b"1" + b"}" * 5000, 400, "Invalid JSON payload"),
        (job_body(replicaCount="9223372036854775807"), 429, "runs at most"),
        (job_body(replicaCount="-3"), 400, "is negative"),
        (
            job_body(containerSpec={"imageUri": "i", "command": ["python", "-c", "\u0000"]}),
            400,
            "NUL",
        ),
        # 0 is proto3's default, so the API's JSON leaves it out: both are no replica at all.
        (job_body(replicaCount="0"), 400, "jobSpec.workerPoolSpecs[0].replicaCount"),
        (
            job_body(
                containerSpec={
                    "imageUri": "i",
                    "command": COMMAND,
                    "env": [{"name": "A", "value": "x\u0000y"}],
                }
            ),
            400,
            "jobSpec.workerPoolSpecs[0].containerSpec.env[0].value",
        ),
        (
            job_body({"baseOutputDirectory": {"outputUriPrefix": "file:///etc"}}),
            400,
            "jobSpec.baseOutputDirectory.outputUriPrefix: 'file:///etc' is not a Cloud Storage",
        ),
        (
            job_body({"baseOutputDirectory": {"outputUriPrefix": "gs://../.."}}),
            400,
            "jobSpec.baseOutputDirectory.outputUriPrefix: 'gs://../..'",
        ),
        (
            job_body(
                {"baseOutputDirectory": {"outputUriPrefix": "gs://vtx-local-models/a/../../b"}}
            ),
            400,
            "'.' and '..' are not folders",
        ),
    ],
)
def test_bad_job_bodies_are_answered_at_once(
    local_platform: StackOutputs, body: bytes, code: int, says: str
) -> None:
    headers = {"Content-Type": "application/json"}
    status, answer = raw(local_platform.vertex_endpoint, "POST", JOBS_PATH, body, headers)
    assert status == code, answer
    assert says in assert_google_error(answer, code)


def test_a_page_token_beyond_sqlite_is_a_400(local_platform: StackOutputs) -> None:
    path = f"{JOBS_PATH}?pageToken={'9' * 30}"
    status, answer = raw(local_platform.vertex_endpoint, "GET", path)
    assert status == 400
    assert "pageToken" in assert_google_error(answer, 400)


# -- the GCS emulator ----------------------------------------------------------------------------


def test_gcs_emulator_refuses_browsers_and_other_hosts(local_platform: StackOutputs) -> None:
    endpoint = local_platform.gcs_endpoint
    path = f"/storage/v1/b/{local_platform.buckets.data}/o"
    assert raw(endpoint, "GET", path)[0] == 200
    for headers in (
        {"Host": "evil.example"},
        {"Origin": "https://evil.example"},
        {"Sec-Fetch-Site": "cross-site"},
    ):
        status, answer = raw(endpoint, "GET", path, headers=headers)
        assert status == 403, headers
        assert_google_error(answer, 403)


def test_gcs_emulator_has_no_reset_endpoint(local_platform: StackOutputs) -> None:
    endpoint = local_platform.gcs_endpoint
    bucket = local_platform.buckets.data
    upload = f"/upload/storage/v1/b/{bucket}/o?uploadType=media&name=keep/me.txt"
    assert raw(endpoint, "POST", upload, b"kept", {"Content-Type": "text/plain"})[0] == 200
    for path in ("/wipe", "/wipe?keep-buckets=true"):
        assert raw(endpoint, "GET", path)[0] in (404, 501)
    assert raw(endpoint, "GET", f"/storage/v1/b/{bucket}/o/keep%2Fme.txt")[0] == 200


@pytest.mark.parametrize(
    "name", [".", "..", "UPPER", "ab", "a" * 64, "-dash", "has space", "googlebucket", "1.2.3.4"]
)
def test_invalid_bucket_names_are_400(local_platform: StackOutputs, name: str) -> None:
    body = json.dumps({"name": name}).encode()
    status, answer = raw(
        local_platform.gcs_endpoint,
        "POST",
        "/storage/v1/b?project=vtx-local",
        body,
        {"Content-Type": "application/json"},
    )
    assert status == 400, answer
    assert "bucket name" in assert_google_error(answer, 400)


def test_a_dot_bucket_cannot_reach_another_bucket(local_platform: StackOutputs) -> None:
    """Before: bucket '.' + object 'vtx-local-data/x' was the file of object 'x' in
    vtx-local-data."""
    endpoint = local_platform.gcs_endpoint
    data = local_platform.buckets.data
    victim = f"/upload/storage/v1/b/{data}/o?uploadType=media&name=victim.txt"
    assert raw(endpoint, "POST", victim, b"original", {"Content-Type": "text/plain"})[0] == 200
    for bucket in (".", "%2E", ".."):
        path = f"/upload/storage/v1/b/{bucket}/o?uploadType=media&name={data}/victim.txt"
        status, answer = raw(endpoint, "POST", path, b"overwritten", {"Content-Type": "text/plain"})
        assert status == 400, (bucket, answer)
    conn = http.client.HTTPConnection("127.0.0.1", urlsplit(endpoint).port, timeout=HANG_S)
    conn.request("GET", f"/download/storage/v1/b/{data}/o/victim.txt?alt=media")
    assert conn.getresponse().read() == b"original"
    conn.close()


@pytest.mark.parametrize(
    "name",
    [".", "..", ".well-known/acme-challenge/x", "nul\x00byte", "cr\rlf", "x" * 1025, "é" * 513],
)
def test_invalid_object_names_are_400_not_a_dropped_connection(
    local_platform: StackOutputs, name: str
) -> None:
    endpoint = local_platform.gcs_endpoint
    bucket = local_platform.buckets.data
    encoded = quote(name, safe="")
    upload = f"/upload/storage/v1/b/{bucket}/o?uploadType=media&name={encoded}"
    status, answer = raw(endpoint, "POST", upload, b"x", {"Content-Type": "text/plain"})
    assert status == 400, answer
    assert_google_error(answer, 400)
    status, answer = raw(endpoint, "GET", f"/storage/v1/b/{bucket}/o/{encoded}")
    assert status == 400, answer
    # Names from an upload's JSON metadata are checked too (multipart uploads carry them).
    meta = json.dumps({"name": name}).encode()
    body = (
        b"--b\r\nContent-Type: application/json; charset=UTF-8\r\n\r\n"
        + meta
        + b"\r\n--b\r\nContent-Type: text/plain\r\n\r\nx\r\n--b--\r\n"
    )
    multipart = f"/upload/storage/v1/b/{bucket}/o?uploadType=multipart"
    status, answer = raw(
        endpoint, "POST", multipart, body, {"Content-Type": "multipart/related; boundary=b"}
    )
    assert status == 400, answer


# -- the data dir is private ---------------------------------------------------------------------


def test_data_dir_files_are_private_to_the_user(
    local_platform: StackOutputs, local_platform_state: PlatformState
) -> None:
    jobs = client(local_platform.vertex_endpoint)
    job = jobs.create_custom_job(parent=PARENT, custom_job=custom_job("private", pool("print(1)")))
    assert wait_terminal(jobs, job.name).state == 4
    data_dir = Path(local_platform_state.data_dir)
    loose = []
    for path in [data_dir, *data_dir.rglob("*")]:
        mode = stat.S_IMODE(path.lstat().st_mode)
        if not path.is_symlink() and mode & 0o077:
            loose.append(f"{path.relative_to(data_dir.parent)} {oct(mode)}")
    assert loose == []
    assert stat.S_IMODE((data_dir / "state.json").stat().st_mode) == 0o600
    assert any(p.suffix == ".log" for p in (data_dir / "jobs").rglob("*"))
    assert list((data_dir / "gcs").rglob("*"))  # objects are files under the data dir too


# -- the executor --------------------------------------------------------------------------------


def _executor(tmp_path: Path, cwd: Path) -> Executor:
    store = Store(tmp_path / "jobs.sqlite")
    return Executor(store, LocalSettings(data_dir=tmp_path, cwd=cwd, gcs_port=1, grace_s=1.0))


def _rest_job(job_id: str) -> dict[str, Any]:
    return {
        "name": f"projects/{LOCAL_PROJECT_NUMBER}/locations/us-central1/customJobs/{job_id}",
        "displayName": job_id,
        "jobSpec": {
            "workerPoolSpecs": [
                {
                    "machineSpec": {"machineType": "n1-standard-4"},
                    "replicaCount": "1",
                    "containerSpec": {"imageUri": "i", "command": ["python", "-c", "pass"]},
                }
            ]
        },
    }


def _tick_until_terminal(executor: Executor, job_id: str, ticks: int = 100) -> dict[str, Any]:
    for _ in range(ticks):
        with executor._lock:
            executor._tick()
        job = executor.store.get_job(job_id)
        assert job is not None
        if job["state"] in ("JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED"):
            return job
        time.sleep(0.05)
    raise AssertionError(f"job {job_id} still {job['state']} after {ticks} ticks")


def test_a_created_jobs_answer_is_a_copy_the_supervisor_does_not_change(tmp_path: Path) -> None:
    """Before: the create's answer was the live job, rendered outside the lock while a tick
    changed it ('dictionary changed size during iteration', a 500, once under load)."""
    executor = _executor(tmp_path, cwd=tmp_path / "removed-checkout")
    answer = executor.submit(_rest_job("1"))
    assert answer["state"] == "JOB_STATE_QUEUED"
    _tick_until_terminal(executor, "1")
    assert answer["state"] == "JOB_STATE_QUEUED"
    assert "endTime" not in answer


def test_a_replica_that_cannot_start_fails_the_job_at_once(tmp_path: Path) -> None:
    """Before: Popen raised on every tick and the job stayed PENDING forever."""
    executor = _executor(tmp_path, cwd=tmp_path / "removed-checkout")
    executor.submit(_rest_job("1"))
    job = _tick_until_terminal(executor, "1")
    assert job["state"] == "JOB_STATE_FAILED"
    assert "workerpool0-0 could not be started" in job["error"]["message"]
    assert "removed-checkout" in job["error"]["message"]


def test_the_executor_refuses_a_job_without_its_one_primary_replica(tmp_path: Path) -> None:
    """Before: accepted, then RUNNING with no replica forever (callers that skip the server's
    checks, as a study's trials and a pipeline's job do, reach submit directly)."""
    executor = _executor(tmp_path, cwd=tmp_path)
    job = _rest_job("3")
    del job["jobSpec"]["workerPoolSpecs"][0]["replicaCount"]
    with pytest.raises(ExecutorError, match=r"workerPoolSpecs\[0\].replicaCount") as info:
        executor.submit(job)
    assert info.value.http_code == 400
    assert executor.store.get_job("3") is None


def test_cancel_ends_a_pending_job(tmp_path: Path) -> None:
    executor = _executor(tmp_path, cwd=tmp_path)
    job = executor.submit(_rest_job("2"))
    with executor._lock:
        active = executor._jobs["2"]
        executor._set_state(active, JobState.PENDING)  # admitted, replicas not yet started
    executor.cancel("2")
    job = _tick_until_terminal(executor, "2")
    assert job["state"] == "JOB_STATE_CANCELLED"
    assert all(r.status == "new" for r in active.rt.replicas)  # nothing was started


# -- ports -------------------------------------------------------------------------------------


def tcp_states(port: int) -> set[str]:
    """The states (hex, as Linux's socket table writes them) of the TCP sockets on ``port``."""
    lines = Path("/proc/net/tcp").read_text().splitlines()[1:]
    return {line.split()[3] for line in lines if f":{port:04X} " in line}


def test_a_port_in_time_wait_is_free() -> None:
    """A server that stopped leaves its side of closed connections in TIME_WAIT on its port for
    a minute. Its listener had SO_REUSEADDR (uvicorn's and the emulator's do), so a new server
    may bind there at once; `vtx local up` must not call the port taken."""
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]
    peer = socket.create_connection(("127.0.0.1", port))
    accepted, _ = server.accept()
    accepted.close()  # the server closes first: TIME_WAIT on 127.0.0.1:port
    wait_for(lambda: "05" in tcp_states(port))  # FIN_WAIT2: the peer has seen that close
    peer.close()
    server.close()
    assert "06" in tcp_states(port)  # TIME_WAIT
    assert port_free(port)


# -- other users -----------------------------------------------------------------------------


def test_socket_owner_reads_the_kernel_table(tmp_path: Path) -> None:
    table = tmp_path / "tcp"
    table.write_text(
        "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid\n"
        "   0: 0100007F:D9AF 0100007F:20D6 01 00000000:00000000 00:00000000 00000000  1001 "
        "0 1 1 0000000000000000 20 4 30 10 -1\n"
    )
    assert socket_owner(0xD9AF, 0x20D6, table) == 1001
    assert socket_owner(0xD9AF, 0x20D7, table) == -1
    assert socket_owner(1, 2, tmp_path / "absent") is None


@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="needs Linux's socket table")
def test_the_kernels_lookup_of_one_connection_agrees_with_its_table() -> None:
    """socket_owner asks the kernel for the one connection (sock_diag) instead of reading the
    whole table (milliseconds per request with many closed connections): both must agree."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port)) as client:
            accepted, _ = server.accept()
            with accepted:
                client_port = client.getsockname()[1]
                assert _sock_diag_owner(client_port, port) == os.getuid()
                assert _table_owner(client_port, port, SOCKET_TABLE) == os.getuid()
                assert socket_owner(client_port, port) == os.getuid()
                assert _sock_diag_owner(client_port, port + 1) == -1  # no such connection
                assert socket_owner(client_port, port + 1) == -1


# The probe runs as nobody: the venv's interpreter may live where nobody can read (/root).
SYSTEM_PYTHON = Path("/usr/bin/python3")


@pytest.mark.skipif(
    not hasattr(os, "getuid")
    or os.getuid() != 0
    or not Path("/proc/net/tcp").exists()
    or not SYSTEM_PYTHON.exists(),
    reason="needs root (to act as another user), Linux's socket table and /usr/bin/python3",
)
@pytest.mark.parametrize("server", ["vertex_endpoint", "gcs_endpoint"])
def test_other_users_are_refused(local_platform: StackOutputs, server: str) -> None:
    """A program of another user (nobody, uid 65534) gets a 403 from either server."""
    endpoint = getattr(local_platform, server)
    path = JOBS_PATH if server == "vertex_endpoint" else "/storage/v1/b?project=vtx-local"
    probe = (
        "import sys, urllib.request, urllib.error\n"
        "try:\n"
        "    urllib.request.urlopen(sys.argv[1], timeout=10)\n"
        "    print(200)\n"
        "except urllib.error.HTTPError as exc:\n"
        "    print(exc.code)\n"
    )
    as_nobody = subprocess.run(
        [str(SYSTEM_PYTHON), "-I", "-S", "-c", probe, endpoint + path],
        user=65534,
        capture_output=True,
        text=True,
        timeout=30,
        cwd="/",
    )
    assert as_nobody.stdout.strip() == "403", as_nobody.stderr
    assert raw(endpoint, "GET", path)[0] == 200  # the user who started it
