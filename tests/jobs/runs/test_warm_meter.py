"""A run's meter for an attempt on a persistent resource: Google bills the resource, busy or idle,
and "all jobs running on a persistent resource are not separately charged" (docs/vertex-facts.md,
"Persistent resources"), so the attempt adds nothing to the run's cost or its budget, while the
same job off the pool pays its strategy's price (the n1-standard-4 of us-central1's table)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from jobs.custom_jobs.facts import facts_from_rest_job
from jobs.pricing.estimates import PERSISTENT_RESOURCE, estimate
from jobs.runs.watch import attempts_of, budget_crossed, usd_of
from jobs.vertex.job_records import JobRecord
from tests.jobs.runs.run_records import T0, rest_job

HOUR = 3600.0


def _job(job_id: str, created_s: float, warm: bool, **more: object) -> JobRecord:
    rest = rest_job(job_id, created_s, started_s=created_s, **more)  # type: ignore[arg-type]
    rest["labels"]["vtx-budget-usd"] = "1"
    if warm:
        rest["jobSpec"]["persistentResourceId"] = "warm-l4"
    return JobRecord.from_rest(rest)


def test_an_attempt_on_a_warm_pool_costs_the_run_nothing() -> None:
    now = T0 + timedelta(seconds=10 * HOUR)
    (warm,) = attempts_of([_job("1", 0, warm=True)], "us-central1", now)
    assert warm.price.kind == PERSISTENT_RESOURCE
    assert (warm.price.usd_per_h, warm.usd) == (0.0, 0.0)
    assert budget_crossed([warm]) is None  # ten hours on the pool, a $1 budget untouched


def test_the_same_job_off_the_pool_pays_and_crosses_its_budget() -> None:
    now = T0 + timedelta(seconds=10 * HOUR)
    warm, cold = attempts_of(
        [
            _job("1", 0, warm=True, ended_s=HOUR, state="JOB_STATE_CANCELLED"),
            _job("2", HOUR, warm=False),
        ],
        "us-central1",
        now,
    )
    assert cold.price.kind == "on-demand" and cold.price.usd_per_h is not None
    assert cold.usd == pytest.approx(cold.price.usd_per_h * 9)  # three n1-standard-4, 9 h
    assert usd_of([warm, cold]) == cold.usd
    crossed = budget_crossed([warm, cold])
    assert crossed is not None and "crossed budget.max_cost_usd" in crossed


def test_its_estimate_is_nothing_whole_disks_included() -> None:
    """The boot disks are the resource's too: the job's price is not "excluding disks"."""
    cost = estimate(facts_from_rest_job(_job("1", 0, warm=True).rest), "us-central1")
    assert (cost.price_kind, cost.usd_per_h, cost.usd_at_timeout) == (PERSISTENT_RESOURCE, 0.0, 0.0)
    assert not cost.excludes_disks and cost.disks_unknown_because is None and cost.skus == []
    assert cost.on_demand_usd_per_h is not None  # what it would cost on its own VMs
