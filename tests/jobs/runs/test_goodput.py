"""The goodput timeline from job records and trainer-shaped lines, without a server: phases tile
the wall time, each category's seconds and dollars, steps computed again after a crash, a
capacity ladder's stocked-out rung as waiting, restarts as the local platform tags them, and
what stays unknown (a price, a token count) with its reason."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import timedelta
from itertools import pairwise

import pytest

from jobs.runs.goodput import CATEGORIES, Goodput
from tests.jobs.runs.run_records import (
    STOP,
    T0,
    goodput,
    preempted_once,
    rest_job,
    stamp,
    trainer,
)


def seconds(found: Goodput) -> dict[str, float]:
    return {f.key: pytest.approx(f.seconds) for f in found.categories if f.seconds}


def assert_tiles(found: Goodput) -> None:
    """Phases end to end, from the submission to the end, in every lane in turn."""
    phases = [p for a in found.attempts for p in a.phases]
    assert phases[0].start == found.submitted and phases[-1].end == found.ended
    for before, after in pairwise(phases):
        assert before.end == after.start
    assert sum(p.seconds for p in phases) == pytest.approx(found.wall_s)


def test_a_preempted_run_tiles_its_wall_time_into_the_trainers_phases() -> None:
    job = rest_job("1", 0, "JOB_STATE_SUCCEEDED", started_s=10, ended_s=100)
    found = goodput([job], preempted_once())

    assert_tiles(found)
    assert seconds(found) == {
        "waiting": 10,  # created -> running
        "provisioning": 5,  # running -> the first line
        "startup": 10 + 5 + 1,  # first line -> training, twice (the restore carved out)
        "restore": 3,
        "productive": 10 + 3 + 8,  # steps 1-10, 11-12 (ended by the stop line), 13-20
        "save": 2 + 2,  # a background save's stall, the stop's blocking save
        "recovery": 8,  # the last line before the restart -> its first line
        "eval": 1 + 2,
        "finish": 10,  # the final save and the export, up to done
        "idle": 20,  # done -> the job's end
    }
    assert (found.wall_s, found.paid_s, found.productive_s) == (100, 90, 21)
    assert (found.goodput, found.paid_goodput) == (pytest.approx(0.21), pytest.approx(21 / 90))
    assert (found.steps_trained, found.unique_steps, found.steps_lost) == (20, 20, 0)
    assert found.to_first_step_s == [27.0]  # the stop line -> the next train line
    (attempt,) = found.attempts
    assert attempt.preemptions == [T0 + timedelta(seconds=40)] and not attempt.moved_on
    assert [p.loss for p in found.points] == [3.0, 2.0]

    per_h = attempt.usd_per_h
    assert per_h  # three n1-standard-4 on demand in us-central1: the shipped catalog's
    usd = {f.key: f.usd for f in found.categories}
    assert usd["waiting"] == 0  # nobody pays for the queue
    assert usd["productive"] == pytest.approx(per_h * 21 / 3600)
    assert sum(u or 0 for u in usd.values()) == pytest.approx(found.usd)
    assert found.tokens == 2000 and found.tokens_per_usd == pytest.approx(2000 / found.usd)


def test_steps_trained_again_after_a_crash_are_work_lost() -> None:
    job = rest_job("1", 0, "JOB_STATE_SUCCEEDED", started_s=0, ended_s=50)
    entries = [
        trainer("1", 0, "training", step=0, total_steps=20),
        trainer("1", 10, "train", step=10, loss=3.0),
        trainer("1", 10, "checkpoint started", step=10, blocked_s=0.0),
        trainer("1", 15, "train", step=15, loss=2.5),  # then a crash: nothing saved
        trainer("1", 30, "resumed", step=10, restore_s=1.0),
        trainer("1", 31, "training", step=10, total_steps=20),
        trainer("1", 41, "train", step=20, loss=2.0),
        trainer("1", 42, "done", step=20),
    ]
    found = goodput([job], entries)

    assert_tiles(found)
    assert (found.steps_trained, found.unique_steps, found.steps_lost) == (25, 20, 5)
    assert seconds(found)["lost"] == 5  # steps 11-15's first execution
    assert seconds(found)["productive"] == 10 + 10
    assert seconds(found)["recovery"] == 15  # its last line -> the restart's first
    assert found.to_first_step_s == []  # no stop request: a crash


def test_a_ladder_rung_that_stocked_out_is_waiting_for_capacity() -> None:
    stocked_out = rest_job("1", 0, "JOB_STATE_FAILED", ended_s=4, strategy="SPOT")
    stocked_out["error"] = {"code": 8, "message": "STOCKOUT: no Spot capacity"}
    moved = rest_job("2", 6, "JOB_STATE_SUCCEEDED", started_s=9, ended_s=30)
    moved["name"] = moved["name"].replace("us-central1", "us-east4")
    entries = [
        trainer("2", 12, "training", step=0, total_steps=10),
        trainer("2", 20, "train", step=10, loss=2.0),
        trainer("2", 22, "done", step=10),
    ]
    found = goodput([stocked_out, moved], entries)

    assert_tiles(found)
    first, second = found.attempts
    assert first.moved_on and [p.category for p in first.phases] == ["waiting"]
    assert (first.region, second.region) == ("us-central1", "us-east4")
    assert second.phases[0].category == "waiting"  # the move, then its own queue
    assert seconds(found)["waiting"] == 4 + 2 + 3
    assert seconds(found)["productive"] == 8
    # The stocked-out Spot rung has no price, and cost nothing: it never ran.
    assert found.figure("waiting").usd == 0
    assert found.paid_s == 21


def test_unknown_prices_and_tokens_stay_unknown_with_their_reason() -> None:
    job = rest_job("1", 0, "JOB_STATE_SUCCEEDED", started_s=1, ended_s=20, strategy="SPOT")
    entries = [
        trainer("1", 2, "training", step=0, total_steps=5),
        trainer("1", 10, "train", step=5, loss=2.0),  # no token count: an older trainer
        trainer("1", 11, "done", step=5),
    ]
    found = goodput([job], entries)

    productive = found.figure("productive")
    assert productive.usd is None and "attempt 1:" in (productive.usd_unknown_because or "")
    assert found.figure("waiting").usd == 0
    assert found.tokens is None and found.tokens_per_usd is None
    assert "token count" in (found.tokens_per_usd_unknown_because or "")


def test_restarts_tagged_by_the_local_platform_split_the_starts() -> None:
    """The same run as the local platform logs it: each line says which start wrote it."""
    entries = preempted_once()
    tagged = [replace(e, restart=0 if e.timestamp <= stamp(42) else 1) for e in entries]
    job = rest_job("1", 0, "JOB_STATE_SUCCEEDED", started_s=10, ended_s=100)
    untagged = goodput([job], entries)
    found = goodput([job], tagged)
    assert seconds(found) == seconds(untagged)


def test_a_running_attempt_ends_now_and_a_line_outside_its_record_is_clamped() -> None:
    job = rest_job("1", 0, started_s=5)
    entries = [
        trainer("1", 3, "training", step=0, total_steps=100),  # before the record's start
        trainer("1", 20, "train", step=10, loss=2.0, tokens=10),
    ]
    found = goodput([job], entries, now_s=30)

    assert_tiles(found)
    assert found.wall_s == 30 and found.paid_s == 25
    assert seconds(found)["productive"] == 15  # from the start it is clamped to
    assert seconds(found)["idle"] == 10  # since the last line


def test_every_category_names_its_source_and_mark() -> None:
    assert len({c.letter for c in CATEGORIES}) == len(CATEGORIES)
    assert {c.source for c in CATEGORIES} <= {"vertex", "trainer", "both", "controller"}
    assert json.dumps([c.library for c in CATEGORIES])  # names, or None for vtx's own


def test_each_starting_line_begins_a_start_and_times_its_imports() -> None:
    """The trainer's first line, before torch loads: a restart's recovery ends there, and its
    start-up (imports, data, model) and restore follow, also where no restart is tagged."""
    job = rest_job("1", 0, "JOB_STATE_SUCCEEDED", started_s=0, ended_s=40)
    entries = [
        trainer("1", 1, "starting"),
        trainer("1", 5, "training", step=0, total_steps=10),
        trainer("1", 10, STOP, step=5),
        trainer("1", 11, "checkpoint saved", step=5, blocked_s=1.0),
        trainer("1", 20, "starting"),
        trainer("1", 26, "resumed", step=5, restore_s=2.0),
        trainer("1", 27, "training", step=5, total_steps=10),
        trainer("1", 32, "train", step=10, loss=1.0),
        trainer("1", 33, "done", step=10),
    ]
    found = goodput([job], entries)

    assert_tiles(found)
    assert seconds(found) == {
        "provisioning": 1,
        "startup": 4 + 4 + 1,
        "productive": 5 + 5,
        "save": 1,
        "recovery": 9,  # the stop's save -> the next start's first line
        "restore": 2,
        "finish": 1,
        "idle": 7,
    }
