"""The trainer's progress lines against the protocol its readers use (`jobs.core.trainer_events`):
the trainer's own copy of the names (`trainer.tracking.events`), and the lines a real run writes
carrying the fields status, the goodput timeline and the demo read."""

from __future__ import annotations

from pathlib import Path

import pytest

from jobs.core import trainer_events as protocol
from tests.trainer.conftest import (
    read_json_lines,
    run_in_process,
    tiny_config,
    write_small_dataset,
)
from trainer.tracking import events as trainer_copy
from trainer.training.loop import SIGTERM_AFTER_STEP_ENV


def test_the_trainer_names_every_event_as_the_platform_does() -> None:
    ours = {e.name: e.value for e in trainer_copy.Event}
    platform = {e.name: e.value for e in protocol.TrainerEvent}
    assert ours == platform
    assert trainer_copy.STOP_PREFIX == protocol.STOP_PREFIX
    assert trainer_copy.EARLY_STOP_PREFIX == protocol.EARLY_STOP_PREFIX
    assert set(protocol.FIELDS) == set(protocol.TrainerEvent)  # every event says what it carries


def test_a_run_writes_every_event_with_the_fields_its_readers_use(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A run stopped by SIGTERM after step 5 (its save), then resumed to its end with evals:
    every event but the start line, which only a job's process writes."""
    cfg = tiny_config(
        str(write_small_dataset(tmp_path)),
        str(tmp_path / "run"),
        max_steps=8,
        save_steps=4,
        eval_steps=2,
        **{"data.eval_fraction": 0.2},
    )
    monkeypatch.setenv(SIGTERM_AFTER_STEP_ENV, "5")
    assert run_in_process(cfg) != 0
    monkeypatch.delenv(SIGTERM_AFTER_STEP_ENV)
    assert run_in_process(cfg) == 0
    lines = read_json_lines(capsys.readouterr().out)
    seen = {protocol.TrainerEvent(line["message"]) for line in lines if _is_event(line)}
    assert seen == set(protocol.TrainerEvent) - {protocol.TrainerEvent.STARTING}
    for line in lines:
        if _is_event(line):
            missing = protocol.FIELDS[line["message"]] - line.keys()
            assert not missing, (line["message"], missing)
    assert any(line["message"].startswith(protocol.STOP_PREFIX) for line in lines)


def _is_event(line: dict) -> bool:
    return line.get("message") in {e.value for e in protocol.TrainerEvent}
