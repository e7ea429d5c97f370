"""`vtx local upload`: files and trees land in the running platform's GCS where the real
google-cloud-storage client reads them back; a missing bucket, a platform that is not running
and a bad destination are messages, not tracebacks."""

from __future__ import annotations

from pathlib import Path

import pytest

from jobs.local.storage.upload import GcsUri, UploadError, plan


def _tree(root: Path) -> Path:
    (root / "shards" / "deep").mkdir(parents=True)
    (root / "train.jsonl").write_text('{"text": "a"}\n')
    (root / "shards" / "0.jsonl").write_text('{"text": "b"}\n')
    (root / "shards" / "deep" / "1.jsonl").write_text('{"text": "c"}\n')
    return root


@pytest.mark.parametrize(
    ("destination", "message"),
    [
        ("/tmp/elsewhere", "is not a gs:// URI"),
        ("gs://UPPER/x", "bucket name 'UPPER' may hold only lowercase"),
        ("gs://vtx-local-data/" + "x" * 1025, "must be 1 to 1024 bytes"),
    ],
)
def test_bad_destinations_are_refused_before_anything_is_sent(
    tmp_path: Path, destination: str, message: str
) -> None:
    source = tmp_path / "x.txt"
    source.write_bytes(b"x")
    with pytest.raises(UploadError, match=message.replace(".", r"\.")):
        plan(source, destination)


def test_an_empty_directory_or_a_missing_path_has_nothing_to_upload(tmp_path: Path) -> None:
    with pytest.raises(UploadError, match="holds no files"):
        plan(tmp_path, "gs://vtx-local-data/x")
    with pytest.raises(UploadError, match="no such file or directory"):
        plan(tmp_path / "absent", "gs://vtx-local-data/x")


def test_a_tree_to_the_bucket_root_keeps_relative_paths(tmp_path: Path) -> None:
    uploads = plan(_tree(tmp_path / "d"), "gs://b-1")
    assert [u.target for u in uploads] == [
        GcsUri("b-1", "shards/0.jsonl"),
        GcsUri("b-1", "shards/deep/1.jsonl"),
        GcsUri("b-1", "train.jsonl"),
    ]
