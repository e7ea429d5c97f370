"""`vtx model mirror`'s copy (jobs/serving/model_mirror.py) against the GCS emulator with the real
google-cloud-storage client: what lands where, the SHA-256 manifest, unchanged files skipped,
the MD5 check after the upload, and a Hugging Face cache read without the Hub."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from jobs.core.stack import StackOutputs
from jobs.serving.model_mirror import (
    MANIFEST,
    LocalFile,
    MirrorError,
    Prefix,
    _verify,
    destination,
    hub_cache,
    local_files,
    mirror,
    resolve_source,
)
from jobs.vertex.google_session import storage_client
from tests.conftest import stack_outputs


def model_dir(root: Path) -> Path:
    (root / "sub").mkdir(parents=True)
    (root / "config.json").write_text('{"model_type": "llama"}')
    (root / "model.safetensors").write_bytes(b"\x00" * 4096)
    (root / "sub" / "tokenizer.json").write_text("{}")
    (root / ".cache").mkdir()
    (root / ".cache" / "download.lock").write_text("hidden: left out")
    return root


@pytest.fixture
def emulator_stack(gcs_emulator: str, gcs_bucket: str) -> StackOutputs:
    return stack_outputs(gcs_endpoint=gcs_emulator)


def objects(stack: StackOutputs, bucket: str, prefix: str) -> dict[str, bytes]:
    listed = storage_client(stack).bucket(bucket).list_blobs(prefix=f"{prefix}/")
    return {b.name.removeprefix(f"{prefix}/"): b.download_as_bytes() for b in listed}


def test_a_directory_lands_under_the_prefix_with_a_sha256_manifest(
    tmp_path: Path, emulator_stack: StackOutputs, gcs_bucket: str
) -> None:
    source = model_dir(tmp_path / "tiny")
    files = local_files(source)
    assert [f.relative for f in files] == ["config.json", "model.safetensors", "sub/tokenizer.json"]
    prefix = Prefix(gcs_bucket, "models/tiny")
    result = mirror(storage_client(emulator_stack), files, prefix, str(source))
    stored = objects(emulator_stack, gcs_bucket, "models/tiny")
    assert set(stored) == {"config.json", "model.safetensors", "sub/tokenizer.json", MANIFEST}
    assert stored["model.safetensors"] == b"\x00" * 4096
    manifest = json.loads(stored[MANIFEST])
    assert manifest["files"]["model.safetensors"] == {
        "size": 4096,
        "sha256": hashlib.sha256(b"\x00" * 4096).hexdigest(),
    }
    assert len(result.uploaded) == 3 and result.unchanged == () and result.extra == ()
    assert result.manifest_uri == f"gs://{gcs_bucket}/models/tiny/{MANIFEST}"


def test_a_second_mirror_uploads_only_what_changed_and_reports_what_the_source_lost(
    tmp_path: Path, emulator_stack: StackOutputs, gcs_bucket: str
) -> None:
    source = model_dir(tmp_path / "tiny")
    client, prefix = storage_client(emulator_stack), Prefix(gcs_bucket, "tiny")
    mirror(client, local_files(source), prefix, "tiny")
    again = mirror(client, local_files(source), prefix, "tiny")
    assert again.uploaded == () and len(again.unchanged) == 3
    (source / "config.json").write_text('{"model_type": "llama", "changed": true}')
    (source / "sub" / "tokenizer.json").unlink()
    changed = mirror(client, local_files(source), prefix, "tiny")
    assert [f.relative for f in changed.uploaded] == ["config.json"]
    assert changed.extra == ("tiny/sub/tokenizer.json",)
    manifest = json.loads(objects(emulator_stack, gcs_bucket, "tiny")[MANIFEST])
    assert set(manifest["files"]) == {"config.json", "model.safetensors"}


def test_a_re_mirror_broken_half_way_leaves_no_manifest_vouching_for_replaced_files(
    tmp_path: Path, emulator_stack: StackOutputs, gcs_bucket: str
) -> None:
    source = model_dir(tmp_path / "tiny")
    client, prefix = storage_client(emulator_stack), Prefix(gcs_bucket, "half")
    mirror(client, local_files(source), prefix, "tiny")
    (source / "config.json").write_text('{"model_type": "llama", "retrained": true}')
    (source / "model.safetensors").write_bytes(b"\x01" * 4096)

    def interrupted(file: LocalFile, uploaded: bool) -> None:
        if uploaded:  # the user's Ctrl-C once the first changed file is replaced
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        mirror(client, local_files(source), prefix, "tiny", on_file=interrupted)
    stored = objects(emulator_stack, gcs_bucket, "half")
    assert stored["config.json"] == (source / "config.json").read_bytes()  # replaced
    assert stored["model.safetensors"] == b"\x00" * 4096  # not yet
    assert MANIFEST not in stored  # so nothing vouches for the mixture

    mirror(client, local_files(source), prefix, "tiny")  # run again: complete, vouched for
    stored = objects(emulator_stack, gcs_bucket, "half")
    manifest = json.loads(stored[MANIFEST])
    for name in ("config.json", "model.safetensors"):
        assert manifest["files"][name]["sha256"] == hashlib.sha256(stored[name]).hexdigest()


def test_an_object_that_does_not_hold_the_files_bytes_fails_the_check() -> None:
    file = LocalFile("w.bin", Path("w.bin"), 3, "sha", "md5-of-file")
    prefix = Prefix("b", "m")
    with pytest.raises(MirrorError, match=r"m/w\.bin has MD5 other, the file md5-of-file"):
        _verify({"m/w.bin": "other"}, [file], prefix)
    with pytest.raises(MirrorError, match=r"m/w\.bin is missing after the upload"):
        _verify({}, [file], prefix)


def test_a_missing_bucket_is_one_line(tmp_path: Path, emulator_stack: StackOutputs) -> None:
    files = local_files(model_dir(tmp_path / "tiny"))
    with pytest.raises(MirrorError, match="bucket gs://no-such-bucket-here not found"):
        mirror(storage_client(emulator_stack), files, Prefix("no-such-bucket-here", "m"), "x")


def test_a_hub_id_is_read_from_the_cache_snapshot_without_the_hub(tmp_path: Path) -> None:
    cache = hub_cache({"HF_HOME": str(tmp_path / "hf")})
    assert cache == tmp_path / "hf" / "hub"
    repo = cache / "models--acme--tiny-chat"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text("abc123\n")
    (repo / "blobs").mkdir()
    (repo / "blobs" / "deadbeef").write_text('{"model_type": "llama"}')
    snapshot = repo / "snapshots" / "abc123"
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").symlink_to(repo / "blobs" / "deadbeef")
    directory, name = resolve_source("acme/tiny-chat", cache)
    assert (directory, name) == (snapshot, "acme/tiny-chat")
    (file,) = local_files(directory)  # through the snapshot's link to its blob
    assert file.relative == "config.json" and file.size == len('{"model_type": "llama"}')
    with pytest.raises(MirrorError, match=r"huggingface-cli download acme/other"):
        resolve_source("acme/other", cache)
    with pytest.raises(MirrorError, match="not a Hugging Face model id"):
        resolve_source(str(tmp_path / "absent" / "dir" / "x"), cache)


def test_the_default_destination_is_the_stacks_models_bucket() -> None:
    stack = stack_outputs()
    assert str(destination(stack, None, "acme/tiny-chat")) == (
        f"gs://{stack.buckets.models}/acme/tiny-chat"
    )
    assert str(destination(stack, "gs://elsewhere/w/", "x")) == "gs://elsewhere/w"
    with pytest.raises(MirrorError, match="is not a gs:// URI"):
        destination(stack, "/tmp/x", "x")
