"""The local GCS answers objects.move (gcsfs `mv`, used by every DCP checkpoint save), the
other calls the clients make (copy, rewrite, compose, patch, preconditions, ranges), and keeps
its objects across a restart."""

from __future__ import annotations

import json
import subprocess
import urllib.request
from pathlib import Path
from urllib.parse import quote

import pytest

from jobs.core.stack import StackOutputs
from jobs.local.plumbing.ports import free_port
from jobs.local.plumbing.processes import gcs_command
from tests.conftest import wait_for_port


def _post(url: str, data: bytes = b"{}") -> tuple[int, dict]:
    request = urllib.request.Request(url, data=data, method="POST")
    with urllib.request.urlopen(request) as resp:
        return resp.status, json.loads(resp.read() or b"{}")


def test_move_renames_an_object_through_the_json_api(local_platform: StackOutputs) -> None:
    import gcsfs

    bucket = local_platform.buckets.data
    fs = gcsfs.GCSFileSystem(token="anon", endpoint_url=local_platform.gcs_endpoint)
    fs.pipe(f"{bucket}/move/a.txt", b"payload")

    base = f"{local_platform.gcs_endpoint}/storage/v1/b/{bucket}/o"
    status, moved = _post(f"{base}/move%2Fa.txt/moveTo/o/move%2Fb.txt")
    assert status == 200
    assert moved["name"] == "move/b.txt"
    fs.invalidate_cache()
    assert fs.ls(f"{bucket}/move") == [f"{bucket}/move/b.txt"]

    fs.mv(f"{bucket}/move/b.txt", f"{bucket}/move/c.txt")
    assert fs.cat(f"{bucket}/move/c.txt") == b"payload"
    assert not fs.exists(f"{bucket}/move/b.txt")


def test_copy_rewrite_compose_patch_and_preconditions(gcs_bucket: str) -> None:
    from google.api_core.exceptions import PreconditionFailed
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    bucket = storage.Client(project="vtx-test", credentials=AnonymousCredentials()).bucket(
        gcs_bucket
    )
    bucket.blob("a").upload_from_string(b"alpha-", content_type="text/plain")
    bucket.blob("b").upload_from_string(b"beta")
    copied = bucket.copy_blob(bucket.blob("a"), bucket, "copies/a")
    assert (copied.content_type, copied.download_as_bytes()) == ("text/plain", b"alpha-")
    token, done, total = bucket.blob("rewritten").rewrite(bucket.blob("b"))
    assert (token, done, total) == (None, 4, 4)
    composed = bucket.blob("ab")
    composed.compose([bucket.blob("a"), bucket.blob("b")])
    assert composed.download_as_bytes() == b"alpha-beta"
    assert composed.download_as_bytes(start=2, end=7) == b"pha-be"  # Range, inclusive end

    blob = bucket.get_blob("a")
    blob.metadata = {"owner": "me"}
    blob.patch()
    again = bucket.get_blob("a")
    assert (again.metadata, again.metageneration) == ({"owner": "me"}, 2)
    with pytest.raises(PreconditionFailed):
        bucket.blob("a").upload_from_string(b"x", if_generation_match=0)
    with pytest.raises(PreconditionFailed):
        bucket.blob("a").delete(if_generation_match=again.generation + 1)
    assert bucket.blob("a").download_as_bytes() == b"alpha-"


def test_objects_survive_a_killed_emulator(tmp_path: Path) -> None:
    """`vtx local up` starts a dead emulator again over the same directory: every object is
    back, and an unfinished resumable upload is gone."""
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    names = ["plain", "x/", "x", "a\\b", "é" * 512]

    def start() -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(gcs_command(port), cwd=tmp_path, stderr=subprocess.DEVNULL)
        wait_for_port(port)
        return proc

    proc = start()
    try:
        _post(f"{endpoint}/storage/v1/b?project=p", json.dumps({"name": "kept"}).encode())
        for name in names:
            _post(
                f"{endpoint}/upload/storage/v1/b/kept/o?uploadType=media&name={quote(name)}",
                name.encode(),
            )
        _post(f"{endpoint}/upload/storage/v1/b/kept/o?uploadType=resumable&name=pending", b"{}")
    finally:
        proc.kill()
        proc.wait()
    proc = start()
    try:
        for name in names:
            url = f"{endpoint}/download/storage/v1/b/kept/o/{quote(name, safe='')}?alt=media"
            with urllib.request.urlopen(url) as resp:
                assert resp.read() == name.encode()
        with urllib.request.urlopen(f"{endpoint}/storage/v1/b/kept/o") as resp:
            assert sorted(item["name"] for item in json.load(resp)["items"]) == sorted(names)
        delete = urllib.request.Request(f"{endpoint}/storage/v1/b/kept/o/plain", method="DELETE")
        urllib.request.urlopen(delete).close()
    finally:
        proc.terminate()
        proc.wait()
    store = tmp_path / ".cloudstorage" / "v2"
    assert list((store / "uploads").iterdir()) == []
    assert len(list((store / "buckets" / "kept" / "objects").iterdir())) == 2 * (len(names) - 1)
