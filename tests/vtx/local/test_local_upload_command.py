"""`vtx local upload`."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from jobs.core.stack import StackOutputs
from vtx.cli import app


def _upload(*args: str):
    result = CliRunner().invoke(app, ["local", "upload", *args])
    assert "Traceback" not in result.output
    return result


def _flat(text: str) -> str:
    return " ".join(text.replace("│", " ").split())


def _read_back(platform: StackOutputs, bucket: str, prefix: str) -> dict[str, bytes]:
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    client = storage.Client(
        project="vtx-local",
        credentials=AnonymousCredentials(),
        client_options={"api_endpoint": platform.gcs_endpoint},
    )
    return {
        blob.name: blob.download_as_bytes() for blob in client.list_blobs(bucket, prefix=prefix)
    }


def _tree(root: Path) -> Path:
    (root / "shards" / "deep").mkdir(parents=True)
    (root / "train.jsonl").write_text('{"text": "a"}\n')
    (root / "shards" / "0.jsonl").write_text('{"text": "b"}\n')
    (root / "shards" / "deep" / "1.jsonl").write_text('{"text": "c"}\n')
    return root


def test_a_directory_tree_lands_under_the_prefix(
    local_platform: StackOutputs, tmp_path: Path
) -> None:
    bucket = local_platform.buckets.data
    result = _upload(str(_tree(tmp_path / "data")), f"gs://{bucket}/mine/v1")
    assert result.exit_code == 0, result.output
    assert _read_back(local_platform, bucket, "mine/v1/") == {
        "mine/v1/shards/0.jsonl": b'{"text": "b"}\n',
        "mine/v1/shards/deep/1.jsonl": b'{"text": "c"}\n',
        "mine/v1/train.jsonl": b'{"text": "a"}\n',
    }
    out = _flat(result.output)
    assert "uploaded 3 file(s), 42 B" in out
    assert f"-> gs://{bucket}/mine/v1/shards/deep/1.jsonl" in out


def test_a_file_lands_in_a_folder_or_under_its_exact_name(
    local_platform: StackOutputs, tmp_path: Path
) -> None:
    bucket = local_platform.buckets.data
    source = tmp_path / "eval.jsonl"
    source.write_bytes(b"{}\n")
    assert _upload(str(source), f"gs://{bucket}/files/").exit_code == 0
    assert _upload(str(source), f"gs://{bucket}/files/renamed.jsonl").exit_code == 0
    assert set(_read_back(local_platform, bucket, "files/")) == {
        "files/eval.jsonl",
        "files/renamed.jsonl",
    }


def test_a_missing_bucket_is_named_and_created_only_when_asked(
    local_platform: StackOutputs, tmp_path: Path
) -> None:
    source = tmp_path / "x.txt"
    source.write_bytes(b"x")
    refused = _upload(str(source), "gs://vtx-upload-new/a/")
    assert refused.exit_code == 1
    assert "bucket gs://vtx-upload-new does not exist" in _flat(refused.output)
    assert "--create-bucket" in _flat(refused.output)
    created = _upload(str(source), "gs://vtx-upload-new/a/", "--create-bucket")
    assert created.exit_code == 0, created.output
    assert "created bucket gs://vtx-upload-new" in _flat(created.output)
    assert _read_back(local_platform, "vtx-upload-new", "a/") == {"a/x.txt": b"x"}


def test_a_platform_that_is_not_running_is_said(tmp_path: Path) -> None:
    source = tmp_path / "x.txt"
    source.write_bytes(b"x")
    result = _upload(str(source), "gs://vtx-local-data/x", "--data-dir", str(tmp_path / "none"))
    assert result.exit_code == 1
    assert "the local platform is not running" in _flat(result.output)
