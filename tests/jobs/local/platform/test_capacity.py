"""The local platform's capacity rules as pure decisions (jobs/local/platform/capacity.py): what a
job
needs, when a create passes a quota (Vertex's 429 sentence), when a job starts, waits PENDING
or fails (Spot stockout, FLEX_START past maxWaitDuration), and the quotaInfos it serves."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from jobs.core.catalog import load_catalog
from jobs.local.platform.capacity import (
    QUOTA_EXCEEDED,
    UNLIMITED_QUOTA,
    Admission,
    Capacity,
    CapacityFileError,
    Need,
    admit,
    held,
    load_capacity,
    need_of,
    quota_in_use,
    quota_message,
    quota_shortfalls,
)
from jobs.local.platform.quota_infos import quota_infos
from jobs.local.platform.rpc_status import Code
from tests.conftest import REPO

REGION = "us-central1"

L4 = "aiplatform.googleapis.com/custom_model_training_nvidia_l4_gpus"

L4_SPOT = "aiplatform.googleapis.com/custom_model_training_preemptible_nvidia_l4_gpus"

CPUS = "aiplatform.googleapis.com/custom_model_training_cpus"

TPU_V5E = "aiplatform.googleapis.com/custom_model_training_tpu_v5e"

SLICE_4X4 = {
    "machineSpec": {"machineType": "ct5lp-hightpu-4t", "tpuTopology": "4x4"},
    "replicaCount": 1,
}

DAY_S = 86400.0


def _pool(machine: str, replicas: int, accelerator: str | None = None, count: int = 0) -> dict:
    spec: dict = {"machineType": machine}
    if accelerator:
        spec |= {"acceleratorType": accelerator, "acceleratorCount": count}
    return {"machineSpec": spec, "replicaCount": replicas}


def _job(*pools: dict, strategy: str | None = None, max_wait: str | None = None) -> dict:
    scheduling = {k: v for k, v in (("strategy", strategy), ("maxWaitDuration", max_wait)) if v}
    return {
        "displayName": "j",
        "jobSpec": {"workerPoolSpecs": list(pools), "scheduling": scheduling},
    }


def _capacity(accelerators: dict | None = None, quotas: dict | None = None) -> Capacity:
    region = {"accelerators": accelerators or {}, "quotas": quotas or {}}
    return Capacity.model_validate({"regions": {REGION: region}})


def _need(count: int, strategy: str = "STANDARD", max_wait_s: float | None = None) -> Need:
    metric = L4 if strategy == "STANDARD" else L4_SPOT
    return Need(REGION, strategy, {metric: count}, {"NVIDIA_L4": count}, max_wait_s)


@pytest.mark.parametrize(
    ("job", "quota", "accelerators"),
    [
        (  # chief + 2 workers on g2-standard-4 (4 vCPUs, 1 L4 each)
            _job(
                _pool("g2-standard-4", 1, "NVIDIA_L4", 1), _pool("g2-standard-4", 2, "NVIDIA_L4", 1)
            ),
            {CPUS: 12, L4: 3},
            {"NVIDIA_L4": 3},
        ),
        (  # Spot draws on the preemptible metric
            _job(_pool("g2-standard-24", 1, "NVIDIA_L4", 2), strategy="SPOT"),
            {CPUS: 24, L4_SPOT: 2},
            {"NVIDIA_L4": 2},
        ),
        (  # so does FLEX_START
            _job(_pool("g2-standard-4", 2, "NVIDIA_L4", 1), strategy="FLEX_START"),
            {CPUS: 8, L4_SPOT: 2},
            {"NVIDIA_L4": 2},
        ),
        (_job(_pool("n1-standard-4", 2)), {CPUS: 8}, {}),  # CPU only: no accelerator
        (  # a 4x4 TPU v5e slice: one replica, 4 VMs of 4 chips and 112 vCPUs each
            _job(SLICE_4X4),
            {CPUS: 448, TPU_V5E: 16},
            {"TPU_V5_LITEPOD": 16},
        ),
    ],
)
def test_a_job_needs_every_pool_at_full_size(job: dict, quota: dict, accelerators: dict) -> None:
    need = need_of(job, REGION)
    assert dict(need.quota) == quota
    assert dict(need.accelerators) == accelerators


def test_flex_start_max_wait_is_read_and_zero_kept() -> None:
    flex = _pool("g2-standard-4", 1, "NVIDIA_L4", 1)
    assert need_of(_job(flex, strategy="FLEX_START", max_wait="0s"), REGION).max_wait_s == 0
    assert need_of(_job(flex, strategy="FLEX_START", max_wait="90s"), REGION).max_wait_s == 90
    assert need_of(_job(flex, strategy="FLEX_START"), REGION).max_wait_s is None


@pytest.mark.parametrize(
    ("limits", "in_use", "needed", "short"),
    [
        ({}, {}, 100, []),  # nothing set: unlimited
        ({L4: 4}, {}, 4, []),  # exactly at the limit fits
        ({L4: 4}, {}, 5, [L4]),  # the job alone passes it
        ({L4: 4}, {L4: 2}, 3, [L4]),  # beside what active jobs hold
        ({L4_SPOT: 1}, {}, 3, []),  # another metric's limit does not apply
        ({L4: 0}, {}, 1, [L4]),  # a zero limit refuses any
    ],
)
def test_a_create_passes_a_quota_beside_the_jobs_that_hold_it(
    limits: dict, in_use: dict, needed: int, short: list[str]
) -> None:
    found = quota_shortfalls(_capacity(quotas=limits), _need(needed), in_use)
    assert [s.metric for s in found] == short


def test_quota_message_is_vertexs_sentence_with_limit_use_and_region() -> None:
    [short] = quota_shortfalls(_capacity(quotas={L4: 4}), _need(3), {L4: 2})
    message = quota_message([short], REGION)
    assert message.startswith(f"{QUOTA_EXCEEDED}{L4}. ")
    assert f"{L4}: limit 4 in region {REGION}, 2 in use, this job needs 3" in message


def test_quota_in_use_counts_the_region_only() -> None:
    elsewhere = Need("europe-west4", "STANDARD", {L4: 8})
    assert quota_in_use([_need(2), _need(1), elsewhere], REGION) == {L4: 3}


@pytest.mark.parametrize(
    ("accelerators", "need", "in_use", "waited_s", "admission"),
    [
        ({}, _need(64), {}, 0, Admission.START),  # unlimited
        ({"NVIDIA_L4": {"on_demand": 2}}, _need(2), {}, 0, Admission.START),
        ({"NVIDIA_L4": {"on_demand": 2}}, _need(3), {}, 0, Admission.WAIT),
        (
            {"NVIDIA_L4": {"on_demand": 2}},
            _need(1),
            {("NVIDIA_L4", "on_demand"): 2},
            0,
            Admission.WAIT,
        ),
        # Spot and on-demand are counted apart
        ({"NVIDIA_L4": {"on_demand": 0, "spot": 2}}, _need(2, "SPOT"), {}, 0, Admission.START),
        ({"NVIDIA_L4": {"spot": 1}}, _need(2, "SPOT"), {}, 0, Admission.WAIT),
        # a stockout fails a Spot job, whatever the counts say, and no other
        ({"NVIDIA_L4": {"spot_stockout": True}}, _need(1, "SPOT"), {}, 0, Admission.FAIL),
        ({"NVIDIA_L4": {"spot_stockout": True}}, _need(1), {}, 0, Admission.START),
        # FLEX_START waits for on-demand capacity up to maxWaitDuration (absent: 24 h)
        ({"NVIDIA_L4": {"on_demand": 0}}, _need(1, "FLEX_START", 60), {}, 59, Admission.WAIT),
        ({"NVIDIA_L4": {"on_demand": 0}}, _need(1, "FLEX_START", 60), {}, 60, Admission.FAIL),
        ({"NVIDIA_L4": {"on_demand": 0}}, _need(1, "FLEX_START", 0), {}, 1e9, Admission.WAIT),
        ({"NVIDIA_L4": {"on_demand": 0}}, _need(1, "FLEX_START"), {}, DAY_S - 1, Admission.WAIT),
        ({"NVIDIA_L4": {"on_demand": 0}}, _need(1, "FLEX_START"), {}, DAY_S, Admission.FAIL),
        ({"NVIDIA_L4": {"on_demand": 1}}, _need(1, "FLEX_START", 60), {}, 600, Admission.START),
        # STANDARD waits as long as it takes
        ({"NVIDIA_L4": {"on_demand": 0}}, _need(1), {}, 1e9, Admission.WAIT),
    ],
)
def test_admission(
    accelerators: dict, need: Need, in_use: dict, waited_s: float, admission: Admission
) -> None:
    decision = admit(
        _capacity(accelerators), need, in_use, waited_s=waited_s, default_max_wait_s=DAY_S
    )
    assert decision.admission is admission
    assert (decision.error is not None) == (admission is Admission.FAIL)


def test_a_spot_stockout_fails_with_stockout_and_the_region() -> None:
    capacity = _capacity({"NVIDIA_L4": {"spot_stockout": True}})
    decision = admit(capacity, _need(1, "SPOT"), {}, waited_s=0, default_max_wait_s=DAY_S)
    assert decision.error is not None
    assert decision.error.code is Code.RESOURCE_EXHAUSTED
    assert decision.error.message.startswith("STOCKOUT: Spot capacity for NVIDIA_L4")
    assert f"Resources are insufficient in region: {REGION}" in decision.error.message


def test_a_tpu_slice_meets_tpu_quota_and_spot_stockouts_as_a_gpu_job_does() -> None:
    # What lets a ladder fall back from a v5e slice to GPUs: the slice is refused for its
    # chips' quota, and a single-host slice on Spot stocks out, naming the TPU.
    slice_job = _job(
        {
            "machineSpec": {"machineType": "ct5lp-hightpu-4t", "tpuTopology": "4x4"},
            "replicaCount": 1,
        }
    )
    [short] = quota_shortfalls(_capacity(quotas={TPU_V5E: 8}), need_of(slice_job, REGION), {})
    assert (short.metric, short.limit, short.needed) == (TPU_V5E, 8, 16)
    spot_job = _job(
        {
            "machineSpec": {"machineType": "ct5lp-hightpu-4t", "tpuTopology": "2x2"},
            "replicaCount": 1,
        },
        strategy="SPOT",
    )
    capacity = _capacity({"TPU_V5_LITEPOD": {"spot_stockout": True}})
    decision = admit(capacity, need_of(spot_job, REGION), {}, waited_s=0, default_max_wait_s=DAY_S)
    assert decision.error is not None
    assert decision.error.message.startswith("STOCKOUT: Spot capacity for TPU_V5_LITEPOD")


def test_flex_start_past_its_wait_fails_naming_it() -> None:
    capacity = _capacity({"NVIDIA_L4": {"on_demand": 0}})
    decision = admit(
        capacity, _need(2, "FLEX_START", 30), {}, waited_s=31, default_max_wait_s=DAY_S
    )
    assert decision.error is not None
    assert decision.error.code is Code.RESOURCE_EXHAUSTED
    assert "maxWaitDuration of 30 s" in decision.error.message
    assert "2 x NVIDIA_L4 on_demand (0 of 0 in use)" in decision.error.message


def test_a_wait_says_what_is_short_and_the_state() -> None:
    capacity = _capacity({"NVIDIA_L4": {"on_demand": 2}})
    used = {("NVIDIA_L4", "on_demand"): 1}
    decision = admit(capacity, _need(2), used, waited_s=0, default_max_wait_s=DAY_S)
    assert decision.note == (
        f"waiting for resources: 2 x NVIDIA_L4 on_demand (1 of 2 in use) in region {REGION}; "
        "the job stays JOB_STATE_PENDING until they are free"
    )


def test_started_jobs_hold_their_accelerators_by_pool() -> None:
    needs = [_need(2), _need(1, "SPOT"), _need(1, "FLEX_START")]
    assert held(needs, REGION) == {("NVIDIA_L4", "on_demand"): 3, ("NVIDIA_L4", "spot"): 1}


@pytest.mark.parametrize(
    ("model", "says"),
    [
        ({"regions": {"us-central": {}}}, "did you mean us-central1"),
        ({"regions": {REGION: {"accelerators": {"NVIDIA_L44": {}}}}}, "did you mean NVIDIA_L4"),
        (
            {"regions": {REGION: {"quotas": {"custom_model_training_nvidia_l4_gpus": 1}}}},
            "quota metric",
        ),
        ({"regions": {REGION: {"quotas": {L4: -1}}}}, "0 or more"),
        ({"regions": {REGION: {"accelerators": {"NVIDIA_L4": {"on_demand": -1}}}}}, "greater than"),
        ({"regions": {REGION: {"accelerators": {"NVIDIA_L4": {"ondemand": 1}}}}}, "Extra inputs"),
    ],
)
def test_a_bad_capacity_file_names_the_place(tmp_path: Path, model: dict, says: str) -> None:
    path = tmp_path / "capacity.yaml"
    path.write_text(yaml.safe_dump(model))
    with pytest.raises(CapacityFileError, match=says):
        load_capacity(path)


def test_the_readme_example_loads(tmp_path: Path) -> None:
    readme = (REPO / "jobs" / "local" / "README.md").read_text()
    start = readme.index("```yaml\n# capacity.yaml") + len("```yaml\n")
    example = readme[start:].split("```", 1)[0]
    path = tmp_path / "capacity.yaml"
    path.write_text(example)
    capacity = load_capacity(path)
    assert capacity.regions[REGION].accelerators["NVIDIA_L4"].on_demand == 2


def test_quota_infos_carry_the_catalogs_ids_and_the_limits_set() -> None:
    infos = {i["metric"]: i for i in quota_infos(_capacity(quotas={L4: 8}), "424242424242")}
    l4 = load_catalog().accelerators["NVIDIA_L4"]
    info = infos[L4]
    assert info["quotaId"] == l4.cloud_quota_id(False)
    assert infos[L4_SPOT]["quotaId"] == l4.cloud_quota_id(True)
    assert info["name"] == (
        "projects/424242424242/locations/global/services/aiplatform.googleapis.com/"
        f"quotaInfos/{info['quotaId']}"
    )
    assert info["containerType"] == "PROJECT"
    assert info["dimensions"] == ["region"]
    by_region = {d["dimensions"]["region"]: d for d in info["dimensionsInfos"]}
    assert by_region[REGION] == {
        "dimensions": {"region": REGION},
        "details": {"value": "8"},
        "applicableLocations": [REGION],
    }
    assert by_region["europe-west4"]["details"]["value"] == str(UNLIMITED_QUOTA)
    assert infos[CPUS]["quotaId"] == "CustomModelTrainingCpusPerProjectPerRegion"
