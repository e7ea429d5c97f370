"""The chief's heartbeat: ``<run output prefix>progress/heartbeat.json``, rewritten every few
seconds and at each change of phase, which the platform's controller reads to tell a hung run
from a slow start (the protocol: `jobs.core.heartbeat`; this is the trainer's own copy of its
names, pinned by `tests/contracts/test_heartbeat.py`).

Off the step's path: a step only records its number and tokens (a few assignments under a
lock); a daemon thread writes the newest state. A process that hangs (stopped, stuck in a
collective) stops stepping, so its ``stepped_at`` ages whether or not the thread still beats.
A failed write never fails training: it is logged once, and the next beat tries again.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

import fsspec
from fsspec.implementations.local import LocalFileSystem

log = logging.getLogger(__name__)

HEARTBEAT_OBJECT = "progress/heartbeat.json"
HEARTBEAT_INTERVAL_ENV = "VTX_HEARTBEAT_S"
HEARTBEAT_DEFAULT_S = 30.0
HEARTBEAT_VERSION = 1
RATE_WINDOW_S = 60.0
"""tokens/s is measured over the last minute of this attempt, up to the beat: it falls when
steps stop, so a loop that hangs while this thread beats shows 0."""
MIN_INTERVAL_S = 0.2


class Phase(StrEnum):
    STARTING = "starting"
    RESTORING = "restoring"
    TRAINING = "training"
    EVALUATING = "evaluating"
    SAVING = "saving"
    EXPORTING = "exporting"
    DONE = "done"


def heartbeat_path(checkpoint_dir: str) -> str:
    """Beside the checkpoints: ``AIP_CHECKPOINT_DIR`` is ``<prefix>checkpoints/`` (and a run
    outside a job keeps ``<output_dir>/checkpoints``), so the heartbeat lands in the run's
    output prefix whatever wrote the directory names."""
    root = checkpoint_dir.rstrip("/")
    parent = root.rsplit("/", 1)[0] if "/" in root else "."
    return f"{parent}/{HEARTBEAT_OBJECT}"


def interval_from(environ: Mapping[str, str]) -> float:
    raw = environ.get(HEARTBEAT_INTERVAL_ENV)
    try:
        value = float(raw) if raw else HEARTBEAT_DEFAULT_S
    except ValueError:
        log.warning(f"{HEARTBEAT_INTERVAL_ENV}={raw!r} is not a number of seconds; using 30")
        value = HEARTBEAT_DEFAULT_S
    return max(value, MIN_INTERVAL_S)


def _iso(at: float | None) -> str | None:
    return None if at is None else datetime.fromtimestamp(at, UTC).isoformat()


def write_object(path: str, data: bytes) -> None:
    """One object write: atomic on GCS; on a local disk, a rename over the old file."""
    fs, target = fsspec.core.url_to_fs(path)
    if isinstance(fs, LocalFileSystem):
        os.makedirs(os.path.dirname(target), exist_ok=True)
        partial = f"{target}.{os.getpid()}.tmp"
        with open(partial, "wb") as out:
            out.write(data)
        os.replace(partial, target)
        return
    fs.pipe_file(target, data)


class Heartbeat:
    """The chief's beat (``enabled`` False on every other rank: then every call is a no-op)."""

    def __init__(
        self,
        path: str,
        job: str | None,
        interval_s: float,
        enabled: bool = True,
        clock: Callable[[], float] = time.time,
        write: Callable[[str, bytes], None] = write_object,
    ) -> None:
        self.path, self.job, self.interval_s = path, job, interval_s
        self.enabled, self.clock, self.write = enabled, clock, write
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._failed = False
        now = clock()
        self._state: dict[str, Any] = {
            "phase": Phase.STARTING,
            "phase_since": now,
            "step": 0,
            "total_steps": None,
            "tokens": 0,
            "stepped_at": None,
        }
        self._samples: deque[tuple[float, int]] = deque()
        self._thread: threading.Thread | None = None
        if enabled:
            self._thread = threading.Thread(target=self._beat, name="vtx-heartbeat", daemon=True)
            self._thread.start()

    def phase(
        self,
        phase: Phase,
        step: int | None = None,
        total_steps: int | None = None,
        tokens: int | None = None,
    ) -> None:
        """A new phase, written at once (by the thread); where the run stands, when known."""
        if not self.enabled:
            return
        with self._lock:
            if self._state["phase"] != phase:
                self._state["phase"], self._state["phase_since"] = phase, self.clock()
            if step is not None:
                self._state["step"] = step
            if total_steps is not None:
                self._state["total_steps"] = total_steps
            if tokens is not None:
                self._state["tokens"] = tokens
        self._wake.set()

    def stepped(self, step: int, tokens: int) -> None:
        """A step finished: its number and the tokens so far (the step's whole cost here)."""
        if not self.enabled:
            return
        now = self.clock()
        with self._lock:
            self._state.update(step=step, tokens=tokens, stepped_at=now)
            self._samples.append((now, tokens))
            # One sample at or before the window's start stays: the rate's base.
            while len(self._samples) > 1 and now - self._samples[1][0] >= RATE_WINDOW_S:
                self._samples.popleft()

    def close(self, phase: Phase | None = None) -> None:
        """Stop the thread; write a last beat (in ``phase`` when given) from this thread."""
        if not self.enabled:
            return
        if phase is not None:
            with self._lock:
                self._state["phase"], self._state["phase_since"] = phase, self.clock()
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=max(10.0, self.interval_s))
            self._thread = None
        self._write_once()

    def snapshot(self) -> dict[str, Any]:
        """The beat as written (the protocol's field names)."""
        now = self.clock()
        with self._lock:
            state = dict(self._state)
            samples = list(self._samples)
        rate, window = None, 0.0
        if len(samples) >= 2:
            # From the newest sample at or before the window's start (else the oldest) to now.
            base = samples[0]
            for sample in samples:
                if now - sample[0] >= RATE_WINDOW_S:
                    base = sample
            window = now - base[0]
            rate = round((samples[-1][1] - base[1]) / window, 3) if window > 0 else None
        return {
            "version": HEARTBEAT_VERSION,
            "job": self.job,
            "phase": str(state["phase"]),
            "phase_since": _iso(state["phase_since"]),
            "step": state["step"],
            "total_steps": state["total_steps"],
            "tokens": state["tokens"],
            "tokens_per_s": rate,
            "window_s": round(window, 3),
            "stepped_at": _iso(state["stepped_at"]),
            "time": _iso(now),
        }

    def _beat(self) -> None:
        while not self._stop.is_set():
            self._write_once()
            self._wake.wait(self.interval_s)
            self._wake.clear()

    def _write_once(self) -> None:
        try:
            self.write(self.path, json.dumps(self.snapshot()).encode())
        except Exception as exc:  # any storage error: training goes on
            if not self._failed:
                self._failed = True
                log.warning(
                    f"heartbeat not written to {self.path} ({type(exc).__name__}: {exc}); "
                    "training goes on, a progress guard sees no beat from this attempt"
                )
