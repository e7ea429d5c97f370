"""Vertex AI's job states (v1 ``JobState``) and which of them mean what: the one place a job's
state is judged (ended or not, waiting for machines or not), for CustomJobs and
HyperparameterTuningJobs alike, on Vertex and on the local platform.

The values are the v1 proto's, in its order; see
docs/vertex-facts.md, "Job states". A state may come as the REST name (``JOB_STATE_RUNNING``, as
the REST JSON writes it), as a ``JobState`` member, or as aiplatform's proto enum (which has
``.name``): aiplatform is not imported here, importing it takes seconds.

Trial states (``Trial.State``) and pipeline states (``PipelineState``) are other enums."""

from __future__ import annotations

from enum import StrEnum


class JobState(StrEnum):
    """Vertex v1's JobState, by the REST names (``JOB_STATE_...``), in the proto's order."""

    UNSPECIFIED = "JOB_STATE_UNSPECIFIED"
    QUEUED = "JOB_STATE_QUEUED"
    PENDING = "JOB_STATE_PENDING"
    RUNNING = "JOB_STATE_RUNNING"
    SUCCEEDED = "JOB_STATE_SUCCEEDED"
    FAILED = "JOB_STATE_FAILED"
    CANCELLING = "JOB_STATE_CANCELLING"
    CANCELLED = "JOB_STATE_CANCELLED"
    PAUSED = "JOB_STATE_PAUSED"
    EXPIRED = "JOB_STATE_EXPIRED"
    UPDATING = "JOB_STATE_UPDATING"
    PARTIALLY_SUCCEEDED = "JOB_STATE_PARTIALLY_SUCCEEDED"

    @property
    def final(self) -> bool:
        """Whether the job has ended (see ``FINAL``)."""
        return self in FINAL

    @property
    def short(self) -> str:
        """``succeeded`` for JOB_STATE_SUCCEEDED: how a log line or a summary says it."""
        return short(self)


FINAL = frozenset(
    {
        JobState.SUCCEEDED,
        JobState.FAILED,
        JobState.CANCELLED,
        JobState.EXPIRED,
        JobState.PARTIALLY_SUCCEEDED,
    }
)
"""The job has ended and will not change again: nothing to wait for, its machines are released
(CANCELLING, PAUSED and UPDATING are on the way somewhere else: CANCELLING ends SUCCEEDED,
FAILED or CANCELLED; PAUSED can be resumed; UPDATING goes back to RUNNING)."""
WAITING = frozenset({JobState.UNSPECIFIED, JobState.QUEUED, JobState.PENDING})
"""Before the job has its machines (waiting for capacity): what a ladder rung's ``max_wait``
bounds. UNSPECIFIED counts: a job just created may not show a state yet."""
PLACED = frozenset({JobState.RUNNING, JobState.SUCCEEDED})
"""The job got its machines: it runs, or it ran to the end."""


def rest_name(state: object) -> str:
    """The REST name (``JOB_STATE_RUNNING``) of a state given as a REST name, a ``JobState`` or
    aiplatform's proto enum (duck-typed on ``.name``); anything else as ``str`` gives it."""
    if isinstance(state, str):  # a JobState member too: str() gives its value
        return str(state)
    name = getattr(state, "name", None)
    return name if isinstance(name, str) else str(state)


def job_state(state: object) -> JobState | None:
    """The ``JobState`` of a state given as ``rest_name`` takes it; None for a name v1 lacks."""
    try:
        return JobState(rest_name(state))
    except ValueError:
        return None


def is_final(state: object) -> bool:
    """Whether a job in ``state`` has ended (``FINAL``); a name v1 lacks has not."""
    return job_state(state) in FINAL


def is_waiting(state: object) -> bool:
    """Whether a job in ``state`` still waits for its machines (``WAITING``)."""
    return job_state(state) in WAITING


def is_placed(state: object) -> bool:
    """Whether a job in ``state`` got its machines (``PLACED``)."""
    return job_state(state) in PLACED


def succeeded(state: object) -> bool:
    """Whether a job in ``state`` ended well (PARTIALLY_SUCCEEDED did not: results may be
    missing)."""
    return job_state(state) is JobState.SUCCEEDED


def short(state: object) -> str:
    """``succeeded`` for JOB_STATE_SUCCEEDED, ``partially_succeeded`` for
    JOB_STATE_PARTIALLY_SUCCEEDED: the REST name without its prefix, in lower case."""
    return rest_name(state).removeprefix("JOB_STATE_").lower()


def bare_name(state: object) -> str:
    """``SUCCEEDED`` for JOB_STATE_SUCCEEDED: the REST name without its prefix, as tables and
    messages show it."""
    return rest_name(state).removeprefix("JOB_STATE_")
