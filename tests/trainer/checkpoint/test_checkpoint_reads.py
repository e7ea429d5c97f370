"""How the trainer reads a checkpoint back from GCS: DCP unpickles tensors straight from the
stream in reads of a few bytes to a few KB, so the stream must fetch large blocks; gcsfs's default
cache sent one ranged GET per read (28 s to restore the tiny example from the local platform's
GCS, 0.17 s with blocks)."""

from __future__ import annotations

import os
import uuid

import fsspec
import pytest
from fsspec.caching import ReadAheadCache

from trainer.checkpoint.store import READ_BLOCK_BYTES, _CheckpointFileSystem


def _read_in_small_pieces(stream) -> bytes:
    pieces = []
    while piece := stream.read(2000):
        pieces.append(piece)
    return b"".join(pieces)


def test_a_remote_checkpoint_file_is_read_ahead_in_large_blocks(gcs_emulator: str) -> None:
    fs = fsspec.filesystem("gs", token="anon")
    bucket = f"vtx-ckpt-{uuid.uuid4().hex[:8]}"
    fs.mkdir(bucket)
    data = os.urandom(3 * 2**20 + 17)
    fs.pipe(f"{bucket}/step-000000001/__0_0.distcp", data)

    checkpoint_fs = _CheckpointFileSystem()
    checkpoint_fs.init_path(f"gs://{bucket}/step-000000001")
    with checkpoint_fs.create_stream(f"{bucket}/step-000000001/__0_0.distcp", "rb") as stream:
        assert isinstance(stream.cache, ReadAheadCache)
        assert stream.cache.blocksize == READ_BLOCK_BYTES
        assert _read_in_small_pieces(stream) == data


@pytest.mark.parametrize("mode", ["rb", "wb"])
def test_local_files_and_writes_keep_fsspecs_own_streams(tmp_path, mode: str) -> None:
    path = tmp_path / "__0_0.distcp"
    path.write_bytes(b"x" * 10)
    checkpoint_fs = _CheckpointFileSystem()
    checkpoint_fs.init_path(str(tmp_path))
    with checkpoint_fs.create_stream(path, mode) as stream:
        assert not hasattr(stream, "cache")  # a local file, as DCP's own backend opens it
