"""TensorBoard through the reporters: where the events go, and one value per step after a resume."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.trainer.conftest import run_in_process, tiny_config
from trainer.checkpoint.store import step_dir


def _steps(log_dir: Path, tag: str) -> list[int]:
    """The steps TensorBoard's UI shows for `tag` (its plugin reader, which purges restarts)."""
    from tensorboard.backend.event_processing.plugin_event_accumulator import EventAccumulator

    events = EventAccumulator(str(log_dir))
    events.Reload()
    return [event.step for event in events.Tensors(tag)]


def test_events_go_to_aip_tensorboard_log_dir_and_a_resume_shows_each_step_once(
    tmp_path: Path, small_dataset: Path
) -> None:
    """A run dies after logging step 8 with step 4 its last commit (steps 6 and 8 are removed
    here as if never committed): the next attempt computes 5-8 again, and TensorBoard shows
    steps 1-8 once each."""
    board = tmp_path / "aip-logs"
    environ = {"AIP_TENSORBOARD_LOG_DIR": str(board)}
    cfg = tiny_config(
        str(small_dataset),
        str(tmp_path / "out"),
        max_steps=8,
        save_steps=2,
        save_total_limit=None,
        report_to=["tensorboard"],
    )
    assert run_in_process(cfg, environ) == 0
    assert _steps(board, "train/loss") == list(range(1, 9))
    assert not (tmp_path / "out" / "logs").exists()

    for step in (6, 8):
        shutil.rmtree(step_dir(str(tmp_path / "out" / "checkpoints"), step))
    shutil.rmtree(tmp_path / "out" / "model")
    assert run_in_process(cfg, environ) == 0
    assert len(list(board.glob("events.out.tfevents.*"))) == 2
    assert _steps(board, "train/loss") == list(range(1, 9))
    assert _steps(board, "train/lr") == list(range(1, 9))
