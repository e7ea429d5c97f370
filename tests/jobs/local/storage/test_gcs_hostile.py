"""The local GCS against hostile and edge-case clients: names that a path-based store would
fold together, empty and very long names, truncated and resumable uploads, listings that ask
for too much, and clients that hold a connection open without finishing a request.

The emulator runs as the platform starts it (on disk, in its own process); the real
google-cloud-storage client and gcsfs drive it where they are what a user runs, raw sockets
where the point is a request no well-behaved client sends. A hang shows up as a socket timeout
(``HANG_S``), never as a timing assertion.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import pytest

from jobs.local.plumbing.ports import free_port
from jobs.local.plumbing.processes import gcs_command
from jobs.local.storage.upload import plan, upload_all
from tests.conftest import HANG_S, wait_for_port

CHUNK = 256 * 1024
"""The resumable-upload chunk granularity of GCS (and of both clients)."""


@pytest.fixture(scope="module")
def gcs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The emulator as `vtx local up` runs it (objects on disk), for this module."""
    port = free_port()
    workdir = tmp_path_factory.mktemp("gcs-hostile")
    proc = subprocess.Popen(
        gcs_command(port), cwd=workdir, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        wait_for_port(port)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture
def client(gcs: str) -> Any:
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    return storage.Client(
        project="vtx-local",
        credentials=AnonymousCredentials(),
        client_options={"api_endpoint": gcs},
    )


@pytest.fixture
def bucket(client: Any) -> Any:
    return client.create_bucket(f"hostile-{uuid.uuid4().hex[:12]}")


@pytest.fixture
def fs(gcs: str) -> Any:
    import gcsfs

    return gcsfs.GCSFileSystem(token="anon", endpoint_url=gcs, skip_instance_cache=True)


def request(
    endpoint: str,
    method: str,
    path: str,
    body: bytes = b"",
    headers: dict[str, str] | None = None,
) -> tuple[int, dict[str, str], bytes]:
    """One raw request: status, headers (lower-case names) and body."""
    parts = urlsplit(endpoint)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=HANG_S)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        response = conn.getresponse()
        data = response.read()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, data
    finally:
        conn.close()


def media_upload(endpoint: str, bucket: str, name: str, data: bytes) -> int:
    path = f"/upload/storage/v1/b/{bucket}/o?uploadType=media&name={quote(name, safe='')}"
    return request(endpoint, "POST", path, data, {"Content-Type": "application/octet-stream"})[0]


def object_path(bucket: str, name: str) -> str:
    return f"/storage/v1/b/{bucket}/o/{quote(name, safe='')}"


# -- names -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "other"),
    [
        ("bs\\keep", "bs/keep"),
        ("trail/x/", "trail/x"),
        ("col//x", "col/x"),
        ("/lead/keep", "lead/keep"),
        ("dots/../keep", "keep"),
    ],
)
def test_names_a_file_system_would_fold_together_are_distinct_objects(
    bucket: Any, name: str, other: str
) -> None:
    bucket.blob(other).upload_from_string(b"other")
    bucket.blob(name).upload_from_string(b"name")
    assert bucket.blob(other).download_as_bytes() == b"other"
    assert bucket.blob(name).download_as_bytes() == b"name"
    assert sorted(b.name for b in bucket.list_blobs()) == sorted([name, other])
    bucket.blob(name).delete()
    assert bucket.blob(other).download_as_bytes() == b"other"
    assert [b.name for b in bucket.list_blobs()] == [other]


def test_empty_objects_and_folder_placeholders(gcs: str, bucket: Any, fs: Any) -> None:
    bucket.blob("empty.txt").upload_from_string(b"")  # multipart, as the client sends it
    assert media_upload(gcs, bucket.name, "media-empty", b"") == 200
    fs.pipe(f"{bucket.name}/gcsfs-empty", b"")
    assert media_upload(gcs, bucket.name, "folder/", b"") == 200
    for name in ("empty.txt", "media-empty", "gcsfs-empty", "folder/"):
        blob = bucket.get_blob(name)
        assert blob.size == 0, name
        assert blob.download_as_bytes() == b""
    listing = bucket.list_blobs(delimiter="/")
    assert sorted(b.name for b in listing) == ["empty.txt", "gcsfs-empty", "media-empty"]
    assert listing.prefixes == {"folder/"}


def test_local_upload_of_a_tree_with_an_empty_success_file(
    gcs: str, bucket: Any, tmp_path: Path
) -> None:
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "_SUCCESS").write_bytes(b"")
    (tmp_path / "out" / "part-0").write_bytes(b"rows")
    upload_all(gcs, plan(tmp_path / "out", f"gs://{bucket.name}/run"))
    assert bucket.blob("run/_SUCCESS").download_as_bytes() == b""
    assert bucket.blob("run/part-0").download_as_bytes() == b"rows"


@pytest.mark.parametrize("name", ["n" * 1024, "é" * 512, "d/" * 511 + "xy"])
def test_the_longest_legal_names(bucket: Any, name: str) -> None:
    assert len(name.encode()) == 1024
    bucket.blob(name).upload_from_string(b"long")
    assert bucket.blob(name).download_as_bytes() == b"long"
    assert [b.name for b in bucket.list_blobs()] == [name]


# -- uploads -----------------------------------------------------------------------------------


def _send_truncated(endpoint: str, path: str, head: bytes, body: bytes, declared: int) -> None:
    """Headers declaring ``declared`` bytes of body, ``body`` and 1 MiB more, then the
    connection closes."""
    parts = urlsplit(endpoint)
    with socket.create_connection((parts.hostname, parts.port), timeout=HANG_S) as sock:
        sock.sendall(
            f"POST {path} HTTP/1.1\r\nHost: {parts.netloc}\r\n"
            f"Content-Length: {declared}\r\n".encode()
            + head
            + b"\r\n"
            + body
            + b"x" * (1 << 20)
        )


def test_a_truncated_upload_stores_nothing(gcs: str, bucket: Any) -> None:
    media = f"/upload/storage/v1/b/{bucket.name}/o?uploadType=media&name=partial-media"
    _send_truncated(gcs, media, b"Content-Type: application/octet-stream\r\n", b"", 2 << 30)
    multipart = f"/upload/storage/v1/b/{bucket.name}/o?uploadType=multipart"
    metadata = (
        b'--b\r\nContent-Type: application/json\r\n\r\n{"name": "partial-multipart"}\r\n'
        b"--b\r\nContent-Type: application/octet-stream\r\n\r\n"
    )
    head = b"Content-Type: multipart/related; boundary=b\r\n"
    _send_truncated(gcs, multipart, head, metadata, 2 << 30)
    # Whether or not the emulator has noticed the close yet: an object exists only once its
    # whole body has arrived.
    for name in ("partial-media", "partial-multipart"):
        status, _, _ = request(gcs, "GET", object_path(bucket.name, name))
        assert status == 404, name
    assert list(bucket.list_blobs()) == []


def test_resumable_uploads_of_both_clients(bucket: Any, fs: Any) -> None:
    data = os.urandom(3 * CHUNK + 1234)
    blob = bucket.blob("google-resumable", chunk_size=CHUNK)  # PUT chunks to the session
    blob.upload_from_string(data)
    assert bucket.blob("google-resumable").download_as_bytes() == data  # checksums verified
    with fs.open(f"{bucket.name}/gcsfs-resumable", "wb", block_size=CHUNK) as out:
        out.write(data)  # POST chunks to the session, then the final one
    assert fs.cat(f"{bucket.name}/gcsfs-resumable") == data
    assert (
        fs.cat_file(f"{bucket.name}/gcsfs-resumable", start=CHUNK, end=CHUNK + 10)
        == (data[CHUNK : CHUNK + 10])
    )


def _open_session(gcs: str, bucket: str, name: str) -> str:
    path = f"/upload/storage/v1/b/{bucket}/o?uploadType=resumable&name={name}"
    status, headers, _ = request(gcs, "POST", path, b"{}", {"Content-Type": "application/json"})
    assert status == 200
    location = urlsplit(headers["location"])
    return f"{location.path}?{location.query}"


def test_the_resumable_session_protocol(gcs: str, bucket: Any) -> None:
    session = _open_session(gcs, bucket.name, "session")
    first, rest = os.urandom(CHUNK), os.urandom(100)
    for bad in ("bytes 0-9", "bytes x-y/*", "bytes 5-2/*", "chunks 0-9/*", "bytes 0-9/5"):
        status, _, _ = request(gcs, "PUT", session, b"0123456789", {"Content-Range": bad})
        assert status == 400, bad
    status, headers, _ = request(
        gcs, "PUT", session, first, {"Content-Range": f"bytes 0-{CHUNK - 1}/*"}
    )
    assert (status, headers.get("range")) == (308, f"bytes=0-{CHUNK - 1}")
    status, headers, _ = request(gcs, "PUT", session, b"", {"Content-Range": "bytes */*"})
    assert (status, headers.get("range")) == (308, f"bytes=0-{CHUNK - 1}")
    assert request(gcs, "GET", object_path(bucket.name, "session"))[0] == 404  # not yet
    total = CHUNK + len(rest)
    status, _, body = request(
        gcs, "PUT", session, rest, {"Content-Range": f"bytes {CHUNK}-{total - 1}/{total}"}
    )
    assert status == 200
    assert json.loads(body)["size"] == str(total)
    assert bucket.blob("session").download_as_bytes() == first + rest


def test_a_bucket_with_objects_or_pending_uploads_is_not_deleted(gcs: str, client: Any) -> None:
    pending = client.create_bucket(f"hostile-{uuid.uuid4().hex[:12]}")
    _open_session(gcs, pending.name, "never-finished")
    assert request(gcs, "DELETE", f"/storage/v1/b/{pending.name}")[0] == 409
    full = client.create_bucket(f"hostile-{uuid.uuid4().hex[:12]}")
    full.blob("x").upload_from_string(b"x")
    assert request(gcs, "DELETE", f"/storage/v1/b/{full.name}")[0] == 409
    full.blob("x").delete()
    assert request(gcs, "DELETE", f"/storage/v1/b/{full.name}")[0] == 204


# -- listings ----------------------------------------------------------------------------------

GLOB_NAMES = ["a/b.txt", "a/c/d.txt", "a/e.bin", "b.txt", "ab.txt", "x/y/z/w.txt"]


@pytest.mark.parametrize(
    ("glob", "expected"),
    [
        ("**/*.txt", ["a/b.txt", "a/c/d.txt", "ab.txt", "b.txt", "x/y/z/w.txt"]),
        ("*/*.txt", ["a/b.txt"]),
        ("**.txt", ["a/b.txt", "a/c/d.txt", "ab.txt", "b.txt", "x/y/z/w.txt"]),
        ("a/*", ["a/b.txt", "a/e.bin"]),
        ("a/**", ["a/b.txt", "a/c/d.txt", "a/e.bin"]),
        ("?.txt", ["b.txt"]),
        ("[ab]*.txt", ["ab.txt", "b.txt"]),
        ("[!a]*.txt", ["b.txt"]),
        ("a/{b,e}.*", ["a/b.txt", "a/e.bin"]),
        ("a/**/d.txt", ["a/c/d.txt"]),
    ],
)
def test_match_glob(gcs: str, bucket: Any, glob: str, expected: list[str]) -> None:
    for name in GLOB_NAMES:
        bucket.blob(name).upload_from_string(b"")
    assert [b.name for b in bucket.list_blobs(match_glob=glob)] == expected


@pytest.mark.parametrize(
    "query", ["maxResults=-1", "maxResults=abc", "pageToken=%00", "pageToken=notatoken"]
)
def test_bad_listing_parameters_are_400(gcs: str, bucket: Any, query: str) -> None:
    status, _, body = request(gcs, "GET", f"/storage/v1/b/{bucket.name}/o?{query}")
    assert status == 400, body
    assert json.loads(body)["error"]["code"] == 400


def test_versions_and_soft_deleted_listings_answer(gcs: str, bucket: Any) -> None:
    bucket.blob("live").upload_from_string(b"x")
    status, _, body = request(gcs, "GET", f"/storage/v1/b/{bucket.name}/o?versions=true")
    assert status == 200
    assert [item["name"] for item in json.loads(body)["items"]] == ["live"]
    status, _, body = request(gcs, "GET", f"/storage/v1/b/{bucket.name}/o?softDeleted=true")
    assert status == 200
    assert json.loads(body).get("items", []) == []


def test_an_exponential_glob_is_answered(gcs: str, bucket: Any) -> None:
    bucket.blob("ab" * 24).upload_from_string(b"")
    glob = quote("{a,b}" * 24, safe="")
    status, _, body = request(gcs, "GET", f"/storage/v1/b/{bucket.name}/o?matchGlob={glob}")
    assert status == 200, body
    assert json.loads(body).get("items", []) == []


def test_a_backtracking_glob_is_answered(gcs: str, bucket: Any) -> None:
    bucket.blob("a" * 200).upload_from_string(b"")
    glob = quote("*a" * 12 + "b", safe="")
    status, _, body = request(gcs, "GET", f"/storage/v1/b/{bucket.name}/o?matchGlob={glob}")
    assert status == 200, body
    assert json.loads(body).get("items", []) == []


@pytest.mark.parametrize("glob", ["[ab", "ends\\", "{a,b", "x" * 300])
def test_a_glob_that_cannot_be_served_is_400(gcs: str, bucket: Any, glob: str) -> None:
    path = f"/storage/v1/b/{bucket.name}/o?matchGlob={quote(glob, safe='')}"
    status, _, body = request(gcs, "GET", path)
    assert status == 400, body
    assert "matchGlob" in json.loads(body)["error"]["message"]


def test_listing_pages_follow_tokens(bucket: Any) -> None:
    names = [f"p/{i:03d}" for i in range(25)]
    for name in names:
        bucket.blob(name).upload_from_string(b"")
    pages = bucket.list_blobs(max_results=None, page_size=7).pages
    assert [[b.name for b in page] for page in pages] == [names[i : i + 7] for i in range(0, 25, 7)]


# -- clients that do not finish ----------------------------------------------------------------


@pytest.mark.parametrize(
    "partial",
    [b"GET /storage/v1/b?project=vtx-local HTTP/1.1\r\nHo", b"", "body"],
    ids=["headers", "silent", "body"],
)
def test_a_client_that_stops_mid_request_does_not_stall_others(
    gcs: str, bucket: Any, partial: bytes | str
) -> None:
    parts = urlsplit(gcs)
    if partial == "body":
        partial = (
            f"POST /upload/storage/v1/b/{bucket.name}/o?uploadType=media&name=slow HTTP/1.1\r\n"
            f"Host: {parts.netloc}\r\nContent-Length: 100\r\n\r\nabc"
        ).encode()
    assert isinstance(partial, bytes)
    with socket.create_connection((parts.hostname, parts.port), timeout=HANG_S) as stalled:
        stalled.sendall(partial)
        bucket.blob("meanwhile").upload_from_string(b"served", timeout=HANG_S)
        assert bucket.blob("meanwhile").download_as_bytes(timeout=HANG_S, retry=None) == b"served"


def test_many_clients_at_once(bucket: Any) -> None:
    errors: list[BaseException] = []

    def worker(i: int) -> None:
        try:
            blob = bucket.blob(f"many/{i}")
            blob.upload_from_string(str(i).encode())
            assert blob.download_as_bytes() == str(i).encode()
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert len(list(bucket.list_blobs(prefix="many/"))) == 16


# The probe runs as nobody: the venv's interpreter may live where nobody can read (/root).
SYSTEM_PYTHON = Path("/usr/bin/python3")
SILENT_PEER = """
import socket, sys
sock = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=30)
print("connected", flush=True)
sys.stdin.readline()  # the test's own request has been answered
try:
    print(sock.recv(100).split(b"\\r\\n")[0].decode() or "closed")
except OSError as exc:
    print(type(exc).__name__)
"""


@pytest.mark.skipif(
    not hasattr(os, "getuid")
    or os.getuid() != 0
    or not Path("/proc/net/tcp").exists()
    or not SYSTEM_PYTHON.exists(),
    reason="needs root (to act as another user), Linux's socket table and /usr/bin/python3",
)
def test_a_silent_connection_of_another_user_is_refused_without_a_request(
    gcs: str, bucket: Any
) -> None:
    """The user check runs when the connection is accepted, not when a request arrives."""
    port = urlsplit(gcs).port
    peer = subprocess.Popen(
        [str(SYSTEM_PYTHON), "-I", "-S", "-c", SILENT_PEER, str(port)],
        user=65534,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd="/",
    )
    try:
        assert peer.stdout is not None and peer.stdin is not None
        assert peer.stdout.readline().strip() == "connected"
        bucket.blob("while-silent").upload_from_string(b"served", timeout=HANG_S)
        answer, _ = peer.communicate("done\n", timeout=HANG_S)
    finally:
        if peer.poll() is None:
            peer.kill()
            peer.wait()
    assert answer.strip() == "HTTP/1.1 403 Forbidden"
