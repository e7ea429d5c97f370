"""pool_fit.place: which resource pool runs each worker pool of a job, and the misfits' words."""

from __future__ import annotations

from jobs.core.catalog import load_catalog
from jobs.core.stack import WarmPool
from jobs.custom_jobs.facts import facts_from_rest_job
from jobs.custom_jobs.pool_fit import Placement, place

L4 = WarmPool(
    id="l4",
    machine_type="g2-standard-8",
    accelerator_type="NVIDIA_L4",
    accelerator_count=1,
    boot_disk_type="pd-ssd",
    replica_count=2,
)
CPU = WarmPool(id="cpu", machine_type="n1-standard-4", replica_count=1, max_replica_count=3)


def _job(*pools: dict) -> dict:
    specs = [{"machineSpec": p, "replicaCount": n} for p, n in pools]
    return {"displayName": "j", "jobSpec": {"workerPoolSpecs": specs}}


def test_each_worker_pool_lands_on_its_match_and_shares_its_replicas() -> None:
    l4 = {"machineType": "g2-standard-8", "acceleratorType": "NVIDIA_L4", "acceleratorCount": 1}
    found = place(facts_from_rest_job(_job((l4, 1), (l4, 1))), "warm", [CPU, L4], load_catalog())
    assert found == Placement({"chief": "l4", "workers": "l4"}, {"l4": 2})


def test_a_built_in_accelerator_left_out_still_matches() -> None:
    found = place(
        facts_from_rest_job(_job(({"machineType": "g2-standard-8"}, 1))), "w", [L4], load_catalog()
    )
    assert isinstance(found, Placement)


def test_autoscaling_max_bounds_the_replicas_a_job_may_ask() -> None:
    cpu = {"machineType": "n1-standard-4"}
    fits = place(facts_from_rest_job(_job((cpu, 1), (cpu, 2))), "w", [CPU], load_catalog())
    assert isinstance(fits, Placement)
    too_many = place(facts_from_rest_job(_job((cpu, 1), (cpu, 3))), "w", [CPU], load_catalog())
    assert [str(m) for m in too_many] == [  # type: ignore[union-attr]
        "jobSpec.workerPoolSpecs[0].replicaCount: the job asks 4 replicas of pool 'cpu' of "
        "persistent resource 'w' (2 of the job's pools share it), which has at most 3 "
        "(n1-standard-4, pd-ssd, 1 replica (autoscaling to 3)): lower "
        "jobSpec.workerPoolSpecs[0].replicaCount to fit, or raise the pool's replica count"
    ]


def test_a_misfit_names_the_closest_pool_and_each_change() -> None:
    job = _job(({"machineType": "g2-standard-4"}, 1))
    job["jobSpec"]["workerPoolSpecs"][0]["diskSpec"] = {"bootDiskType": "pd-standard"}
    (misfit,) = place(facts_from_rest_job(job), "warm", [CPU, L4], load_catalog())  # type: ignore[misc]
    assert misfit.path == "jobSpec.workerPoolSpecs[0]"
    assert "the closest is pool 'l4' (g2-standard-8, 1 x NVIDIA_L4, pd-ssd, 2 replicas)" in (
        misfit.message
    )
    assert misfit.message.endswith(
        "set jobSpec.workerPoolSpecs[0].machineSpec.machineType to g2-standard-8; "
        "set jobSpec.workerPoolSpecs[0].diskSpec.bootDiskType to pd-ssd"
    )
