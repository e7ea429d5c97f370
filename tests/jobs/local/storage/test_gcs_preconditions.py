"""Every write of the local GCS holds its generation and metageneration preconditions (the
controller relies on ``ifGenerationMatch`` for conditional writes), and a body GCS refuses is a
400, never a 500 or a stored header.

Through the real google-cloud-storage client wherever it exposes the call: insert (multipart,
resumable), patch, update, delete, compose, copy, rewrite, move; raw HTTP where it does not (a
media upload, a body no client writes).
"""

from __future__ import annotations

import json
import uuid
from typing import Any
from urllib.parse import quote

import pytest
from google.api_core.exceptions import BadRequest, PreconditionFailed

from tests.jobs.local.storage.test_gcs_hostile import object_path, request

RESUMABLE_CHUNK = 256 * 1024
PARAMS = {
    "if_generation_match": "ifGenerationMatch",
    "if_generation_not_match": "ifGenerationNotMatch",
    "if_metageneration_match": "ifMetagenerationMatch",
    "if_metageneration_not_match": "ifMetagenerationNotMatch",
}
"""The client's keywords as the JSON API's query parameters (for the media upload, which the
client never sends)."""


@pytest.fixture
def bucket(gcs_emulator: str) -> Any:
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    client = storage.Client(
        project="vtx-test",
        credentials=AnonymousCredentials(),
        client_options={"api_endpoint": gcs_emulator},
    )
    return client.create_bucket(f"vtx-pre-{uuid.uuid4().hex[:12]}")


def stored(bucket: Any, name: str = "o") -> Any:
    """The object as it is now (generation, metageneration, bytes)."""
    blob = bucket.get_blob(name)
    return blob.generation, blob.metageneration, blob.download_as_bytes()


def seeded(bucket: Any, name: str = "o", data: bytes = b"first") -> Any:
    bucket.blob(name).upload_from_string(data)
    blob = bucket.get_blob(name)
    blob.metadata = {"v": "2"}  # metageneration 2: distinguishable from a generation's 1
    blob.patch()
    return bucket.get_blob(name)


def wrong(blob: Any) -> dict[str, dict[str, int]]:
    """Each precondition set so that ``blob`` (as it is) fails it."""
    return {
        "if_generation_match": {"if_generation_match": blob.generation + 1},
        "if_generation_match=0": {"if_generation_match": 0},
        "if_generation_not_match": {"if_generation_not_match": blob.generation},
        "if_metageneration_match": {"if_metageneration_match": blob.metageneration + 1},
        "if_metageneration_not_match": {"if_metageneration_not_match": blob.metageneration},
    }


def wrong_source(blob: Any) -> dict[str, dict[str, int]]:
    return {
        "if_source_generation_match": {"if_source_generation_match": blob.generation + 1},
        "if_source_generation_not_match": {"if_source_generation_not_match": blob.generation},
        "if_source_metageneration_match": {
            "if_source_metageneration_match": blob.metageneration + 1
        },
        "if_source_metageneration_not_match": {
            "if_source_metageneration_not_match": blob.metageneration
        },
    }


def test_inserts_hold_their_preconditions(gcs_emulator: str, bucket: Any) -> None:
    blob = seeded(bucket)
    before = stored(bucket)
    for label, conditions in wrong(blob).items():
        with pytest.raises(PreconditionFailed):  # multipart, as the client sends small objects
            bucket.blob("o").upload_from_string(b"multipart", **conditions)
        resumable = bucket.blob("o", chunk_size=RESUMABLE_CHUNK)
        with pytest.raises(PreconditionFailed):
            resumable.upload_from_string(b"r" * (RESUMABLE_CHUNK + 1), **conditions)
        query = "&".join(f"{PARAMS[key]}={value}" for key, value in conditions.items())
        path = f"/upload/storage/v1/b/{bucket.name}/o?uploadType=media&name=o&{query}"
        assert request(gcs_emulator, "POST", path, b"media")[0] == 412, label
        assert stored(bucket) == before, label
    bucket.blob("o").upload_from_string(b"second", if_generation_match=blob.generation)
    assert stored(bucket)[2] == b"second"
    with pytest.raises(PreconditionFailed):
        bucket.blob("new").upload_from_string(b"x", if_generation_match=7)
    bucket.blob("new").upload_from_string(b"x", if_generation_match=0)


def test_patch_update_and_delete_hold_their_preconditions(bucket: Any) -> None:
    blob = seeded(bucket)
    before = stored(bucket)
    for label, conditions in wrong(blob).items():
        changed = bucket.blob("o")
        changed.metadata = {"v": "x"}
        with pytest.raises(PreconditionFailed):
            changed.patch(**conditions)
        changed.content_type = "text/x-other"
        with pytest.raises(PreconditionFailed):
            changed.update(**conditions)
        with pytest.raises(PreconditionFailed):
            bucket.blob("o").delete(**conditions)
        assert stored(bucket) == before, label
        assert bucket.get_blob("o").metadata == {"v": "2"}, label
    changed = bucket.get_blob("o")
    changed.metadata = {"v": "3"}
    changed.patch(if_metageneration_match=blob.metageneration)
    bucket.blob("o").delete(if_generation_match=blob.generation)
    assert bucket.get_blob("o") is None


def test_a_patch_of_a_generation_that_is_not_live_is_404(gcs_emulator: str, bucket: Any) -> None:
    blob = seeded(bucket)
    path = f"{object_path(bucket.name, 'o')}?generation={blob.generation + 1}"
    body = json.dumps({"metadata": {"v": "x"}}).encode()
    assert request(gcs_emulator, "PATCH", path, body)[0] == 404
    assert bucket.get_blob("o").metadata == {"v": "2"}


def test_copy_rewrite_and_move_hold_source_and_destination_preconditions(bucket: Any) -> None:
    source = seeded(bucket, "src", b"source")
    dest = seeded(bucket, "dest", b"destination")
    before = stored(bucket, "src"), stored(bucket, "dest")
    calls = {
        "copy": lambda **c: bucket.copy_blob(bucket.blob("src"), bucket, "dest", **c),
        "rewrite": lambda **c: bucket.blob("dest").rewrite(bucket.blob("src"), **c),
        "move": lambda **c: bucket.move_blob(bucket.blob("src"), "dest", **c),
    }
    for call, act in calls.items():
        for label, conditions in {**wrong_source(source), **wrong(dest)}.items():
            with pytest.raises(PreconditionFailed):
                act(**conditions)
            assert (stored(bucket, "src"), stored(bucket, "dest")) == before, (call, label)
    bucket.copy_blob(
        bucket.blob("src"),
        bucket,
        "dest",
        if_source_generation_match=source.generation,
        if_source_metageneration_match=source.metageneration,
        if_generation_match=dest.generation,
    )
    assert stored(bucket, "dest")[2] == b"source"


def test_compose_holds_each_sources_preconditions_and_the_destinations(bucket: Any) -> None:
    first, second = seeded(bucket, "a", b"alpha-"), seeded(bucket, "b", b"beta")
    dest = seeded(bucket, "ab", b"old")
    before = stored(bucket, "ab")
    sources = [bucket.blob("a"), bucket.blob("b")]
    with pytest.raises(PreconditionFailed):
        bucket.blob("ab").compose(
            sources, if_source_generation_match=[first.generation, second.generation + 1]
        )
    for label, conditions in wrong(dest).items():
        if "not_match" in label:
            continue  # compose takes ifGenerationMatch and ifMetagenerationMatch only
        with pytest.raises(PreconditionFailed):
            bucket.blob("ab").compose(sources, **conditions)
    assert stored(bucket, "ab") == before
    bucket.blob("ab").compose(
        sources,
        if_source_generation_match=[first.generation, second.generation],
        if_generation_match=dest.generation,
    )
    assert stored(bucket, "ab")[2] == b"alpha-beta"


@pytest.mark.parametrize(
    ("source", "fragment"),
    [
        ({"name": "a", "generation": "abc"}, "not an integer"),
        ({"name": "a", "generation": [1]}, "not an integer"),
        ({"name": "a", "generation": True}, "not an integer"),
        ({"name": "a", "objectPreconditions": "1"}, "objectPreconditions"),
        ({"name": "a", "objectPreconditions": {"ifGenerationMatch": 1.5}}, "not an integer"),
        (
            {"name": "a", "generation": "1", "objectPreconditions": {"ifGenerationMatch": 2}},
            "differ",
        ),
    ],
)
def test_a_compose_source_gcs_would_refuse_is_400(
    gcs_emulator: str, bucket: Any, source: dict, fragment: str
) -> None:
    seeded(bucket, "a")
    body = json.dumps({"sourceObjects": [source], "destination": {}}).encode()
    status, _, answer = request(
        gcs_emulator, "POST", f"{object_path(bucket.name, 'c')}/compose", body
    )
    assert status == 400 and fragment in json.loads(answer)["error"]["message"]


@pytest.mark.parametrize("method", ["PATCH", "PUT"])
@pytest.mark.parametrize(
    "fields",
    [
        {"metadata": "owner=me"},
        {"metadata": ["owner", "me"]},
        {"metadata": {"owner": {"nested": "map"}}},
        {"contentType": 7},
        {"contentType": "text/plain\r\nX-Injected: 1"},
        {"cacheControl": "no-cache\nX-Injected: 1"},
        {"contentDisposition": "inline\x00"},
    ],
)
def test_a_patch_or_update_with_fields_gcs_would_refuse_is_400(
    gcs_emulator: str, bucket: Any, method: str, fields: dict
) -> None:
    seeded(bucket)
    body = json.dumps(fields).encode()
    assert request(gcs_emulator, method, object_path(bucket.name, "o"), body)[0] == 400
    assert bucket.get_blob("o").metadata == {"v": "2"}


INJECTED = "text/plain\r\nX-Injected: 1"


def test_a_content_type_with_a_line_break_is_never_stored_or_sent_back(
    gcs_emulator: str, bucket: Any
) -> None:
    seeded(bucket)
    # The client sends an upload's type in a header too, which requests refuses to send with a
    # line break in it: the uploads' metadata as any other client could write it.
    multipart = (
        b"--b\r\nContent-Type: application/json\r\n\r\n"
        + json.dumps({"name": "multipart", "contentType": INJECTED}).encode()
        + b"\r\n--b\r\nContent-Type: text/plain\r\n\r\nx\r\n--b--\r\n"
    )
    path = f"/upload/storage/v1/b/{bucket.name}/o?uploadType=multipart"
    headers = {"Content-Type": "multipart/related; boundary=b"}
    assert request(gcs_emulator, "POST", path, multipart, headers)[0] == 400
    start = f"/upload/storage/v1/b/{bucket.name}/o?uploadType=resumable&name=resumable"
    metadata = json.dumps({"contentType": INJECTED}).encode()
    assert request(gcs_emulator, "POST", start, metadata)[0] == 400
    blob = bucket.get_blob("o")
    blob.content_type = INJECTED
    with pytest.raises(BadRequest):
        blob.patch()
    media = f"/upload/storage/v1/b/{bucket.name}/o?uploadType=media&name=media"
    assert request(gcs_emulator, "POST", media, b"x", {"Content-Type": "text/plain\x01"})[0] == 400
    compose = json.dumps(
        {"sourceObjects": [{"name": "o"}], "destination": {"contentType": INJECTED}}
    ).encode()
    path = f"{object_path(bucket.name, 'composed')}/compose"
    assert request(gcs_emulator, "POST", path, compose)[0] == 400
    copy = json.dumps({"contentType": INJECTED}).encode()
    path = f"{object_path(bucket.name, 'o')}/copyTo/b/{bucket.name}/o/{quote('copied', safe='')}"
    assert request(gcs_emulator, "POST", path, copy)[0] == 400

    status, headers, data = request(
        gcs_emulator, "GET", f"/download/storage/v1/b/{bucket.name}/o/o?alt=media"
    )
    assert status == 200 and data == b"first" and "x-injected" not in headers
    assert [b.name for b in bucket.list_blobs()] == ["o"]
