"""A template's ``study:``: each rule of jobs/tuning/study_rules.py fires on its case with the path
in
the template and what to write instead, the structure check refuses what the model does not
take, and the example study validates clean."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from jobs.core.catalog import vertex_limits
from jobs.core.safe_yaml import read_yaml_file
from jobs.launch.checks import validate_template_doc
from jobs.spec.template import JobTemplate
from jobs.tuning.study_rules import grid_size
from tests.conftest import TEMPLATES

LR = {"id": "learning_rate", "type": "DOUBLE", "min": 1e-4, "max": 1e-2, "scale": "log"}
RANK = {"id": "model.lora.r", "type": "DISCRETE", "values": [4, 8]}


def base() -> dict[str, Any]:
    return read_yaml_file(TEMPLATES / "tiny-tune.yaml")


def with_study(**changes: Any) -> dict[str, Any]:
    doc = base()
    doc["study"] = {**doc["study"], **changes}
    return doc


def problems_at(doc: dict[str, Any]) -> dict[str, str]:
    """path -> 'message (hint)' of every problem."""
    return {p.path: f"{p.message} ({p.hint})" for p in validate_template_doc(doc)}


def test_the_example_study_is_valid() -> None:
    assert validate_template_doc(base()) == []


CASES = [
    (
        "min not below max",
        {"parameters": [{**LR, "min": 0.1, "max": 0.01}]},
        "study.parameters[0].max",
        "must be greater than min",
    ),
    (
        "log scale from zero",
        {"parameters": [{**LR, "min": 0.0}]},
        "study.parameters[0].min",
        "needs min > 0",
    ),
    (
        "range without max",
        {"parameters": [{"id": "learning_rate", "type": "DOUBLE", "min": 0.1}]},
        "study.parameters[0]",
        "needs min and max",
    ),
    (
        "integer bounds with fractions",
        {"parameters": [{"id": "model.lora.r", "type": "INTEGER", "min": 1.5, "max": 8}]},
        "study.parameters[0].min",
        "not a whole number",
    ),
    (
        "discrete values out of order",
        {"parameters": [{**RANK, "values": [8, 4]}]},
        "study.parameters[0].values",
        "values: [4, 8]",
    ),
    (
        "discrete values repeated",
        {"parameters": [{**RANK, "values": [4, 4, 8]}]},
        "study.parameters[0].values",
        "each unique",
    ),
    (
        "discrete strings",
        {"parameters": [{**RANK, "values": ["a", "b"]}]},
        "study.parameters[0].values",
        "type: CATEGORICAL",
    ),
    (
        "categorical numbers",
        {"parameters": [{"id": "lr_scheduler_type", "type": "CATEGORICAL", "values": [1, 2]}]},
        "study.parameters[0].values",
        "strings",
    ),
    (
        "categorical with a scale",
        {
            "parameters": [
                {
                    "id": "lr_scheduler_type",
                    "type": "CATEGORICAL",
                    "values": ["linear", "cosine"],
                    "scale": "log",
                }
            ]
        },
        "study.parameters[0].scale",
        "no scale",
    ),
    (
        "grid over a double",
        {"algorithm": "GRID_SEARCH", "max_trials": 2},
        "study.parameters[0].type",
        "GRID_SEARCH takes INTEGER, CATEGORICAL or DISCRETE",
    ),
    (
        "grid smaller than the trials",
        {
            "algorithm": "GRID_SEARCH",
            "parameters": [RANK, {"id": "warmup_steps", "type": "INTEGER", "min": 0, "max": 1}],
            "max_trials": 6,
            "parallel_trials": 2,
        },
        "study.max_trials",
        "max_trials: 4",
    ),
    (
        "more parallel than trials",
        {"parallel_trials": 5},
        "study.parallel_trials",
        "parallel_trials: 4 or fewer",
    ),
    (
        "more trials than Vizier runs in a study",
        {"max_trials": 2**31 - 1, "parallel_trials": 2**31 - 1},
        "study.max_trials",
        "max_trials: 1000 or fewer",
    ),
    (
        "more parallel trials than a study may run",
        {"max_trials": 1001, "parallel_trials": 1001},
        "study.parallel_trials",
        "parallel_trials: 1000 or fewer",
    ),
    (
        "an id that would become another argument",
        {"parameters": [{**LR, "id": "--evil=1"}]},
        "study.parameters[0].id",
        "not a flag name",
    ),
    (
        "more failures allowed than trials",
        {"max_failed_trials": 9},
        "study.max_failed_trials",
        "max_failed_trials: 4 or fewer",
    ),
    (
        "an empty metric",
        {"metric": {"id": " ", "goal": "minimize"}},
        "study.metric.id",
        "eval_loss",
    ),
    (
        "a parameter twice",
        {"parameters": [LR, {**LR, "scale": "linear"}]},
        "study.parameters[1].id",
        "already tuned",
    ),
    (
        "a key the trainer does not take",
        {"parameters": [{**LR, "id": "lerning_rate"}]},
        "study.parameters[0].id",
        "no config key 'lerning_rate'",
    ),
    (
        "fractions for a whole-number key",
        {"parameters": [{"id": "model.lora.r", "type": "DOUBLE", "min": 2, "max": 16}]},
        "study.parameters[0].type",
        "type: INTEGER",
    ),
    (
        "a double as a parent",
        {"parameters": [{**LR, "conditional": [{"parent_values": [1], "parameter": RANK}]}]},
        "study.parameters[0].conditional",
        "cannot be a parent",
    ),
    (
        "a condition on a value the parent never takes",
        {
            "parameters": [
                {**RANK, "conditional": [{"parent_values": [16], "parameter": LR}]},
            ]
        },
        "study.parameters[0].conditional[0].parent_values",
        "not a value model.lora.r takes",
    ),
    (
        "a conditional child with a bad range",
        {
            "parameters": [
                {**RANK, "conditional": [{"parent_values": [8], "parameter": {**LR, "min": 1}}]},
            ]
        },
        "study.parameters[0].conditional[0].parameter.max",
        "greater than min",
    ),
]


@pytest.mark.parametrize(("case", "change", "path", "says"), CASES, ids=[c[0] for c in CASES])
def test_each_study_rule_fires_at_its_path(
    case: str, change: dict[str, Any], path: str, says: str
) -> None:
    found = problems_at(with_study(**change))
    assert path in found, f"{case}: {found}"
    assert says in found[path]


def test_the_trainer_metric_rule_fires_for_a_metric_the_trainer_never_reports() -> None:
    found = problems_at(with_study(metric={"id": "accuracy", "goal": "maximize"}))
    assert "study.metric.id" in found
    assert "id: train_loss" in found["study.metric.id"]


def test_another_programs_study_may_name_its_own_metric_and_flags() -> None:
    doc = with_study(
        metric={"id": "accuracy", "goal": "maximize"},
        parameters=[{"id": "dropout-rate", "type": "DOUBLE", "min": 0.1, "max": 0.5}],
    )
    doc["command"] = ["python", "train.py"]
    assert validate_template_doc(doc) == []


def test_a_study_with_a_capacity_ladder_is_refused_with_what_to_do_instead() -> None:
    doc = base()
    doc["capacity"] = {"ladder": [{"set": {"scheduling.strategy": "spot"}}]}
    found = problems_at(doc)
    assert "capacity.ladder" in found
    assert "flex_start" in found["capacity.ladder"]


@pytest.mark.parametrize(
    ("change", "path", "says"),
    [
        ({"algorithm": "BAYES"}, "study.algorithm", "GRID_SEARCH"),
        ({"max_trials": 0}, "study.max_trials", "greater than 0"),
        ({"parallel_trials": 2**31}, "study.parallel_trials", "less than or equal to 2147483647"),
        ({"metric": {"id": "eval_loss", "goal": "lowest"}}, "study.metric.goal", "minimize"),
        ({"max_trial": 4}, "study.max_trial", "max_trials"),
    ],
)
def test_the_structure_check_refuses_what_a_study_does_not_take(
    change: dict[str, Any], path: str, says: str
) -> None:
    found = problems_at(with_study(**change))
    assert path in found, found
    assert says in found[path]


def test_vertex_names_are_accepted_beside_the_short_ones() -> None:
    doc = with_study(
        parameters=[{**LR, "type": "double", "scale": "UNIT_LOG_SCALE"}],
        algorithm="random_search",
    )
    assert validate_template_doc(doc) == []
    study = JobTemplate.model_validate(doc).study
    assert study is not None
    assert (study.parameters[0].type, study.parameters[0].scale) == ("DOUBLE", "log")
    assert study.algorithm == "RANDOM_SEARCH"


def test_grid_size_counts_integer_discrete_and_categorical_points() -> None:
    doc = with_study(
        parameters=[
            RANK,
            {"id": "warmup_steps", "type": "INTEGER", "min": 0, "max": 2},
            {"id": "lr_scheduler_type", "type": "CATEGORICAL", "values": ["linear", "cosine"]},
        ],
        algorithm="GRID_SEARCH",
        max_trials=12,
    )
    study = JobTemplate.model_validate(copy.deepcopy(doc)).study
    assert study is not None and grid_size(study) == 12
    assert validate_template_doc(doc) == []


def test_trials_at_once_hold_no_more_machines_than_one_job_may() -> None:
    limit = vertex_limits().machines_max
    trials = vertex_limits().study_trials_max
    per_trial = limit // trials  # machines a trial may hold when the most trials run at once
    at_limit = with_study(max_trials=trials, parallel_trials=trials)
    at_limit["pools"]["workers"] = {"machine": "n1-standard-4", "replicas": per_trial - 1}
    assert validate_template_doc(at_limit) == []
    past = copy.deepcopy(at_limit)
    past["pools"]["workers"]["replicas"] = per_trial
    found = problems_at(past)["study.parallel_trials"]
    assert f"{per_trial + 1} machines each" in found
    assert f"vtx takes at most {limit:,} at once" in found
    assert f"parallel_trials: {limit // (per_trial + 1):,} or fewer" in found
