"""A study's goodput from its trials' job records and trainer-shaped lines, without a server: each
trial's phases tile its own job's wall time, read from its own lines only; the study's figures
are the trials' sums, over the slot time since the study's creation and over the paid time; a
trial that never ran costs nothing and trained no token, an unknown price stays unknown."""

from __future__ import annotations

from datetime import timedelta
from itertools import pairwise

import pytest

from jobs.core.catalog import load_catalog
from jobs.runs.goodput import CATEGORIES
from jobs.runs.watch import trials_metered
from jobs.tuning.study_goodput import StudyGoodput, study_goodput_of
from jobs.tuning.study_records import StudyRecord
from jobs.vertex.job_records import JobRecord
from tests.jobs.runs.run_records import T0, preempted_once, rest_job, trainer
from tests.jobs.tuning.study_fakes import rest_study

NOW_S = 130  # study_fakes' study was created at 0 and is running: 2 trials at a time


def trial_jobs() -> list[dict]:
    """Trial 1 ran 10 s -> 60 s, trial 2 was preempted once (run_records' run), trial 3
    never got its machines, trial 4 is queued."""
    return [
        rest_job("101", 5, "JOB_STATE_SUCCEEDED", started_s=10, ended_s=60),
        rest_job("102", 0, "JOB_STATE_SUCCEEDED", started_s=10, ended_s=100),
        rest_job("103", 70, "JOB_STATE_FAILED"),
        rest_job("104", 100, "JOB_STATE_QUEUED"),
    ]


def first_trial_lines() -> list:
    return [
        trainer("101", 20, "training", step=0, total_steps=10),
        trainer("101", 40, "train", step=10, loss=2.0, tokens_per_s=50.0, tokens=500),
        trainer("101", 45, "done", step=10),
    ]


def study_goodput(jobs: list[dict], entries: list) -> StudyGoodput:
    now = T0 + timedelta(seconds=NOW_S)
    records = [JobRecord.from_rest(j) for j in jobs]
    metered = trials_metered(records, "us-central1", now, load_catalog())
    return study_goodput_of(StudyRecord.from_rest(rest_study()), metered, entries, now)


def test_each_trial_tiles_its_own_wall_time_and_the_study_sums_them() -> None:
    found = study_goodput(trial_jobs(), first_trial_lines() + preempted_once("102"))

    assert [t.trial.id for t in found.trials] == ["1", "2", "3", "4"]
    for trial in found.trials:
        phases = [p for a in trial.goodput.attempts for p in a.phases]
        assert phases[0].start == trial.goodput.submitted
        assert phases[-1].end == trial.goodput.ended
        for before, after in pairwise(phases):
            assert before.end == after.start
        assert sum(p.seconds for p in phases) == pytest.approx(trial.goodput.wall_s)
    one, two, three, four = (t.goodput for t in found.trials)
    assert (one.wall_s, one.paid_s, one.productive_s) == (55, 50, 20)
    # Trial 2 reads its own lines only: run_records' preempted run, exactly.
    assert (two.wall_s, two.paid_s, two.productive_s) == (100, 90, 21)
    assert (three.paid_s, four.paid_s) == (0, 0)
    assert {p.category for a in three.attempts for p in a.phases} == {"waiting"}

    assert found.wall_s == NOW_S and found.slots == 2 and found.slot_s == 2 * NOW_S
    assert found.trial_s == pytest.approx(55 + 100 + 0 + 30)  # the queued one: 100 s -> now
    assert found.between_trials_s == pytest.approx(2 * NOW_S - found.trial_s)
    assert found.productive_s == 41 and found.paid_s == 140
    assert found.goodput == pytest.approx(41 / (2 * NOW_S))
    assert found.paid_goodput == pytest.approx(41 / 140)
    for category in CATEGORIES:
        summed = found.categories[CATEGORIES.index(category)]
        per_trial = [t.goodput.figure(category.key) for t in found.trials]
        assert summed.seconds == pytest.approx(sum(f.seconds for f in per_trial))
        assert summed.usd == pytest.approx(sum(f.usd or 0 for f in per_trial))
    assert sum(f.seconds for f in found.categories) == pytest.approx(found.trial_s)
    assert found.usd == pytest.approx((one.usd or 0) + (two.usd or 0)) and found.usd > 0
    assert found.tokens == 500 + 2000  # the trials that never ran trained none
    assert found.tokens_per_usd == pytest.approx(2500 / found.usd)
    assert (found.steps_trained, found.unique_steps, found.steps_lost) == (30, 30, 0)


def test_a_trial_without_a_price_or_a_token_count_leaves_the_sums_unknown() -> None:
    jobs = trial_jobs()
    jobs[0]["jobSpec"]["workerPoolSpecs"][0]["machineSpec"]["machineType"] = "n9-unknown-4"
    lines = [trainer("101", 20, "training", step=0, total_steps=10)]  # no token count
    found = study_goodput(jobs, lines + preempted_once("102"))

    assert found.usd is None and (found.usd_unknown_because or "").startswith("trial 1: ")
    assert found.tokens is None and (found.tokens_unknown_because or "").startswith("trial 1: ")
    assert found.tokens_per_usd is None and found.tokens_per_usd_unknown_because
    provisioning = next(f for f in found.categories if f.key == "provisioning")
    assert provisioning.usd is None and provisioning.usd_unknown_because  # trial 1 paid some
    waiting = next(f for f in found.categories if f.key == "waiting")
    assert waiting.usd == 0  # nobody pays for a queue, whatever the price


def test_trials_without_a_job_yet_are_left_out_and_an_ended_study_stops_its_clock() -> None:
    study = rest_study(state="JOB_STATE_SUCCEEDED", endTime="2026-11-23T10:02:00Z")
    study["trials"][3].pop("customJob")  # REQUESTED: no job yet
    now = T0 + timedelta(seconds=500)
    records = [JobRecord.from_rest(j) for j in trial_jobs()[:3]]
    metered = trials_metered(records, "us-central1", now, load_catalog())
    found = study_goodput_of(StudyRecord.from_rest(study), metered, first_trial_lines(), now)

    assert [t.trial.id for t in found.trials] == ["1", "2", "3"]
    assert found.wall_s == 120  # to the study's endTime, not to now
