"""TPU templates as Google's custom training page configures them: what is checked, rendered,
priced and counted against quota (docs/vertex-facts.md, "TPUs"). The example templates
themselves are validated, snapshot and round-tripped with every other template."""

from __future__ import annotations

import copy
from typing import Any

import yaml

from jobs.core.stack import StackOutputs
from jobs.custom_jobs.compile import compile_job
from jobs.custom_jobs.facts import template_facts
from jobs.launch.checks import validate_template_doc
from jobs.launch.render import rest_dict
from jobs.pricing.estimates import estimate
from jobs.spec.gcloud import load_template
from jobs.spec.template import JobTemplate
from tests.conftest import TEMPLATES

RUN_ID = "tpu-20261128-080000-cafe"
SLICE = yaml.safe_load((TEMPLATES / "v5e-slice.yaml").read_text())


def with_chief(**chief: Any) -> dict:
    doc = copy.deepcopy(SLICE)
    doc["pools"]["chief"] = chief
    return doc


def problems(doc: dict) -> list[str]:
    return [str(p) for p in validate_template_doc(doc, region="us-central1")]


def test_a_single_host_slice_may_run_on_spot_a_multi_host_one_may_not() -> None:
    # "Using Spot VMs with TPU Pods isn't supported": a one-VM slice is no Pod.
    one_vm = with_chief(machine="ct5lp-hightpu-4t", tpu_topology="2x2")
    assert problems({**one_vm, "scheduling": {"strategy": "spot"}}) == []
    four_vms = {**SLICE, "scheduling": {"strategy": "spot"}}
    assert problems(four_vms) == [
        "scheduling.strategy: Spot VMs are not supported for TPU Pods, and a 4x4 slice of "
        "ct5lp-hightpu-4t is 4 VMs (hint: strategy: standard, or a single-host slice for Spot "
        "(tpu_topology: 2x2 (one VM)))"
    ]


def test_replicas_for_each_vm_of_a_slice_are_refused_with_what_to_write() -> None:
    doc = with_chief(machine="ct5lp-hightpu-4t", tpu_topology="4x4", replicas=4)
    assert problems(doc) == [
        "pools.chief.replicas: a 4x4 slice of ct5lp-hightpu-4t is 4 VMs, and Vertex starts all "
        "of them from one replica, not 4 (hint: replicas: 1 (for more chips pick a larger "
        "tpu_topology))"
    ]


def test_a_tpu_job_takes_no_gpu_pool_beside_it() -> None:
    doc = copy.deepcopy(SLICE)
    doc["pools"]["workers"] = {"machine": "g2-standard-8", "replicas": 1}
    found = problems(doc)
    assert len(found) == 1 and found[0].startswith("pools.workers: a TPU job runs one worker pool")
    assert "TPU and GPU pools do not mix" in found[0]


def test_a_v6e_machine_is_named_by_machine_and_topology_only() -> None:
    assert problems(with_chief(machine="ct6e-standard-4t", tpu_topology="4x4")) == []
    named = with_chief(
        machine="ct6e-standard-4t", tpu_topology="4x4", accelerator="TPU_V6E", accelerator_count=4
    )
    assert problems(named) == [
        "pools.chief.accelerator: TPU_V6E is no AcceleratorType of the Vertex v1 API: its "
        "machines (ct6e-standard-1t, ct6e-standard-4t, ct6e-standard-8t) are named with their "
        "topology only (hint: remove accelerator and accelerator_count; keep machine and "
        "tpu_topology)"
    ]


def test_tpu_v4_is_refused_as_unconfirmed_and_the_hint_names_a_confirmed_slice() -> None:
    found = problems(with_chief(machine="ct4p-hightpu-4t", tpu_topology="2x2x2"))
    assert any("ct4p-hightpu-4t is UNCONFIRMED for Vertex custom training" in p for p in found)
    assert any("machine: ct5lp-hightpu-4t with tpu_topology: 4x4" in p for p in found)


def test_a_tpu_vm_renders_machine_and_topology_only(stack: StackOutputs) -> None:
    job = rest_dict(
        compile_job(load_template(TEMPLATES / "v5e-slice.yaml"), stack, RUN_ID).to_proto()
    )
    (pool,) = job["jobSpec"]["workerPoolSpecs"]
    assert pool["machineSpec"] == {"machineType": "ct5lp-hightpu-4t", "tpuTopology": "4x4"}
    assert pool["replicaCount"] == "1"


def test_a_slice_needs_quota_for_every_chip_and_vcpu_of_its_vms_and_has_no_price() -> None:
    cost = estimate(template_facts(load_template(TEMPLATES / "v5e-slice.yaml")), "us-central1")
    assert cost.quota == {
        "aiplatform.googleapis.com/custom_model_training_tpu_v5e": 16,  # 4 VMs x 4 chips
        "aiplatform.googleapis.com/custom_model_training_cpus": 4 * 112,
    }
    assert cost.usd_per_h is None
    assert cost.unknown_because == (
        "no on-demand price for TPU_V5_LITEPOD, ct5lp-hightpu-4t in "
        "vertex-training-us-central1-2026-09"
    )
    (pool,) = cost.pools
    assert (pool.accelerator, pool.accelerator_count, pool.replicas) == ("TPU_V5_LITEPOD", 16, 1)


def test_a_tpu_pod_counts_its_cores_once() -> None:
    cost = estimate(template_facts(load_template(TEMPLATES / "tpu-v2-pod.yaml")), "us-central1")
    # cloud-tpu: Google gives no vCPU figure, so no CPU quota is counted (UNCONFIRMED).
    assert cost.quota == {"aiplatform.googleapis.com/custom_model_training_tpu_v2": 32}


LORA = yaml.safe_load((TEMPLATES / "v5e-lora.yaml").read_text())


def with_rung(doc: dict, **changes: Any) -> dict:
    return {**doc, "capacity": {"ladder": [{"set": changes}]}}


def test_a_ladder_rung_may_leave_a_tpu_slice_for_a_gpu_machine_dropping_its_topology() -> None:
    to_l4 = {"pools.chief.machine": "g2-standard-8", "scheduling.strategy": "standard"}
    assert problems(with_rung(LORA, **to_l4, **{"pools.chief.tpu_topology": None})) == []
    assert problems(with_rung(LORA, **to_l4)) == [
        "capacity.ladder[0]: pools.chief.tpu_topology: tpu topology is only for TPU VM "
        "machines, not g2-standard-8 (hint: remove it (in a ladder rung's set or --set: "
        "tpu_topology: null))"
    ]


def test_a_ladder_rung_may_leave_a_gpu_for_a_tpu_slice_dropping_its_accelerator() -> None:
    on_t4 = with_chief(machine="n1-standard-8", accelerator="NVIDIA_TESLA_T4", accelerator_count=1)
    to_v5e = {"pools.chief.machine": "ct5lp-hightpu-4t", "pools.chief.tpu_topology": "4x4"}
    dropped = {"pools.chief.accelerator": None, "pools.chief.accelerator_count": None}
    assert problems(with_rung(on_t4, **to_v5e, **dropped)) == []
    [kept] = problems(with_rung(on_t4, **to_v5e))
    assert kept.startswith("capacity.ladder[0]: pools.chief.accelerator: NVIDIA_TESLA_T4 cannot")


def test_a_tpu7x_slice_is_named_by_machine_and_a_3d_topology_and_counts_its_chips() -> None:
    assert problems(with_chief(machine="tpu7x-standard-4t", tpu_topology="4x4x4")) == []
    flat = problems(with_chief(machine="tpu7x-standard-4t", tpu_topology="4x4"))
    assert len(flat) == 1 and "2x2x1, 2x2x2, 2x2x4" in flat[0] and "8x8x16" in flat[0]
    named = with_chief(machine="tpu7x-standard-4t", tpu_topology="2x2x1", accelerator="TPU_V7X")
    assert any("TPU_V7X is no AcceleratorType of the Vertex v1 API" in p for p in problems(named))
    doc = with_chief(machine="tpu7x-standard-4t", tpu_topology="2x2x4")
    cost = estimate(template_facts(JobTemplate.model_validate(doc)), "us-central1")
    # 4 VMs x 4 chips; no vCPU figure is known for the machine, so no CPU quota is counted.
    assert cost.quota == {"aiplatform.googleapis.com/custom_model_training_tpu7x": 16}
    assert cost.usd_per_h is None


def problems_in(doc: dict, region: str) -> list[str]:
    return [str(p) for p in validate_template_doc(doc, region=region)]


def test_a_region_known_only_for_its_tpus_takes_them_and_calls_the_rest_unknown() -> None:
    # Google's locations page gives us-east1 TPU v5e and v6e for training; vtx records no GPU
    # or CPU machine there, so those are unknown, never "not offered".
    v5e = with_chief(machine="ct5lp-hightpu-4t", tpu_topology="2x2")
    assert problems_in(v5e, "us-east1") == []
    assert problems_in(with_chief(machine="ct6e-standard-4t", tpu_topology="2x2"), "us-east5") == []
    (l4,) = problems_in(
        with_chief(machine="g2-standard-8", accelerator="NVIDIA_L4", accelerator_count=1),
        "us-east1",
    )[:1]
    assert l4.startswith(
        "pools.chief.machine: whether us-east1 offers g2-standard-8 (g2) for training is "
        "unknown: the catalog knows us-east1 only for its TPUs for training "
        "(TPU_V5_LITEPOD, TPU_V6E)"
    )
    gpu = problems_in(
        with_chief(machine="g2-standard-8", accelerator="NVIDIA_L4", accelerator_count=1),
        "us-east1",
    )
    assert any(
        p.startswith("pools.chief.accelerator: whether us-east1 offers NVIDIA_L4 for training")
        for p in gpu
    ), gpu
    assert not any("is not offered" in p for p in gpu), gpu
    cpu = problems_in(with_chief(machine="n1-standard-4"), "us-west4")
    assert (
        len(cpu) == 1
        and "whether us-west4 offers n1-standard-4 (n1) for training is unknown" in cpu[0]
    )


def test_a_tpu_a_tpu_only_region_lacks_is_not_offered_and_the_message_names_its_tpus() -> None:
    (v6e,) = problems_in(with_chief(machine="ct6e-standard-4t", tpu_topology="2x2"), "us-west4")
    assert v6e.startswith(
        "pools.chief.machine: ct6e-standard-4t (ct6e) is not offered for training in "
        "us-west4 (its TPUs for training: TPU_V5_LITEPOD)"
    )
    assert "us-east1" in v6e and "asia-northeast1" in v6e  # the regions that have it
    pod = problems_in(
        with_chief(machine="cloud-tpu", accelerator="TPU_V2", accelerator_count=32), "asia-east1"
    )
    assert pod == [
        "pools.chief.accelerator_count: TPU_V2 Pods (32 cores) are not offered for training in "
        "asia-east1 (hint: regions with TPU_V2 Pods: us-central1, europe-west4; or "
        "accelerator_count: 8 (one VM))"
    ]
    assert (
        problems_in(
            with_chief(machine="cloud-tpu", accelerator="TPU_V2", accelerator_count=8), "asia-east1"
        )
        == []
    )
