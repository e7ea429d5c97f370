"""The messages of the trainer's progress lines, which the platform reads back (status, the
goodput timeline, the demo). The trainer ships alone, so this is its own copy of the platform's
protocol (`jobs.core.trainer_events`); `tests/contracts/test_trainer_events.py` pins the two
together and checks the fields the lines carry."""

from __future__ import annotations

from enum import StrEnum


class Event(StrEnum):
    """A progress line's `message` (what each carries: `jobs.core.trainer_events`)."""

    STARTING = "starting"
    TRAINING = "training"
    RESUMED = "resumed"
    TRAIN = "train"
    EVAL = "eval"
    CHECKPOINT_STARTED = "checkpoint started"
    CHECKPOINT_SAVED = "checkpoint saved"
    CHECKPOINT_COMMITTED = "checkpoint committed"
    DONE = "done"


STOP_PREFIX = "stop requested (SIGTERM)"
EARLY_STOP_PREFIX = "early stopping"
