"""Retrying Vertex calls: the backoff schedule, and creating a resource exactly once.

Vertex's create calls (CreateCustomJob, CreateHyperparameterTuningJob, UploadModel,
CreateEndpoint, DeployModel) are not idempotent, and a 503 can arrive after Vertex accepted the
call: a blind retry would start a second job writing the same checkpoint prefix, or a second
model version. So every create goes through ``create_once``, which before each retry asks
whether the first try landed after all."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(frozen=True)
class Backoff:
    """Retry schedule for transient errors (seconds); tests shrink it."""

    initial_s: float = 1.0
    maximum_s: float = 30.0
    multiplier: float = 2.0
    deadline_s: float = 300.0


def unavailable(exc: BaseException) -> bool:
    """A 503 from Vertex, raw or already explained (the explained error keeps it as its cause)."""
    from google.api_core import exceptions

    return isinstance(exc, exceptions.ServiceUnavailable) or isinstance(
        exc.__cause__, exceptions.ServiceUnavailable
    )


def create_once(
    send: Callable[[], T], landed: Callable[[], T | None], backoff: Backoff, what: str
) -> T:
    """``send()``; after a 503, wait and ask ``landed()`` whether it was created after all (that is
    then the answer), else send again, until ``backoff.deadline_s``. Any other error, and the
    last 503, propagate as raised."""
    delay_s, deadline = backoff.initial_s, time.monotonic() + backoff.deadline_s
    while True:
        try:
            return send()
        except Exception as exc:
            if not unavailable(exc) or time.monotonic() + delay_s > deadline:
                raise
            log.warning("transient Vertex error on %s, checking before retrying: %s", what, exc)
        time.sleep(delay_s)
        delay_s = min(delay_s * backoff.multiplier, backoff.maximum_s)
        found = landed()
        if found is not None:
            return found
