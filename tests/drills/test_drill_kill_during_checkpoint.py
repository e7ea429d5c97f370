"""Drill: 10 SIGKILLs while a checkpoint is being written; the previous committed one is used.

One run is killed 10 times, each time while writing a later checkpoint (steps 4, 6, ... 22)
at a seeded point: after a random number of bytes of its shard or `.metadata` (a truncated
file on disk), or with all data written but no commit marker. After each kill the half-written
step must be uncommitted and the one before it committed; the next attempt must resume from
that previous step (never from the broken one), and the run must end bit-identical to one
that was never killed. One of the before-marker kills hits a blocking save (`async_save: false`:
the loop's own save commits), the other a background save's commit. Every attempt is a real
process (SIGKILL cannot be survived in-process), forked from a server that has torch imported
already.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from drill_crash_child import KillPlan, forkserver, run_child
from drill_support import (
    assert_bit_identical,
    committed_steps,
    drill_config,
    final_weights,
    read_json_lines,
    resumed_from,
    write_small_dataset,
)

from trainer.checkpoint.store import MARKER, step_dir
from trainer.tracking.events import Event

SEED = 7_2026
SAVE_STEPS = 2
KILLED_STEPS = [SAVE_STEPS * (i + 2) for i in range(10)]  # 4, 6, ..., 22
MAX_STEPS = KILLED_STEPS[-1] + SAVE_STEPS
BEFORE_COMMIT = {3, 8}  # attempts killed with every byte written, just before the marker
BLOCKING = {3}  # attempts that save in the loop (async_save false) rather than in the background
SIGKILLED = -9  # multiprocessing's exit code for death by SIGKILL


def kill_plans(checkpoint_bytes: int) -> list[KillPlan]:
    """Seeded offsets inside the first 95% of a checkpoint's bytes (each step writes about the
    same amount, so every offset is reached) plus the before-commit cases."""
    rng = random.Random(SEED)
    return [
        KillPlan(step, None if i in BEFORE_COMMIT else rng.randrange(int(0.95 * checkpoint_bytes)))
        for i, step in enumerate(KILLED_STEPS)
    ]


def test_kills_mid_checkpoint_resume_from_the_previous_committed_one(tmp_path: Path) -> None:
    ctx = forkserver()
    dataset = write_small_dataset(tmp_path)
    common = {"max_steps": MAX_STEPS, "save_steps": SAVE_STEPS, "save_total_limit": 2}

    reference = tmp_path / "undisturbed"
    cfg = drill_config(str(dataset), str(reference), **common)
    assert run_child(ctx, cfg, str(tmp_path / "undisturbed.log"), None) == 0
    sample = Path(step_dir(str(reference / "checkpoints"), MAX_STEPS))
    checkpoint_bytes = sum(p.stat().st_size for p in sample.iterdir() if p.name != MARKER)

    run = tmp_path / "killed"
    checkpoints = run / "checkpoints"
    cfg = drill_config(str(dataset), str(run), **common)
    blocking = {**cfg, "async_save": False}  # not part of what a checkpoint records
    previous: int | None = None
    for attempt, plan in enumerate(kill_plans(checkpoint_bytes)):
        log = tmp_path / f"attempt-{attempt}.log"
        where = f"attempt {attempt} ({plan}); log {log}"
        attempt_cfg = blocking if attempt in BLOCKING else cfg
        assert run_child(ctx, attempt_cfg, str(log), plan) == SIGKILLED, where
        assert resumed_from(log.read_text()) == previous, where
        broken = Path(step_dir(str(checkpoints), plan.step))
        assert broken.is_dir() and not (broken / MARKER).exists(), where
        assert committed_steps(checkpoints)[-1] == plan.step - SAVE_STEPS, where
        if plan.after_bytes is None:  # the loop logs a save as started once its call returns
            returned = plan.step in _started_saves(log.read_text())
            assert returned == (attempt not in BLOCKING), where
        previous = plan.step - SAVE_STEPS

    log = tmp_path / "final.log"
    assert run_child(ctx, cfg, str(log), None) == 0, f"log {log}"
    assert resumed_from(log.read_text()) == previous
    assert_bit_identical(final_weights(str(reference / "model")), final_weights(str(run / "model")))
    leftovers = [p.name for p in checkpoints.iterdir() if not (p / MARKER).exists()]
    assert leftovers == [], "uncommitted checkpoint directories were left behind"


def _started_saves(log_text: str) -> list[int]:
    return [
        int(e["step"])
        for e in read_json_lines(log_text)
        if e.get("message") == Event.CHECKPOINT_STARTED
    ]


@pytest.mark.parametrize("after_bytes", [0, 1000])
def test_kill_plan_really_kills_inside_the_write(tmp_path: Path, after_bytes: int) -> None:
    """The drill's own instrument: a plan kills the process during the chosen step's write,
    leaving at most `after_bytes` bytes of it on disk."""
    ctx = forkserver()
    dataset = write_small_dataset(tmp_path)
    cfg = drill_config(str(dataset), str(tmp_path), max_steps=4, save_steps=2)
    plan = KillPlan(step=2, after_bytes=after_bytes)
    assert run_child(ctx, cfg, str(tmp_path / "log"), plan) == SIGKILLED
    written = Path(step_dir(str(tmp_path / "checkpoints"), 2))
    assert sum(p.stat().st_size for p in written.iterdir()) == after_bytes
    assert committed_steps(tmp_path / "checkpoints") == []
