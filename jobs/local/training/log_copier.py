"""Copies replica output into the store, where `vtx logs` pages through it.

Each replica's runner writes one JSON line per output line (``{"ts", "m"}``) to its log file;
whole lines are copied from the last offset, and the offset moves in the same transaction as
the lines, so a control-plane crash neither loses nor repeats a line. The platform's own events
(starts, exits, restarts) go in as the replica ``service``, like Vertex's service entries.
"""

from __future__ import annotations

import json
import logging

from jobs.core.formats import now_rfc3339
from jobs.local.platform.store import Store

log = logging.getLogger(__name__)

SERVICE = "service"


class LogCopier:
    def __init__(self, store: Store) -> None:
        self.store = store
        self._offsets: dict[str, int] = {}
        """Log file -> bytes copied so far (the store holds it too, for a restart)."""

    def copy(self, path: str, job_id: str, run_id: str | None, replica: str, restart: int) -> None:
        """Copy the whole lines written to ``path`` (by ``replica``'s ``restart``, 0 for its
        first start) since the last call."""
        offset = self._offsets.get(path)
        if offset is None:
            offset = self.store.log_offset(path)
        try:
            with open(path, "rb") as handle:
                handle.seek(offset)
                data = handle.read()
        except FileNotFoundError:
            return
        end = data.rfind(b"\n") + 1  # only whole lines; the rest is still being written
        if end == 0:
            return
        lines = []
        for raw in data[:end].splitlines():
            try:
                item = json.loads(raw)
                lines.append((item["ts"], item["m"]))
            except (ValueError, KeyError):
                lines.append((now_rfc3339(), raw.decode("utf-8", errors="replace")))
        self._offsets[path] = offset + end
        self.store.add_log_lines(path, offset + end, job_id, run_id, replica, restart, lines)

    def service(self, job_id: str, run_id: str | None, message: str) -> None:
        """A platform event, shown in `vtx logs` like Vertex's own service entries (no replica,
        so no restart of one)."""
        log.info("%s: %s", job_id, message)
        self.store.add_log_lines(None, 0, job_id, run_id, SERVICE, None, [(now_rfc3339(), message)])
