"""The run's meter: every attempt at the price it paid (its strategy's, in its own region, from
the stack's catalog), the sum, why it is unknown, the projection, and the budget it carries."""

from __future__ import annotations

from datetime import timedelta

import pytest

from jobs.core.catalog import load_catalog
from jobs.runs.watch import budget_crossed, run_status, usd_of
from jobs.vertex.job_records import JobRecord
from tests.conftest import stack_outputs
from tests.jobs.core.price_tables import write_stand_in
from tests.jobs.runs.run_records import PARENT, T0, rest_job, trainer

# Three n1-standard-4 (one chief, two workers: `rest_job`'s pools) per attempt.
STAND_IN = {"us-central1": (1.0, 0.25), "europe-west4": (2.0, 0.5)}


@pytest.fixture
def local_catalog(monkeypatch, tmp_path):
    monkeypatch.setenv("VTX_PRICES_DIR", str(tmp_path))
    write_stand_in(tmp_path, STAND_IN)
    local = stack_outputs().model_copy(update={"vertex_endpoint": "http://127.0.0.1:1"})
    return load_catalog().for_stack(local)


def attempt(job_id: str, created_s: float, region: str, strategy: str, **times) -> JobRecord:
    rest = rest_job(job_id, created_s, strategy=strategy, **times)
    rest["name"] = rest["name"].replace(PARENT, f"projects/p/locations/{region}")
    return JobRecord.from_rest(rest)


def test_each_attempt_is_metered_at_its_own_strategy_and_regions_price(local_catalog) -> None:
    spot_us = attempt("1", 0, "us-central1", "SPOT", started_s=0, ended_s=3600)
    spot_eu = attempt("2", 3600, "europe-west4", "SPOT", started_s=3600, ended_s=5400)
    on_demand_eu = attempt("3", 5400, "europe-west4", "STANDARD", started_s=5400)
    now = T0 + timedelta(seconds=7200)
    status = run_status(
        [on_demand_eu, spot_us, spot_eu], [], "us-central1", now, False, local_catalog
    )
    per_attempt = [(a.price.kind, a.price.region, a.price.usd_per_h) for a in status.attempts]
    assert per_attempt == [
        ("Spot", "us-central1", 0.75),
        ("Spot", "europe-west4", 1.5),
        ("on-demand", "europe-west4", 6.0),
    ]
    assert [a.usd for a in status.attempts] == pytest.approx([0.75, 0.75, 3.0])
    assert status.usd == pytest.approx(4.5)
    assert status.unknown_because is None


def test_the_stand_ins_tables_never_price_a_real_stacks_run(local_catalog, monkeypatch) -> None:
    job = attempt("1", 0, "europe-west4", "SPOT", started_s=0)
    real = load_catalog().for_stack(stack_outputs())
    status = run_status([job], [], "europe-west4", T0 + timedelta(hours=1), False, real)
    assert status.usd is None
    assert status.unknown_because is not None and "attempt 1: no Spot price" in (
        status.unknown_because
    )


def test_a_flex_start_attempt_without_its_figure_leaves_the_sum_unknown(local_catalog) -> None:
    spot = attempt("1", 0, "us-central1", "SPOT", started_s=0, ended_s=3600)
    flex = attempt("2", 3600, "us-central1", "FLEX_START", started_s=3600)
    now = T0 + timedelta(seconds=7200)
    status = run_status([spot, flex], [], "us-central1", now, False, local_catalog)
    assert status.attempts[0].usd == pytest.approx(0.75)
    assert status.usd is None  # never the Spot or on-demand figure, never 0
    assert status.unknown_because == (
        "attempt 2: no FLEX_START price for n1-standard-4 in "
        "billing-local-training-us-central1-2026-11-27"
    )


def test_a_flex_start_attempt_is_metered_at_the_flex_start_figure(local_catalog, tmp_path) -> None:
    write_stand_in(tmp_path, {"us-central1": (1.0, 0.25, 0.5)}, "2026-11-28")
    local = stack_outputs().model_copy(update={"vertex_endpoint": "http://127.0.0.1:1"})
    catalog = load_catalog().for_stack(local)
    flex = attempt("1", 0, "us-central1", "FLEX_START", started_s=0)
    status = run_status([flex], [], "us-central1", T0 + timedelta(hours=2), False, catalog)
    assert (status.newest.price.kind, status.newest.price.usd_per_h) == ("FLEX_START", 1.5)
    assert status.usd == pytest.approx(3.0)  # 3 x n1-standard-4 x 0.5 $/h x 2 h


def test_the_projection_adds_the_rest_at_the_current_pace(local_catalog) -> None:
    job = attempt("1", 0, "us-central1", "STANDARD", started_s=0)
    entries = [
        trainer("1", 0, "training", step=0, total_steps=200),
        trainer("1", 1800, "train", step=100, loss=1.0),
    ]
    now = T0 + timedelta(seconds=1800)
    status = run_status([job], entries, "us-central1", now, False, local_catalog)
    assert status.usd == pytest.approx(1.5)  # half an hour at $3/h
    assert status.projected_usd == pytest.approx(3.0)  # the other 100 steps take as long


def test_without_a_pace_there_is_no_projection(local_catalog) -> None:
    job = attempt("1", 0, "us-central1", "STANDARD", started_s=0)
    status = run_status([job], [], "us-central1", T0 + timedelta(hours=1), False, local_catalog)
    assert status.usd == pytest.approx(3.0) and status.projected_usd is None


def test_a_studys_trials_are_summed(local_catalog) -> None:
    now = T0 + timedelta(hours=1)
    trials = [
        run_status(
            [attempt(t, 0, "us-central1", "SPOT", started_s=0)], [], "", now, False, local_catalog
        )
        for t in ("1", "2", "3")
    ]
    assert usd_of([a for s in trials for a in s.attempts]) == pytest.approx(2.25)


def test_the_budget_travels_as_a_label() -> None:
    job = attempt("1", 0, "us-central1", "SPOT")
    job.labels["vtx-budget-usd"] = "12_5"
    status = run_status([job], [], "us-central1", T0, False)
    assert status.budget_usd == 12.5


def test_a_run_crosses_its_budget_over_every_attempt_and_never_on_an_unknown_meter(
    local_catalog,
) -> None:
    first = attempt("1", 0, "us-central1", "SPOT", started_s=0, ended_s=3600)  # $0.75
    second = attempt("2", 3600, "europe-west4", "SPOT", started_s=3600)  # $1.50/h
    for job in (first, second):
        job.labels["vtx-budget-usd"] = "1_5"
    at = T0 + timedelta(seconds=3600 + 1800)  # $0.75 + $0.75: the budget, reached
    status = run_status([first, second], [], "us-central1", at, False, local_catalog)
    assert budget_crossed(status.attempts) == (
        "the run's cost so far $1.50 crossed budget.max_cost_usd $1.50"
    )
    earlier = run_status([first, second], [], "", at - timedelta(seconds=60), False, local_catalog)
    assert budget_crossed(earlier.attempts) is None
    assert status.stopped_by_budget is None  # still running: not stopped yet
    cancelled = JobRecord.from_rest({**second.rest, "state": "JOB_STATE_CANCELLED",
                                     "endTime": rest_job("x", 5400)["createTime"]})  # fmt: skip
    cancelled.labels["vtx-budget-usd"] = "1_5"
    stopped = run_status([first, cancelled], [], "", at, False, local_catalog)
    assert stopped.stopped_by_budget is not None and "$1.50" in stopped.stopped_by_budget
    flex = attempt("3", 5400, "us-central1", "FLEX_START", started_s=5400)
    flex.labels["vtx-budget-usd"] = "0_01"
    unknown = run_status([first, flex], [], "", at + timedelta(hours=9), False, local_catalog)
    assert budget_crossed(unknown.attempts) is None  # $0.75 known, the rest is not: no stop
