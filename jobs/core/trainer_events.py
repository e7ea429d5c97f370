"""The trainer's progress lines: the protocol between `trainer/` and the platform's readers.

The trainer writes one JSON line per event (`{"severity", "message", ...fields}`, Cloud Logging's
structured form); status (`jobs.runs.watch`), the goodput timeline (`jobs.runs.goodput`) and the
demo's summary read them back by `message`. The trainer ships alone, so it keeps its own copy
(`trainer.tracking.events`), pinned to this one by `tests/contracts/test_trainer_events.py`, which
also runs the trainer and checks that the lines it writes carry the fields named here.
"""

from __future__ import annotations

from enum import StrEnum


class TrainerEvent(StrEnum):
    """A progress line's `message`."""

    STARTING = "starting"
    """The first line of every start of the program, before torch loads."""
    TRAINING = "training"
    """Every start, just before the first step: the step resumed from (0 when fresh)."""
    RESUMED = "resumed"
    """A start that restored a committed checkpoint: its step and the seconds the load took."""
    TRAIN = "train"
    """Every `logging_steps`: loss, tokens/s and the tokens seen so far."""
    EVAL = "eval"
    """An evaluation: its loss and seconds."""
    CHECKPOINT_STARTED = "checkpoint started"
    """A save began; `blocked_s`: what it held the step loop."""
    CHECKPOINT_SAVED = "checkpoint saved"
    """A save after a stop request (written before the process exits)."""
    CHECKPOINT_COMMITTED = "checkpoint committed"
    """Rank 0, once a checkpoint is complete and committed."""
    DONE = "done"
    """The final step is saved and the model exported."""


STOP_PREFIX = "stop requested (SIGTERM)"
"""The start of both stop lines: during a step and during start-up."""
EARLY_STOP_PREFIX = "early stopping"
"""The start of the line an early stop writes."""

FIELDS: dict[TrainerEvent, frozenset[str]] = {
    TrainerEvent.STARTING: frozenset(),
    TrainerEvent.TRAINING: frozenset({"step", "total_steps"}),
    TrainerEvent.RESUMED: frozenset({"step", "restore_s"}),
    TrainerEvent.TRAIN: frozenset({"step", "loss", "tokens_per_s", "tokens"}),
    TrainerEvent.EVAL: frozenset({"step", "eval_loss", "eval_s"}),
    TrainerEvent.CHECKPOINT_STARTED: frozenset({"step", "blocked_s"}),
    TrainerEvent.CHECKPOINT_SAVED: frozenset({"step", "blocked_s"}),
    TrainerEvent.CHECKPOINT_COMMITTED: frozenset({"step", "path"}),
    TrainerEvent.DONE: frozenset({"step"}),
}
"""The fields each event's line carries that some reader relies on (a line may carry more)."""

MEASURED: dict[TrainerEvent, str] = {
    TrainerEvent.RESUMED: "restore_s",
    TrainerEvent.CHECKPOINT_STARTED: "blocked_s",
    TrainerEvent.CHECKPOINT_SAVED: "blocked_s",
    TrainerEvent.EVAL: "eval_s",
}
"""An event -> the field holding the seconds it measured, just before its line was written."""
