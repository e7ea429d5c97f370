"""A persistent resource over a window (`jobs.runs.warm_pools.window_usage`): each pool's busy
replica-hours (the jobs on it x the replicas they hold x their time running in the window), its
provisioned ones (its replicas x the resource's time up in the window, more while jobs hold
more) and the idle rest with what it cost, from the v1 REST JSON of the resource and the
region's CustomJobs (``startTime``/``endTime``, ``jobSpec.persistentResourceId``)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from jobs.core.catalog import load_catalog
from jobs.pricing.warm_pools import warm_cost
from jobs.runs.warm_pools import resource_outputs, window_usage
from jobs.vertex.job_records import JobRecord
from tests.jobs.runs.run_records import PARENT, T0, rest_job, stamp

H = 3600.0
NAME = f"{PARENT}/persistentResources/warm-cpu"


def _resource(started_s: float | None, replicas: int = 4, max_replicas: int | None = None) -> dict:
    pool: dict = {
        "id": "cpu",
        "machineSpec": {"machineType": "n1-standard-4"},
        "diskSpec": {"bootDiskType": "pd-ssd", "bootDiskSizeGb": 100},
        "replicaCount": str(replicas),
    }
    if max_replicas:
        pool["autoscalingSpec"] = {"minReplicaCount": str(replicas), "maxReplicaCount": "8"}
    found = {"name": NAME, "state": "RUNNING", "createTime": stamp(0), "resourcePools": [pool]}
    if started_s is not None:
        found["startTime"] = stamp(started_s)
    return found


def _job(job_id: str, started_s: float, ended_s: float | None, on: str = "warm-cpu") -> JobRecord:
    """rest_job's job: two worker pools of n1-standard-4 (1 + 2 replicas), on ``on``."""
    state = "JOB_STATE_SUCCEEDED" if ended_s is not None else "JOB_STATE_RUNNING"
    rest = rest_job(job_id, started_s, state=state, started_s=started_s, ended_s=ended_s)
    rest["jobSpec"]["persistentResourceId"] = on
    return JobRecord.from_rest(rest)


def _usage(resource: dict, jobs: list[JobRecord], start_h: float, end_h: float):
    start, end = T0 + timedelta(hours=start_h), T0 + timedelta(hours=end_h)
    return window_usage(resource, jobs, start, end, load_catalog())


def test_busy_and_idle_replica_hours_and_the_idle_cost() -> None:
    """Window 10h..34h; the resource up since 2h; one job 12h..15h (3 replicas), one 33h..now
    (running, 3 replicas), one before the window, one on another resource."""
    jobs = [
        _job("1", 12 * H, 15 * H),
        _job("2", 33 * H, None),
        _job("3", 1 * H, 9 * H),
        _job("4", 12 * H, 20 * H, on="other"),
    ]
    usage = _usage(_resource(2 * H), jobs, 10, 34)
    (pool,) = usage.pools
    assert usage.up_s == 24 * H and usage.jobs == 2 and usage.unplaced == []
    assert pool.busy_h == pytest.approx(3 * 3 + 3 * 1)
    assert pool.provisioned_h == pytest.approx(4 * 24)
    assert pool.idle_h == pytest.approx(4 * 24 - 12)
    (price,) = warm_cost(resource_outputs(_resource(2 * H)), load_catalog()).pools
    assert price.replica_usd_per_h is not None
    assert usage.idle_usd == pytest.approx(price.replica_usd_per_h * (96 - 12))


def test_only_the_time_up_in_the_window_is_provisioned() -> None:
    """Started 30h: 4 replicas x 4h; a resource never RUNNING (no startTime) has none."""
    assert _usage(_resource(30 * H), [], 10, 34).pools[0].provisioned_h == pytest.approx(16)
    never = _usage(_resource(None), [_job("1", 12 * H, 15 * H)], 10, 34)
    assert never.up_s == 0 and never.pools[0].provisioned_h == 0 and never.jobs == 0


def test_replicas_scaled_out_past_the_floor_are_busy_not_negative_idle() -> None:
    """A floor of 2 (autoscaling to 8) while two jobs hold 3 each for an hour: 6 up, 0 idle."""
    jobs = [_job("1", 12 * H, 13 * H), _job("2", 12 * H, 13 * H)]
    (pool,) = _usage(_resource(0, replicas=2, max_replicas=8), jobs, 10, 14).pools
    assert pool.busy_h == pytest.approx(6)
    assert pool.provisioned_h == pytest.approx(2 * 3 + 6)
    assert pool.idle_h == pytest.approx(6)


def test_a_job_that_fits_no_pool_now_is_named_not_counted() -> None:
    """The resource was updated since (its pool is a different machine now)."""
    resource = _resource(0)
    resource["resourcePools"][0]["machineSpec"]["machineType"] = "n1-standard-8"
    usage = _usage(resource, [_job("1", 12 * H, 15 * H)], 10, 34)
    assert usage.unplaced == [f"{PARENT}/customJobs/1"] and usage.pools[0].busy_h == 0


def test_an_unpriced_pool_leaves_the_idle_cost_unknown() -> None:
    resource = _resource(0)
    resource["name"] = NAME.replace("us-central1", "mars-north1")
    usage = _usage(resource, [], 10, 34)
    assert usage.idle_usd is None and "no price table for mars-north1" in (
        usage.unknown_because or ""
    )
