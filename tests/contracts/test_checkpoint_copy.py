"""jobs.runs.checkpoints keeps a copy of how the trainer names a committed checkpoint (the
``step-NNNNNNNNN`` folder and its ``COMMITTED`` marker), to list what a resume would choose from
without importing the trainer. Pinned here by behaviour: names the trainer writes, read back."""

from __future__ import annotations

from jobs.runs.checkpoints import committed_steps
from trainer.checkpoint.store import MARKER, step_dir

ROOT = "runs/r1/checkpoints"


def test_the_steps_the_trainer_commits_are_the_steps_jobs_lists() -> None:
    steps = [0, 10, 120, 999_999_999]
    written = [f"{step_dir(ROOT, step)}/{MARKER}" for step in steps]
    data = [f"{step_dir(ROOT, step)}/__0_0.distcp" for step in (*steps, 130)]
    uncommitted = [f"{step_dir(ROOT, 130)}/.metadata"]
    assert committed_steps([*data, *uncommitted, *reversed(written)], ROOT) == steps
