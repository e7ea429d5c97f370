"""Reads what W&B's offline mode wrote: the `.wandb` transaction log of each run directory.

wandb 0.31 ships no Python reader for it (the `wandb.sdk.internal.datastore` of older releases
is gone: the Go core writes it now), so this is the file's documented shape: a 7-byte header
(`:W&B`, magic 0xBEE1, version 0), then LevelDB log blocks of 32 KiB holding `Record` protos
(`wandb.proto.wandb_internal_pb2`), each split into FULL or FIRST/MIDDLE/LAST chunks behind a
7-byte chunk header (crc32c, length, type)."""

from __future__ import annotations

import json
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BLOCK = 32 * 1024
HEADER = struct.Struct("<4sHB")
CHUNK = struct.Struct("<IHB")
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


def records(path: Path) -> Iterator[Any]:
    from wandb.proto import wandb_internal_pb2

    data = path.read_bytes()
    ident, magic, version = HEADER.unpack_from(data)
    assert (ident, magic, version) == (b":W&B", 0xBEE1, 0), path
    pos, pending = HEADER.size, b""
    while pos + CHUNK.size <= len(data):
        left = BLOCK - pos % BLOCK
        if left < CHUNK.size:  # a block's tail too short for a chunk header is padding
            pos += left
            continue
        _, length, kind = CHUNK.unpack_from(data, pos)
        pos += CHUNK.size
        if kind == 0:  # zero padding up to the block's end
            pos += left - CHUNK.size
            continue
        pending += data[pos : pos + length]
        pos += length
        if kind in (FULL, LAST):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            yield record
            pending = b""


@dataclass
class OfflineRun:
    """One offline run directory: one attempt of a run."""

    run_id: str = ""
    project: str = ""
    config: dict[str, Any] = field(default_factory=dict)
    history: list[dict[str, Any]] = field(default_factory=list)
    stats: set[str] = field(default_factory=set)
    """The system figures W&B sampled (`cpu`, `memory_percent`, ...)."""
    exit_code: int | None = None


def read_run(path: Path) -> OfflineRun:
    run = OfflineRun()
    for record in records(path):
        kind = record.WhichOneof("record_type")
        if kind == "run":
            run.run_id, run.project = record.run.run_id, record.run.project
            run.config.update(
                {item.key: json.loads(item.value_json) for item in record.run.config.update}
            )
        elif kind == "config":
            run.config.update(
                {item.key: json.loads(item.value_json) for item in record.config.update}
            )
        elif kind == "history":
            run.history.append(
                {
                    item.key or "/".join(item.nested_key): json.loads(item.value_json)
                    for item in record.history.item
                }
            )
        elif kind == "stats":
            run.stats.update(item.key for item in record.stats.item)
        elif kind == "exit":
            run.exit_code = record.exit.exit_code
    return run


def offline_runs(wandb_dir: Path) -> list[OfflineRun]:
    """Every attempt under `WANDB_DIR`, oldest first (directories are named by start time)."""
    paths = sorted(wandb_dir.glob("wandb/offline-run-*/run-*.wandb"), key=lambda p: p.parent.name)
    return [read_run(path) for path in paths]
