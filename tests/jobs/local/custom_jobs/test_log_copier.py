"""The runner's cut of long output lines and the copier's bounded rounds, on files: every line
copied in order and none twice, however the file was written."""

from __future__ import annotations

import io
import json
from pathlib import Path

from jobs.local.custom_jobs.log_copier import CHUNK_BYTES, LogCopier, Source
from jobs.local.custom_jobs.replica_runner import CUT_MARK, ENTRY_BYTES, output_lines
from jobs.local.platform.store import Store


def test_output_lines_are_cut_at_an_entry_and_the_rest_of_the_line_dropped() -> None:
    stream = io.BytesIO(
        b"a" * ENTRY_BYTES
        + b"\n"  # exactly an entry: whole
        + b"b" * (ENTRY_BYTES + 1)
        + b"\n"  # one byte more: cut
        + b"c" * (5 * ENTRY_BYTES)
        + b"\n"
        + b"after\n"
        + b"last, without a newline"
    )
    assert list(output_lines(stream)) == [
        "a" * ENTRY_BYTES,
        "b" * ENTRY_BYTES + CUT_MARK,
        "c" * ENTRY_BYTES + CUT_MARK,
        "after",
        "last, without a newline",
    ]


def record(message: str) -> bytes:
    return json.dumps({"ts": "2026-01-01T00:00:00.000000Z", "m": message}).encode() + b"\n"


def copied(store: Store, job_id: str) -> list[str]:
    return [e.message for e in store.read_logs(run_id=None, job_id=job_id, cursor=0, limit=10**6)]


def test_a_round_copies_at_most_a_chunk_of_a_file_and_later_rounds_the_rest(
    tmp_path: Path,
) -> None:
    store = Store(tmp_path / "jobs.sqlite")
    path = tmp_path / "workerpool0-0.0.log"
    messages = [f"{i:06d}" for i in range(3 * CHUNK_BYTES // len(record("000000")))]
    path.write_bytes(b"".join(record(m) for m in messages))
    copier = LogCopier(store)
    copier.follow(Source(str(path), "job", None, "workerpool0-0", 0))

    assert copier.copy_round() is True  # more waits
    first = copied(store, "job")
    assert 0 < len(first) < len(messages) and first == messages[: len(first)]
    assert copier.end(str(path)) is True and copier.end(str(path)) is False
    rounds = 1
    while copier.pending("job"):
        copier.copy_round()
        rounds += 1
    assert copied(store, "job") == messages
    assert rounds >= 3
    # A copier started afresh (after a crash) goes on from the store's offset: nothing twice.
    again = LogCopier(store)
    again.follow(Source(str(path), "job", None, "workerpool0-0", 0, ended=True))
    again.copy_round()
    assert copied(store, "job") == messages


def test_a_line_longer_than_a_chunk_is_cut_and_a_dead_runners_last_bytes_kept(
    tmp_path: Path,
) -> None:
    store = Store(tmp_path / "jobs.sqlite")
    path = tmp_path / "workerpool0-0.0.log"
    # What a runner from before the cut wrote for a line of megabytes, then a torn record.
    path.write_bytes(
        record("before") + record("x" * CHUNK_BYTES) + record("after") + b'{"ts": "2026'
    )
    copier = LogCopier(store)
    copier.follow(Source(str(path), "job", None, "workerpool0-0", 0, ended=True))
    while copier.pending("job"):
        copier.copy_round()
    lines = copied(store, "job")
    assert lines[0] == "before"
    assert (
        lines[1]
        == ('{"ts": "2026-01-01T00:00:00.000000Z", "m": "' + "x" * ENTRY_BYTES)[:ENTRY_BYTES]
        + CUT_MARK
    )
    assert lines[-2:] == ["after", '{"ts": "2026']
