"""SIGTERM as a request, not a death: the flag the training loop turns into a collective stop.

Installed first thing in each worker (before the heavy imports), so a preemption that arrives
while the model is still loading is not lost: the loop sees it at its first check.
"""

from __future__ import annotations

import signal
from types import FrameType
from typing import Any


class StopRequest:
    def __init__(self) -> None:
        self.requested = False
        self._previous: Any = None

    def install(self) -> StopRequest:
        self._previous = signal.signal(signal.SIGTERM, self._handle)
        return self

    def uninstall(self) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGTERM, self._previous)
            self._previous = None

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.requested = True  # logging from a signal handler can deadlock; the loop logs
