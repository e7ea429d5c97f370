"""A training process that can be SIGKILLed at a chosen byte of a chosen checkpoint.

A machine that dies mid-write leaves whatever bytes reached the disk: a truncated shard, a
missing `.metadata`, or complete data without its commit marker. `KillPlan` picks one of those
by byte offset; the child wraps DCP's fsspec streams so that, once that many bytes of the
chosen step's files are written, it flushes them and sends itself SIGKILL (no cleanup runs,
exactly like a lost VM). Offsets past the data fall back to the trainer's own hook, which
kills after the data is written and before the marker.

Children come from a forkserver that imported torch and transformers once, so each of the
drill's attempts starts in a fraction of a second instead of several seconds.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

PRELOAD = [
    "torch",
    "transformers",
    "transformers.models.llama.modeling_llama",
    "trainer.training.loop",
]


@dataclass(frozen=True)
class KillPlan:
    step: int
    """The checkpoint whose write is interrupted."""
    after_bytes: int | None
    """SIGKILL once this many bytes of that checkpoint are written; None: after all of its
    data, just before the commit marker."""


class _KillingStream:
    """Delegates to a DCP output stream; dies once the shared byte budget is spent."""

    def __init__(self, stream: Any, budget: list[int]) -> None:
        self._stream, self._budget = stream, budget

    def write(self, data: Any) -> int:
        view = memoryview(data).cast("B")
        if len(view) < self._budget[0]:
            self._budget[0] -= len(view)
            return self._stream.write(data)
        self._stream.write(view[: self._budget[0]])
        self._stream.flush()
        os.fsync(self._stream.fileno())  # what reached the disk stays there, as after a crash
        os.kill(os.getpid(), signal.SIGKILL)
        raise AssertionError("unreachable: SIGKILL was sent")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _arm(plan: KillPlan) -> None:
    from torch.distributed.checkpoint import _fsspec_filesystem

    from trainer.checkpoint.store import KILL_BEFORE_COMMIT_ENV, STEP_PREFIX

    if plan.after_bytes is None:
        os.environ[KILL_BEFORE_COMMIT_ENV] = str(plan.step)
        return
    marker = f"{STEP_PREFIX}{plan.step:09d}"
    budget = [plan.after_bytes]
    original = _fsspec_filesystem.FileSystem.create_stream

    @contextlib.contextmanager
    def create_stream(self: Any, path: Any, mode: str) -> Iterator[Any]:
        with original(self, path, mode) as stream:
            if marker in os.fspath(path) and "w" in mode:
                yield _KillingStream(stream, budget)
            else:
                yield stream

    _fsspec_filesystem.FileSystem.create_stream = create_stream


def child_main(cfg: dict[str, Any], log_path: str, plan: KillPlan | None) -> None:
    """Entry point in the forked child: logs to `log_path`, exits with the trainer's code."""
    log = open(log_path, "w", buffering=1)  # noqa: SIM115 - lives until the process dies
    os.dup2(log.fileno(), 1)
    os.dup2(log.fileno(), 2)
    sys.stdout = sys.stderr = log
    if plan is not None:
        _arm(plan)
    from drill_support import run_in_process

    sys.exit(run_in_process(cfg))


def forkserver() -> multiprocessing.context.ForkServerContext:
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(PRELOAD)
    return ctx


def run_child(
    ctx: multiprocessing.context.ForkServerContext,
    cfg: dict[str, Any],
    log_path: str,
    plan: KillPlan | None,
    timeout_s: float = 300.0,
) -> int:
    """Run one attempt; returns its exit code (negative: killed by that signal)."""
    proc = ctx.Process(target=child_main, args=(cfg, log_path, plan))
    proc.start()
    proc.join(timeout_s)
    if proc.exitcode is None:  # hung: never expected, but never leave it behind
        proc.kill()
        proc.join()
        raise AssertionError(f"training attempt hung for {timeout_s} s; log: {log_path}")
    return proc.exitcode
