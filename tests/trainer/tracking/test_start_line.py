"""The trainer's first line in a job (`starting`, before torch loads), which the platform's
goodput timeline measures each start's imports and each restart's recovery from; none on a
person's terminal."""

from __future__ import annotations

import json

import pytest

from trainer.tracking.events import Event
from trainer.tracking.metrics import log_start


def test_a_job_logs_starting_with_its_rank_and_a_terminal_does_not(
    capsys: pytest.CaptureFixture[str],
) -> None:
    log_start({"CLOUD_ML_JOB_ID": "123", "RANK": "2"})
    (line,) = capsys.readouterr().out.splitlines()
    assert json.loads(line) | {"logger": None} == {
        "severity": "INFO",
        "message": Event.STARTING,
        "logger": None,
        "rank": 2,
    }
    log_start({})
    assert capsys.readouterr().out == ""
