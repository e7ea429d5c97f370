"""The trainer's heartbeat: the protocol between `trainer/` and the controller's progress guards.

The chief (global rank 0) of every attempt writes one small JSON object,
``<run output prefix>progress/heartbeat.json``, every few seconds (``VTX_HEARTBEAT_S``, which the
compiler sets from the template's ``guard:``; 30 s when unset) and at each change of phase. One
object write: GCS object writes are atomic, so a reader sees the previous beat or the next,
never half of one. The controller reads it once per pass for each live run with a guard
(`jobs.control.driver`) and judges it (`jobs.control.reconcile`): no log query.

The trainer ships alone, so it keeps its own copy of these names
(`trainer.tracking.heartbeat`), pinned to this one by `tests/contracts/test_heartbeat.py`,
which also runs the trainer and parses the object it writes with `Heartbeat`.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from pydantic import BaseModel, ConfigDict

HEARTBEAT_OBJECT = "progress/heartbeat.json"
"""The heartbeat's object name under the run's output prefix (``gs://B/runs/<run id>/``)."""
HEARTBEAT_INTERVAL_ENV = "VTX_HEARTBEAT_S"
"""Seconds between two beats, as the trainer reads it from its environment."""
HEARTBEAT_DEFAULT_S = 30.0
"""The trainer's interval when the job does not set one."""
HEARTBEAT_VERSION = 1


class Phase(StrEnum):
    """What the chief is doing. Only ``training`` can be a hang: starting (loading the model,
    the data), restoring a checkpoint, evaluating, saving and exporting take as long as they
    take, and a guard does not count them."""

    STARTING = "starting"
    RESTORING = "restoring"
    TRAINING = "training"
    EVALUATING = "evaluating"
    SAVING = "saving"
    EXPORTING = "exporting"
    DONE = "done"


class Heartbeat(BaseModel):
    """One beat. Times are the writer's clock, UTC."""

    model_config = ConfigDict(extra="ignore", frozen=True, defer_build=True)

    version: int = HEARTBEAT_VERSION
    job: str | None = None
    """The attempt that wrote it (``CLOUD_ML_JOB_ID``, the CustomJob's id); None outside a
    job. A beat of an earlier attempt says nothing of the current one."""
    phase: Phase
    phase_since: datetime
    """When the chief entered ``phase``."""
    step: int
    """The optimizer steps done, counted across attempts (a resumed run goes on from its
    checkpoint's step)."""
    total_steps: int | None = None
    tokens: int = 0
    """Tokens trained on so far, across attempts."""
    tokens_per_s: float | None = None
    """Over the last ``window_s`` seconds of this attempt's steps; None before two steps."""
    window_s: float = 0.0
    stepped_at: datetime | None = None
    """When this attempt's last step finished; None before its first (a hang is counted from
    the first training step, never from the submission)."""
    time: datetime
    """When this beat was written."""
