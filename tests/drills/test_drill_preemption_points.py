"""Drill: 20 seeded random preemption points across one training run, each resumed exactly.

A Spot VM's SIGTERM can land after any step: right after an async checkpoint started, while one
is still uploading, mid-epoch, or (gradient accumulation 3 over 4 batches per epoch) in a step
that straddles an epoch boundary. The run below is stopped at 20 seeded points in turn, each
time restarting from what it wrote, as Vertex restarts a preempted job.

Cost: stopping one run 20 times costs one run plus 20 restarts, where 20 separate
stop-and-resume runs would cost 20 runs. What that chaining could hide is checked point by
point: the checkpoint written at each stop holds the same model and optimizer tensors as the
undisturbed run's checkpoint of that step, the restart resumes from exactly that step, and the
final parameters are bit-identical to the undisturbed run's.

The trainer's own fault hook delivers the SIGTERM to this process right after the chosen step
(its handler only sets a flag, so where inside a step a real signal lands does not matter).
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from drill_support import (
    assert_bit_identical,
    checkpoint_tensors,
    committed_steps,
    drill_config,
    final_weights,
    resumed_from,
    run_in_process,
    write_small_dataset,
)

from trainer.checkpoint.store import step_dir
from trainer.training.loop import EXIT_PREEMPTED, SIGTERM_AFTER_STEP_ENV

SEED = 20261122
MAX_STEPS = 24
POINTS = sorted(random.Random(SEED).sample(range(1, MAX_STEPS), 20))
# Accumulation 3 over 4 batches per epoch: most steps read across an epoch boundary.
COMMON = {"max_steps": MAX_STEPS, "gradient_accumulation_steps": 3, "save_total_limit": None}


@pytest.mark.slow(cost_s=30)
def test_twenty_seeded_preemptions_each_resume_exactly(tmp_path, monkeypatch, capsys):
    dataset = write_small_dataset(tmp_path)
    reference = tmp_path / "undisturbed"
    # Checkpoints at every step, kept: the yardstick for each stop's checkpoint.
    assert run_in_process(drill_config(str(dataset), str(reference), save_steps=1, **COMMON)) == 0

    run = tmp_path / "preempted"
    cfg = drill_config(str(dataset), str(run), save_steps=4, **COMMON)
    resume_step = None
    for point in POINTS:
        monkeypatch.setenv(SIGTERM_AFTER_STEP_ENV, str(point))
        capsys.readouterr()
        assert run_in_process(cfg) == EXIT_PREEMPTED, f"stop at step {point}"
        assert resumed_from(capsys.readouterr().out) == resume_step, f"stop at step {point}"
        assert committed_steps(run / "checkpoints")[-1] == point
        assert not (run / "model").exists()
        written = checkpoint_tensors(Path(step_dir(str(run / "checkpoints"), point)), tmp_path)
        expected = checkpoint_tensors(
            Path(step_dir(str(reference / "checkpoints"), point)), tmp_path
        )
        assert_bit_identical(expected, written)
        resume_step = point

    monkeypatch.delenv(SIGTERM_AFTER_STEP_ENV)
    capsys.readouterr()
    assert run_in_process(cfg) == 0
    assert resumed_from(capsys.readouterr().out) == POINTS[-1]
    assert_bit_identical(final_weights(str(reference / "model")), final_weights(str(run / "model")))
