"""The goodput timeline's stall: an attempt a progress guard found hung (its record says when
it stopped stepping) spends the time from then to its stop line as a stall, with its dollars,
not as steps; without the guard's judgement the same lines read as steps and idle time."""

from __future__ import annotations

from datetime import timedelta

import pytest

from jobs.runs.goodput import goodput_of
from jobs.runs.watch import attempts_of
from jobs.vertex.job_records import JobRecord
from tests.jobs.runs.run_records import PARENT, STOP, T0, rest_job, trainer
from tests.jobs.runs.test_goodput import assert_tiles, seconds

JOB = f"{PARENT}/customJobs/1"
HUNG = [
    trainer("1", 15, "starting"),
    trainer("1", 25, "training", step=0, total_steps=1000),
    trainer("1", 35, "train", step=10, loss=3.0, tokens_per_s=100.0, tokens=1000),
    # step 12 ends at 40, then nothing: the guard cancels, the SIGTERM lands at 100
    trainer("1", 100, STOP, step=13),
    trainer("1", 102, "checkpoint saved", step=13, blocked_s=2.0),
]


def timeline(stalls: dict | None):
    job = rest_job("1", 0, "JOB_STATE_CANCELLED", started_s=10, ended_s=110)
    now = T0 + timedelta(seconds=1000)
    attempts = attempts_of([JobRecord.from_rest(job)], "us-central1", now)
    return goodput_of(attempts, HUNG, now, stalls)


def test_the_hang_is_a_stall_from_the_guards_judgement_to_the_stop_line() -> None:
    found = timeline({JOB: T0 + timedelta(seconds=40)})
    assert_tiles(found)
    assert seconds(found) == {
        "waiting": 10,
        "provisioning": 5,
        "startup": 10,
        "productive": 10 + 5,  # steps 1-10, then 11-13 up to the hang
        "stall": 60,  # 40 -> the stop line at 100
        "save": 2,
        "idle": 8,
    }
    stall = found.figure("stall")
    assert stall.usd == pytest.approx(found.figure("productive").usd * 60 / 15)
    assert stall.usd > 0 and found.badput[0].key == "stall"
    assert (found.steps_trained, found.unique_steps) == (13, 13)


def test_without_the_guards_judgement_the_lines_read_as_steps() -> None:
    found = timeline(None)
    assert found.figure("stall").seconds == 0
    assert seconds(found)["productive"] == pytest.approx(10 + 65)
