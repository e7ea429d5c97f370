"""The chief's heartbeat writer: what a beat says, its phases, its windowed tokens/s, an atomic
local write, and a storage failure that never reaches training (logged once)."""

from __future__ import annotations

import json
import logging
import threading
from pathlib import Path

import pytest

from tests.conftest import HANG_S
from trainer.tracking.heartbeat import (
    HEARTBEAT_OBJECT,
    Heartbeat,
    Phase,
    heartbeat_path,
    interval_from,
)


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def test_the_heartbeat_sits_in_the_runs_output_prefix() -> None:
    assert heartbeat_path("gs://b/runs/r1/checkpoints/") == f"gs://b/runs/r1/{HEARTBEAT_OBJECT}"
    assert heartbeat_path("/tmp/out/checkpoints") == f"/tmp/out/{HEARTBEAT_OBJECT}"


def test_the_interval_comes_from_the_environment_with_a_floor() -> None:
    assert interval_from({}) == 30.0
    assert interval_from({"VTX_HEARTBEAT_S": "2.5"}) == 2.5
    assert interval_from({"VTX_HEARTBEAT_S": "0"}) == 0.2
    assert interval_from({"VTX_HEARTBEAT_S": "soon"}) == 30.0


def test_a_beat_says_the_phase_the_step_and_tokens_per_s_over_the_window() -> None:
    clock = Clock()
    beat = Heartbeat("unused", "123", 30.0, enabled=False, clock=clock)
    beat.enabled = True  # no thread: the snapshot alone
    beat.phase(Phase.TRAINING, step=10, total_steps=100, tokens=5000)
    first = beat.snapshot()
    assert first["phase"] == "training" and first["step"] == 10 and first["tokens"] == 5000
    assert first["stepped_at"] is None and first["tokens_per_s"] is None
    for _ in range(3):
        clock.now += 2.0
        beat.stepped(beat._state["step"] + 1, beat._state["tokens"] + 400)
    said = beat.snapshot()
    assert said["step"] == 13 and said["tokens"] == 6200
    assert said["tokens_per_s"] == 200.0 and said["window_s"] == 4.0
    assert said["stepped_at"] == said["time"] and said["job"] == "123"
    clock.now += 1.0  # up to the beat: a second without a step lowers the rate
    assert beat.snapshot()["tokens_per_s"] == 160.0
    clock.now += 99.0  # the window starts at the newest sample before it
    beat.stepped(14, 6600)
    clock.now += 1.0
    beat.stepped(15, 7000)
    assert beat.snapshot()["tokens_per_s"] == round(800 / 101, 3)
    clock.now += 600.0  # the loop hangs, the thread beats on: 0 tokens/s
    said = beat.snapshot()
    assert said["tokens_per_s"] == 0.0 and said["window_s"] == 600.0


def test_the_thread_writes_at_once_on_a_phase_change_and_atomically(tmp_path: Path) -> None:
    path = str(tmp_path / "run" / HEARTBEAT_OBJECT)
    beat = Heartbeat(path, None, interval_s=3600.0)
    try:
        beat.phase(Phase.TRAINING, step=3)
        pause = threading.Event()
        for _ in range(int(HANG_S / 0.05)):
            text = Path(path).read_text() if Path(path).exists() else ""
            if text and json.loads(text)["phase"] == "training":
                break
            pause.wait(0.05)
        assert json.loads(Path(path).read_text())["step"] == 3
    finally:
        beat.close(Phase.DONE)
    assert json.loads(Path(path).read_text())["phase"] == "done"
    assert [p.name for p in Path(path).parent.iterdir()] == ["heartbeat.json"]  # no partials


def test_a_failing_store_is_logged_once_and_training_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    calls: list[str] = []

    def broken(path: str, data: bytes) -> None:
        calls.append(path)
        raise OSError("403 Forbidden")

    beat = Heartbeat("gs://b/runs/r/progress/heartbeat.json", None, 3600.0, write=broken)
    with caplog.at_level(logging.WARNING):
        beat.phase(Phase.TRAINING)
        beat.stepped(1, 10)
        beat.close(Phase.DONE)
    assert len(calls) >= 2
    warnings = [r for r in caplog.records if "heartbeat not written" in r.getMessage()]
    assert len(warnings) == 1 and "403 Forbidden" in warnings[0].getMessage()


def test_other_ranks_write_nothing() -> None:
    def never(path: str, data: bytes) -> None:
        raise AssertionError("written")

    beat = Heartbeat("x", None, 0.2, enabled=False, write=never)
    beat.phase(Phase.TRAINING)
    beat.stepped(1, 1)
    beat.close(Phase.DONE)
