"""The study algorithms as pure functions: grid order and size, random draws in each scale,
conditional parameters, TPE's determinism, and the trial's command-line arguments."""

from __future__ import annotations

import math

import pytest

from jobs.local.tuning.suggest import (
    Algorithm,
    Observation,
    format_value,
    grid_point,
    grid_points,
    grid_size,
    parse_params,
    random_point,
    rest_parameters,
    study_seed,
    suggest,
    trial_args,
)

LR = {
    "parameterId": "lr",
    "doubleValueSpec": {"minValue": 1e-4, "maxValue": 1e-1},
    "scaleType": "UNIT_LOG_SCALE",
}
RANK = {"parameterId": "rank", "integerValueSpec": {"minValue": "1", "maxValue": "3"}}
BATCH = {"parameterId": "batch", "discreteValueSpec": {"values": [16, 32]}}
OPTIMIZER = {
    "parameterId": "opt",
    "categoricalValueSpec": {"values": ["sgd", "adam"]},
    "conditionalParameterSpecs": [
        {
            "parentCategoricalValues": {"values": ["sgd"]},
            "parameterSpec": {
                "parameterId": "momentum",
                "discreteValueSpec": {"values": [0.5, 0.9]},
            },
        }
    ],
}


def test_grid_walks_every_combination_first_parameter_slowest() -> None:
    params = parse_params([RANK, BATCH])
    assert grid_points(params) == [
        {"rank": 1, "batch": 16.0},
        {"rank": 1, "batch": 32.0},
        {"rank": 2, "batch": 16.0},
        {"rank": 2, "batch": 32.0},
        {"rank": 3, "batch": 16.0},
        {"rank": 3, "batch": 32.0},
    ]
    assert grid_size(params) == 6


def test_grid_expands_a_conditional_parameter_only_under_its_parent_value() -> None:
    params = parse_params([OPTIMIZER])
    assert grid_points(params) == [
        {"opt": "sgd", "momentum": 0.5},
        {"opt": "sgd", "momentum": 0.9},
        {"opt": "adam"},
    ]
    assert grid_size(params) == 3


def test_grid_points_are_computed_without_listing_a_long_range() -> None:
    params = parse_params(
        [
            {
                "parameterId": "seed",
                "integerValueSpec": {"minValue": "1", "maxValue": "1000000000"},
            },
            BATCH,
        ]
    )
    assert grid_size(params) == 2_000_000_000
    assert grid_point(params, 3) == {"seed": 2, "batch": 32.0}
    assert grid_point(params, 2_000_000_000) is None


def test_grid_ends_when_every_point_was_suggested() -> None:
    params = parse_params([BATCH])
    suggested = [suggest(Algorithm.GRID, params, n, seed=0) for n in range(3)]
    assert suggested == [{"batch": 16.0}, {"batch": 32.0}, None]


@pytest.mark.parametrize(
    ("scale", "low_half_share"),
    [
        # Share of draws below the middle of [1, 100]: linear about half, log most (the middle
        # of log space is 10), reverse log few (mirrored: dense near the top).
        ("UNIT_LINEAR_SCALE", (0.4, 0.6)),
        ("UNIT_LOG_SCALE", (0.8, 1.0)),
        ("UNIT_REVERSE_LOG_SCALE", (0.0, 0.2)),
    ],
)
def test_random_draws_uniformly_in_the_parameter_scale(scale: str, low_half_share) -> None:
    spec = {"parameterId": "x", "doubleValueSpec": {"minValue": 1, "maxValue": 100}}
    params = parse_params([{**spec, "scaleType": scale}])
    values = [random_point(params, seed=7, trial_number=n)["x"] for n in range(400)]
    assert all(1 <= v <= 100 for v in values)
    share = sum(v < 50.5 for v in values) / len(values)
    assert low_half_share[0] <= share <= low_half_share[1]


def test_random_integers_and_categories_stay_in_their_feasible_values() -> None:
    params = parse_params([RANK, BATCH, OPTIMIZER])
    points = [random_point(params, seed=1, trial_number=n) for n in range(200)]
    assert {p["rank"] for p in points} == {1, 2, 3}
    assert {p["batch"] for p in points} == {16.0, 32.0}
    assert {p["opt"] for p in points} == {"sgd", "adam"}
    assert all(("momentum" in p) == (p["opt"] == "sgd") for p in points)


def test_random_is_deterministic_per_study_and_differs_between_studies() -> None:
    params = parse_params([LR, RANK])
    seed = study_seed("projects/1/locations/us-central1/hyperparameterTuningJobs/1")
    other = study_seed("projects/1/locations/us-central1/hyperparameterTuningJobs/2")
    assert random_point(params, seed, 3) == random_point(params, seed, 3)
    assert random_point(params, seed, 3) != random_point(params, other, 3)


def test_tpe_stand_in_is_deterministic_and_feasible() -> None:
    params = parse_params([LR, RANK, OPTIMIZER])
    history = [
        Observation(random_point(params, seed=5, trial_number=n), value=float(n)) for n in range(12)
    ]
    first = suggest(Algorithm.DEFAULT, params, 12, seed=5, history=history, maximize=False)
    again = suggest(Algorithm.DEFAULT, params, 12, seed=5, history=history, maximize=False)
    assert first == again
    assert first is not None
    assert 1e-4 <= first["lr"] <= 1e-1 and first["rank"] in (1, 2, 3)
    assert ("momentum" in first) == (first["opt"] == "sgd")


def test_tpe_moves_towards_the_best_region_after_its_startup_trials() -> None:
    # The metric is best (smallest) where x is small: after 20 observations TPE's suggestions
    # should favour the low end far more than uniform draws would.
    params = parse_params([{"parameterId": "x", "doubleValueSpec": {"minValue": 0, "maxValue": 1}}])
    history = [
        Observation({"x": p["x"]}, value=p["x"])
        for p in (random_point(params, seed=3, trial_number=n) for n in range(20))
    ]
    picks = [
        suggest(Algorithm.DEFAULT, params, 20 + n, seed=3, history=history, maximize=False)
        for n in range(10)
    ]
    assert sum(p["x"] < 0.3 for p in picks if p) >= 7


@pytest.mark.parametrize(
    ("value", "shown"),
    [(3, "3"), (16.0, "16"), (0.001, "0.001"), (1e-05, "1e-05"), ("adam", "adam")],
)
def test_trial_values_format_as_vertex_passes_them(value, shown: str) -> None:
    assert format_value(value) == shown


def test_trial_args_and_parameters_follow_the_point_order() -> None:
    point = {"lr": 0.01, "rank": 2, "opt": "sgd"}
    assert trial_args(point) == ["--lr=0.01", "--rank=2", "--opt=sgd"]
    assert rest_parameters(point)[1] == {"parameterId": "rank", "value": 2}
    assert math.isclose(rest_parameters(point)[0]["value"], 0.01)
