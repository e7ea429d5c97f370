"""A run's meter for an attempt on a persistent resource: Google bills the resource, busy or idle,
and "all jobs running on a persistent resource are not separately charged" (docs/vertex-facts.md,
"Persistent resources"), so the job's own price stays $0/h (`vtx cost`), while the meter (the
run's cost so far, its budget, the controller's) charges it its share of the pool: the replicas
it holds x the pool's per-replica price. A share whose price is unknown is unknown, never $0.
The pool is n1-standard-4s in us-central1, whose shipped table prices them."""

from __future__ import annotations

from datetime import timedelta

import pytest

from jobs.core.catalog import Catalog, load_catalog
from jobs.core.stack import PersistentResourceOutputs, WarmPool
from jobs.custom_jobs.facts import facts_from_rest_job
from jobs.pricing.estimates import PERSISTENT_RESOURCE, estimate
from jobs.pricing.warm_pools import warm_cost, warm_share
from jobs.runs.watch import attempts_of, budget_crossed, usd_of
from jobs.vertex.job_records import JobRecord
from tests.jobs.runs.run_records import PARENT, T0, rest_job

HOUR = 3600.0
POOL = WarmPool(id="cpu", machine_type="n1-standard-4", replica_count=4)
RESOURCE = PersistentResourceOutputs(
    name=f"{PARENT}/persistentResources/warm-l4", region="us-central1", pools=[POOL]
)


def _job(job_id: str, created_s: float, warm: bool, **more: object) -> JobRecord:
    rest = rest_job(job_id, created_s, started_s=created_s, **more)  # type: ignore[arg-type]
    rest["labels"]["vtx-budget-usd"] = "1"
    if warm:
        rest["jobSpec"]["persistentResourceId"] = "warm-l4"
    return JobRecord.from_rest(rest)


def _stack_catalog(*resources: PersistentResourceOutputs) -> Catalog:
    """The catalog as `Catalog.for_stack` gives it for a stack with ``resources``."""
    return load_catalog().model_copy(
        update={"persistent_resources": {r.name.rsplit("/", 1)[-1]: r for r in resources}}
    )


def _replica_usd_per_h() -> float:
    (price,) = warm_cost(RESOURCE, load_catalog()).pools
    assert price.replica_usd_per_h is not None and price.replica_usd_per_h > 0
    return price.replica_usd_per_h


def test_an_attempt_on_a_warm_pool_is_metered_at_its_share() -> None:
    now = T0 + timedelta(seconds=10 * HOUR)
    (warm,) = attempts_of([_job("1", 0, warm=True)], "us-central1", now, _stack_catalog(RESOURCE))
    per_replica = _replica_usd_per_h()
    assert warm.price.kind == PERSISTENT_RESOURCE
    assert warm.price.usd_per_h == pytest.approx(3 * per_replica)  # 1 + 2 replicas of 4
    assert warm.usd == pytest.approx(3 * per_replica * 10)
    assert warm.price.share is not None
    assert warm.price.share.startswith("share of warm pool warm-l4: 3 of 4 replicas, $")
    crossed = budget_crossed([warm])  # ten hours of three VMs cross a $1 budget
    assert crossed is not None and "crossed budget.max_cost_usd" in crossed


def test_a_resource_the_stack_does_not_know_is_an_unknown_share_not_zero() -> None:
    now = T0 + timedelta(seconds=10 * HOUR)
    (warm,) = attempts_of([_job("1", 0, warm=True)], "us-central1", now, _stack_catalog())
    assert (warm.price.usd_per_h, warm.usd) == (None, None)
    assert "'warm-l4' is not among the stack's" in (warm.price.unknown_because or "")
    assert budget_crossed([warm]) is None  # no run is stopped on a made-up figure


def test_a_pool_without_a_price_is_an_unknown_share() -> None:
    """The resource's region has no price table: its pools' price is unknown, so is the share."""
    elsewhere = RESOURCE.model_copy(
        update={
            "name": RESOURCE.name.replace("us-central1", "mars-north1"),
            "region": "mars-north1",
        }
    )
    now = T0 + timedelta(seconds=HOUR)
    (warm,) = attempts_of([_job("1", 0, warm=True)], "us-central1", now, _stack_catalog(elsewhere))
    assert warm.usd is None and warm.price.share is not None
    assert "unknown (pool 'cpu': no price table for mars-north1" in warm.price.share


def test_a_job_that_fits_no_pool_is_an_unknown_share() -> None:
    small = RESOURCE.model_copy(update={"pools": [POOL.model_copy(update={"replica_count": 2})]})
    (warm,) = attempts_of([_job("1", 0, warm=True)], "us-central1", T0, _stack_catalog(small))
    assert warm.price.usd_per_h is None
    assert "asks 3 replicas of pool 'cpu'" in (warm.price.unknown_because or "")


def test_the_same_job_off_the_pool_pays_its_own_price() -> None:
    now = T0 + timedelta(seconds=10 * HOUR)
    warm, cold = attempts_of(
        [
            _job("1", 0, warm=True, ended_s=HOUR, state="JOB_STATE_CANCELLED"),
            _job("2", HOUR, warm=False),
        ],
        "us-central1",
        now,
        _stack_catalog(RESOURCE),
    )
    assert cold.price.kind == "on-demand" and cold.price.usd_per_h is not None
    assert cold.price.share is None
    assert cold.usd == pytest.approx(cold.price.usd_per_h * 9)  # three n1-standard-4, 9 h
    assert usd_of([warm, cold]) == pytest.approx(cold.usd + 3 * _replica_usd_per_h())


def test_its_estimate_is_nothing_whole_disks_included() -> None:
    """The bill: the job adds nothing, its boot disks are the resource's too (`vtx cost`)."""
    cost = estimate(facts_from_rest_job(_job("1", 0, warm=True).rest), "us-central1")
    assert (cost.price_kind, cost.usd_per_h, cost.usd_at_timeout) == (PERSISTENT_RESOURCE, 0.0, 0.0)
    assert not cost.excludes_disks and cost.disks_unknown_because is None and cost.skus == []
    assert cost.on_demand_usd_per_h is not None  # what it would cost on its own VMs


def test_a_plan_on_an_undeclared_resource_says_the_meter_holds_the_budget_once_it_runs() -> None:
    """Before the job runs nothing has read the resource: the plan says so rather than that the
    budget is not enforced (the meter reads it from Vertex: `metering_catalog`)."""
    facts = facts_from_rest_job(_job("1", 0, warm=True).rest)
    share = warm_share(facts, _stack_catalog())
    assert share is not None and share.undeclared and share.usd_per_h is None
    warning = share.budget_warning(HOUR, 1.0) or ""
    assert "budget.max_cost_usd $1.00 is not checked here" in warning
    assert "the run's meter holds the budget then" in warning
    declared = warm_share(facts, _stack_catalog(RESOURCE))
    assert declared is not None and declared.budget_warning(10 * HOUR, 1.0) is not None
    assert "is under the cost at the timeout cap" in (declared.budget_warning(10 * HOUR, 1.0) or "")
