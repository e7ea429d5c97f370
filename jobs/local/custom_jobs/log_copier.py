"""Copies replica output into the store, where `vtx logs` pages through it.

Each replica's runner writes one JSON line per output line (``{"ts", "m"}``) to its log file
(jobs/local/custom_jobs/replica_runner.py); whole lines are copied from the last offset, and the
offset moves in the same transaction as the lines, so a control-plane crash neither loses nor
repeats a line. The platform's own events (starts, exits, restarts) go in as the replica
``service``, like Vertex's service entries.

The executor's thread calls ``copy_round`` between its ticks, outside its lock, and each round
copies at most ``CHUNK_BYTES`` of each file: a replica that prints without pause has its lines
delayed, never lost (the rest follows in later rounds), while creates, gets and lists answer
and the ticks stop replicas on time. A file is followed from its replica's start until its
replica ended and every line of it was copied.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass

from jobs.core.formats import now_rfc3339
from jobs.local.custom_jobs.replica_runner import CUT_MARK, ENTRY_BYTES, RECORD_BYTES_MAX
from jobs.local.platform.store import Store

log = logging.getLogger(__name__)

SERVICE = "service"
CHUNK_BYTES = RECORD_BYTES_MAX
"""The most of one file a round reads: any line the runner writes fits in it whole."""


@dataclass
class Source:
    """One replica's log file, and what its lines are tagged with in the store."""

    path: str
    job_id: str
    run_id: str | None
    replica: str
    restart: int
    """Which start of the replica wrote the file (0 its first)."""
    ended: bool = False
    """The replica's runner exited: the file grows no more."""


class LogCopier:
    """Used by the executor's thread alone: its ticks follow and end files, and its copy
    rounds between them read them."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._sources: dict[str, Source] = {}
        self._offsets: dict[str, int] = {}
        """Log file -> bytes copied so far (the store holds it too, for a restart)."""

    def follow(self, source: Source) -> None:
        """Copy ``source`` from where the store says it was copied to, in every round."""
        self._sources[source.path] = source

    def end(self, path: str | None) -> bool:
        """Say that the replica writing ``path`` exited; whether this is news (the executor then
        waits for one copy round before it logs the exit, so the replica's last lines come
        before it)."""
        source = self._sources.get(path or "")
        if source is None or source.ended:
            return False
        source.ended = True
        return True

    def pending(self, job_id: str) -> bool:
        """Whether lines of the job's replicas may still be to copy."""
        return any(source.job_id == job_id for source in self._sources.values())

    def copy_round(self) -> bool:
        """Copy up to ``CHUNK_BYTES`` of the new lines of every file followed, and stop
        following those of ended replicas copied to their end; whether some file has more."""
        behind = False
        for source in list(self._sources.values()):
            behind |= self._copy(source)
        return behind

    def _copy(self, source: Source) -> bool:
        offset = self._offsets.get(source.path)
        if offset is None:
            offset = self.store.log_offset(source.path)
        data = self._read(source.path, offset)
        full = len(data) == CHUNK_BYTES
        end = data.rfind(b"\n") + 1  # only whole lines; the rest is still being written
        if end == 0 and full:
            # A line longer than any this runner writes (an older runner's): cut as the runner
            # cuts, the rest of the chunk skipped (and what follows it taken as a line of its own).
            end, lines = len(data), [(now_rfc3339(), self._cut(data))]
        else:
            if not full and source.ended:
                end = len(data)  # the runner died in the middle of its last line: keep it
            lines = [self._line(raw) for raw in data[:end].splitlines()]
        if end:
            self._offsets[source.path] = offset + end
            self.store.add_log_lines(
                source.path,
                offset + end,
                source.job_id,
                source.run_id,
                source.replica,
                source.restart,
                lines,
            )
        if source.ended and not full:
            self._sources.pop(source.path, None)
            self._offsets.pop(source.path, None)
        return full

    @staticmethod
    def _read(path: str, offset: int) -> bytes:
        try:
            with open(path, "rb") as handle:
                handle.seek(offset)
                return handle.read(CHUNK_BYTES)
        except FileNotFoundError:  # its runner has not opened it yet
            return b""

    @staticmethod
    def _line(raw: bytes) -> tuple[str, str]:
        try:
            item = json.loads(raw)
            return item["ts"], item["m"]
        except (ValueError, KeyError, TypeError):
            return now_rfc3339(), raw.decode("utf-8", errors="replace")

    @staticmethod
    def _cut(raw: bytes) -> str:
        return raw[:ENTRY_BYTES].decode("utf-8", errors="replace") + CUT_MARK

    def service(self, job_id: str, run_id: str | None, message: str) -> None:
        """A platform event, shown in `vtx logs` like Vertex's own service entries (no replica,
        so no restart of one)."""
        log.info("%s: %s", job_id, message)
        self.store.add_log_lines(None, 0, job_id, run_id, SERVICE, None, [(now_rfc3339(), message)])
