"""A replica made to hang or to crawl, for drills of the controller's progress guards
(`vtx local stall|slow`). Both work from outside the program, as a real hang does: no trainer
code is asked to cooperate, so any container command can be drilled.

- stall: SIGSTOP to every process of the replica (its runner and all their descendants: torch's
  elastic agent starts its workers in sessions of their own, out of the runner's process
  group). The processes stay alive, hold their ports and memory, and make no further step,
  write no further heartbeat: what a replica stuck in a collective or on a dead device looks
  like from the job's side.
- slow: the same signals in a duty cycle (SIGCONT for 1/factor of every second, SIGSTOP for
  the rest), so the replica runs about ``factor`` times slower.

A stalled or slowed replica is let go (SIGCONT) before any SIGTERM or SIGKILL the platform
sends it (cancel, preemption, timeout): a stopped process would not act on a SIGTERM, and a
worker in a session of its own would outlive its runner's SIGKILL, stopped forever."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable

import psutil

SLOW_PERIOD_S = 1.0
"""One duty cycle of a slowed replica."""


def replica_processes(pid: int) -> list[psutil.Process]:
    """The runner ``pid`` and every descendant, deepest first (so none runs on while its parent
    is stopped, or stops before it)."""
    try:
        root = psutil.Process(pid)
        return [*reversed(root.children(recursive=True)), root]
    except psutil.NoSuchProcess:
        return []


def signal_processes(pid: int, sig: signal.Signals) -> int:
    """Send ``sig`` to the replica's processes; how many got it."""
    sent = 0
    for proc in replica_processes(pid):
        try:
            os.kill(proc.pid, sig)
            sent += 1
        except ProcessLookupError:
            continue
    return sent


class SlowDown(threading.Thread):
    """The duty cycle of one slowed replica, while ``still`` says so (checked under the
    executor's ``lock`` before each SIGSTOP, so a stop request that let the replica go is never
    undone)."""

    def __init__(
        self, pid: int, factor: float, lock: threading.RLock, still: Callable[[], bool]
    ) -> None:
        super().__init__(name=f"vtx-slow-{pid}", daemon=True)
        self.pid, self.factor, self.lock, self.still = pid, factor, lock, still
        self.halt = threading.Event()

    def run(self) -> None:
        running_s = SLOW_PERIOD_S / self.factor
        while not self.halt.is_set():
            with self.lock:
                if not self.still():
                    return
                signal_processes(self.pid, signal.SIGSTOP)
            self.halt.wait(SLOW_PERIOD_S - running_s)
            signal_processes(self.pid, signal.SIGCONT)
            self.halt.wait(running_s)
