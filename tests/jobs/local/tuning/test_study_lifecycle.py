"""A study's decisions as pure functions: hypertune reports read into measurements, the final
measurement, a trial's end, when a study starts trials, succeeds or fails; and the checks a
study's shape must pass."""

from __future__ import annotations

import json

import pytest

from jobs.local.custom_jobs.lifecycle import JobState
from jobs.local.tuning.study_checks import study_problems
from jobs.local.tuning.study_lifecycle import (
    BEST_MEASUREMENT,
    LAST_MEASUREMENT,
    Measurement,
    StudyCounts,
    TrialState,
    Verdict,
    decide,
    final_measurement,
    new_reports,
    parse_reports,
    trial_end,
)


def _line(value: str, step: str, ts: float, tag: str = "loss") -> str:
    # What hypertune writes: values and steps as strings, keys sorted.
    report = {"checkpoint_path": "", "global_step": step, tag: value, "timestamp": ts, "trial": "1"}
    return json.dumps(report, sort_keys=True)


def test_reports_become_measurements_and_foreign_lines_are_skipped() -> None:
    text = "\n".join(
        [
            _line("0.5", "10", 1.0),
            _line("0.9", "20", 2.0, tag="accuracy"),  # not the study's metric
            '{"loss": "0.4", "global_step": "3',  # half written: read at the next poll
            "not json",
            _line("nan", "30", 3.0),
            _line("0.25", "40", 4.0),
        ]
    )
    found = parse_reports(text, ["loss"])
    assert [(m.step, m.metrics) for m in found] == [(10, (("loss", 0.5),)), (40, (("loss", 0.25),))]
    assert found[0].rest() == {"stepCount": "10", "metrics": [{"metricId": "loss", "value": 0.5}]}


def test_rewritten_file_yields_only_the_reports_after_the_last_read() -> None:
    reports = parse_reports("\n".join(_line(str(v), str(v), float(v)) for v in (1, 2, 3)), ["loss"])
    assert [m.step for m in new_reports(reports, after=2.0)] == [3]
    assert [m.step for m in new_reports(reports, after=None)] == [1, 2, 3]


MEASURED = [
    Measurement(1, (("loss", 0.3),), 1.0),
    Measurement(2, (("loss", 0.1),), 2.0),
    Measurement(3, (("loss", 0.2),), 3.0),
]


@pytest.mark.parametrize(
    ("selection", "goal", "step"),
    [
        (LAST_MEASUREMENT, "MINIMIZE", 3),
        ("", "MINIMIZE", 3),  # MEASUREMENT_SELECTION_TYPE_UNSPECIFIED: treated as LAST
        (BEST_MEASUREMENT, "MINIMIZE", 2),
        (BEST_MEASUREMENT, "MAXIMIZE", 1),
        (BEST_MEASUREMENT, "", 1),  # GOAL_TYPE_UNSPECIFIED defaults to maximize
    ],
)
def test_final_measurement_is_the_last_or_the_best_for_the_goal(selection, goal, step) -> None:
    final = final_measurement(MEASURED, selection, "loss", goal)
    assert final is not None and final.step == step


def test_no_report_no_final_measurement() -> None:
    assert final_measurement([], BEST_MEASUREMENT, "loss", "MINIMIZE") is None


@pytest.mark.parametrize(
    ("job_state", "final", "stopped", "state", "reason"),
    [
        (JobState.SUCCEEDED, MEASURED[0], False, TrialState.SUCCEEDED, None),
        (JobState.SUCCEEDED, None, False, TrialState.INFEASIBLE, "reported no value"),
        (JobState.FAILED, MEASURED[0], False, TrialState.INFEASIBLE, "JOB_STATE_FAILED: boom"),
        (JobState.CANCELLED, MEASURED[0], True, TrialState.SUCCEEDED, None),
        (JobState.CANCELLED, None, True, TrialState.INFEASIBLE, "JOB_STATE_CANCELLED"),
    ],
)
def test_trial_end_follows_its_job_and_its_measurement(
    job_state, final, stopped, state, reason
) -> None:
    end = trial_end(job_state, "boom" if job_state is JobState.FAILED else None, final, stopped)
    assert end.state is state
    if reason is None:
        assert end.infeasible_reason is None
    else:
        assert reason in (end.infeasible_reason or "")


def _counts(**kw) -> StudyCounts:
    base = dict(
        max_trials=4,
        parallel=2,
        max_failed=0,
        suggested=0,
        active=0,
        succeeded=0,
        failed=0,
        first_failed=False,
    )
    return StudyCounts(**{**base, **kw})


@pytest.mark.parametrize(
    ("counts", "verdict", "start"),
    [
        (_counts(), Verdict.CONTINUE, 2),  # a new study fills its parallel slots
        (_counts(suggested=2, active=2), Verdict.CONTINUE, 0),
        (_counts(suggested=2, active=1, succeeded=1), Verdict.CONTINUE, 1),
        (_counts(suggested=3, active=1, succeeded=2), Verdict.CONTINUE, 1),  # the 4th, not 2
        (_counts(suggested=4, active=1, succeeded=3), Verdict.CONTINUE, 0),  # waits the last
        (_counts(suggested=4, succeeded=3, failed=1), Verdict.SUCCEED, 0),
        (_counts(suggested=2, succeeded=2, exhausted=True), Verdict.SUCCEED, 0),  # grid done
        (_counts(suggested=2, active=1, failed=1, first_failed=True), Verdict.FAIL, 0),
        (_counts(max_failed=2, suggested=3, active=1, failed=2), Verdict.FAIL, 0),
        # With maxFailedTrialCount set, trial 1 failing is one failure among others.
        (
            _counts(max_failed=2, suggested=2, active=1, failed=1, first_failed=True),
            Verdict.CONTINUE,
            1,
        ),
        (_counts(max_failed=5, suggested=4, failed=4, first_failed=True), Verdict.FAIL, 0),
        # No more trials at once than the platform runs, whatever parallelTrialCount says.
        (_counts(max_trials=1000, parallel=1000, runnable=8), Verdict.CONTINUE, 8),
        (
            _counts(max_trials=1000, parallel=1000, suggested=8, active=8, runnable=8),
            Verdict.CONTINUE,
            0,
        ),
        (
            _counts(max_trials=1000, parallel=1000, suggested=9, active=7, succeeded=2, runnable=8),
            Verdict.CONTINUE,
            1,
        ),
    ],
)
def test_study_decisions(counts: StudyCounts, verdict: Verdict, start: int) -> None:
    decision = decide(counts)
    assert decision.verdict is verdict
    assert decision.start == start
    assert (decision.message is not None) == (verdict is Verdict.FAIL)


# -- checks on create ------------------------------------------------------------------------


def _study(**over) -> dict:
    study = {
        "displayName": "s",
        "maxTrialCount": 4,
        "parallelTrialCount": 2,
        "trialJobSpec": {"workerPoolSpecs": [{}]},
        "studySpec": {
            "metrics": [{"metricId": "loss", "goal": "MINIMIZE"}],
            "parameters": [
                {"parameterId": "rank", "integerValueSpec": {"minValue": "1", "maxValue": "4"}}
            ],
        },
    }
    study.update(over)
    return study


def _spec(**over) -> dict:
    return {**_study()["studySpec"], **over}


def test_a_well_formed_study_passes() -> None:
    assert study_problems(_study()) == []


@pytest.mark.parametrize(
    ("study", "fragment"),
    [
        (_study(displayName=""), "displayName: empty"),
        (_study(maxTrialCount=0), "maxTrialCount: required and positive"),
        (_study(parallelTrialCount=0), "parallelTrialCount: required and positive"),
        (_study(maxFailedTrialCount=5), "maxFailedTrialCount: 5 is more than maxTrialCount 4"),
        (
            _study(maxTrialCount=2**31 - 1),
            "maxTrialCount: 2147483647 is more than a study runs (1000 trials",
        ),
        (
            _study(parallelTrialCount=2**31 - 1),
            "parallelTrialCount: 2147483647 is more than a study runs (1000 trials",
        ),
        (
            _study(
                studySpec=_spec(
                    parameters=[{"parameterId": "--evil=1", "discreteValueSpec": {"values": [1]}}]
                )
            ),
            "parameterId: '--evil=1' is not a flag name",
        ),
        (_study(trialJobSpec={}), "trialJobSpec: required"),
        (_study(studySpec=_spec(metrics=[])), "studySpec.metrics: at least one metric"),
        (
            _study(studySpec=_spec(metrics=[{"metricId": "a b"}])),
            "metricId: 'a b' holds whitespace",
        ),
        (_study(studySpec=_spec(parameters=[])), "studySpec.parameters: at least one"),
        (
            _study(studySpec=_spec(parameters=[{"parameterId": "x"}])),
            "exactly one of doubleValueSpec",
        ),
        (
            _study(
                studySpec=_spec(
                    parameters=[
                        {"parameterId": "x", "doubleValueSpec": {"minValue": 2, "maxValue": 1}}
                    ]
                )
            ),
            "minValue 2 is above maxValue 1",
        ),
        (
            _study(
                studySpec=_spec(
                    parameters=[
                        {
                            "parameterId": "x",
                            "doubleValueSpec": {"minValue": 0, "maxValue": 1},
                            "scaleType": "UNIT_LOG_SCALE",
                        }
                    ]
                )
            ),
            "UNIT_LOG_SCALE needs a strictly positive range",
        ),
        (
            _study(
                studySpec=_spec(
                    parameters=[{"parameterId": "b", "discreteValueSpec": {"values": [32, 16]}}]
                )
            ),
            "must be in increasing order",
        ),
        (
            _study(
                studySpec=_spec(
                    parameters=[
                        {
                            "parameterId": "x",
                            "integerValueSpec": {"minValue": "1", "maxValue": "2"},
                        },
                        {
                            "parameterId": "x",
                            "integerValueSpec": {"minValue": "1", "maxValue": "2"},
                        },
                    ]
                )
            ),
            "'x' is repeated",
        ),
        (
            _study(
                studySpec=_spec(
                    algorithm="GRID_SEARCH",
                    parameters=[
                        {"parameterId": "lr", "doubleValueSpec": {"minValue": 0.1, "maxValue": 1}}
                    ],
                )
            ),
            "GRID_SEARCH needs INTEGER, DISCRETE or CATEGORICAL",
        ),
        (
            _study(
                studySpec=_spec(
                    parameters=[
                        {
                            "parameterId": "opt",
                            "categoricalValueSpec": {"values": ["sgd"]},
                            "conditionalParameterSpecs": [
                                {
                                    "parentCategoricalValues": {"values": ["adam"]},
                                    "parameterSpec": {
                                        "parameterId": "m",
                                        "discreteValueSpec": {"values": [0.9]},
                                    },
                                }
                            ],
                        }
                    ]
                )
            ),
            "'adam' is not a value of the parent parameter",
        ),
        (
            _study(
                studySpec=_spec(
                    parameters=[
                        {
                            "parameterId": "r",
                            "integerValueSpec": {"minValue": "1", "maxValue": "2"},
                            "conditionalParameterSpecs": [
                                {
                                    "parentCategoricalValues": {"values": ["1"]},
                                    "parameterSpec": {
                                        "parameterId": "m",
                                        "discreteValueSpec": {"values": [0.9]},
                                    },
                                }
                            ],
                        }
                    ]
                )
            ),
            "the INTEGER parent takes parentIntValues",
        ),
    ],
)
def test_each_check_fires(study: dict, fragment: str) -> None:
    problems = study_problems(study)
    assert any(fragment in p for p in problems), problems


def test_children_of_one_id_under_disjoint_parent_values_are_allowed() -> None:
    child = {"parameterId": "m", "discreteValueSpec": {"values": [0.5]}}
    parent = {
        "parameterId": "opt",
        "categoricalValueSpec": {"values": ["sgd", "rmsprop"]},
        "conditionalParameterSpecs": [
            {"parentCategoricalValues": {"values": ["sgd"]}, "parameterSpec": child},
            {"parentCategoricalValues": {"values": ["rmsprop"]}, "parameterSpec": child},
        ],
    }
    assert study_problems(_study(studySpec=_spec(parameters=[parent]))) == []
