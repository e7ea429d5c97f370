# ruff: noqa: E501  (the rule table reads best one case per line)
"""One test per validation rule: a valid REST CustomJob, one mutation, and proof that the named
rule (and only it) turns the mutation into a problem at the right path with a hint."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest

from jobs.core.catalog import load_catalog
from jobs.custom_jobs.facts import facts_from_rest_job
from jobs.custom_jobs.rules.registry import RULES, run_rules
from jobs.custom_jobs.validate import validate_custom_job
from jobs.spec.rest_check import check_rest_fields

POOL0 = "jobSpec.workerPoolSpecs[0]"
POOL1 = "jobSpec.workerPoolSpecs[1]"
POOL2 = "jobSpec.workerPoolSpecs[2]"
RS_IMAGE = "us-docker.pkg.dev/vertex-ai-restricted/training/reductionserver:latest"


def valid_job() -> dict[str, Any]:
    return {
        "displayName": "lora-run",
        "labels": {"team": "ml"},
        "jobSpec": {
            "workerPoolSpecs": [
                {
                    "machineSpec": {
                        "machineType": "g2-standard-8",
                        "acceleratorType": "NVIDIA_L4",
                        "acceleratorCount": 1,
                    },
                    "replicaCount": "1",
                    "diskSpec": {"bootDiskType": "pd-ssd", "bootDiskSizeGb": 200},
                    "containerSpec": {
                        "imageUri": "us-central1-docker.pkg.dev/p/r/trainer:v1",
                        "args": ["--config", "x.yaml"],
                        "env": [{"name": "TOKENIZERS_PARALLELISM", "value": "false"}],
                    },
                }
            ],
            "scheduling": {"strategy": "SPOT", "timeout": "86400s"},
        },
    }


def test_valid_job_has_no_problems() -> None:
    assert validate_custom_job(valid_job(), region="us-central1") == []


def _pool(job: dict, i: int) -> dict:
    return job["jobSpec"]["workerPoolSpecs"][i]


def _add_workers(job: dict, machine: str = "g2-standard-8") -> None:
    workers = copy.deepcopy(_pool(job, 0))
    workers["machineSpec"]["machineType"] = machine
    workers["replicaCount"] = 1
    job["jobSpec"]["workerPoolSpecs"].append(workers)


def _add_rs(job: dict, image: str = RS_IMAGE, machine: str = "n1-highcpu-16") -> None:
    job["jobSpec"]["workerPoolSpecs"].append(
        {
            "machineSpec": {"machineType": machine},
            "replicaCount": 2,
            "containerSpec": {"imageUri": image},
        }
    )


def _set(path: list[str | int], value: Any) -> Callable[[dict], None]:
    def mutate(job: dict) -> None:
        node: Any = job
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value

    return mutate


def _chain(*mutations: Callable[[dict], None]) -> Callable[[dict], None]:
    def mutate(job: dict) -> None:
        for m in mutations:
            m(job)

    return mutate


M0 = ["jobSpec", "workerPoolSpecs", 0, "machineSpec"]
ENV0 = ["jobSpec", "workerPoolSpecs", 0, "containerSpec", "env"]
SCHED = ["jobSpec", "scheduling"]
RA0 = [*M0, "reservationAffinity"]
RA0_PATH = f"{POOL0}.machineSpec.reservationAffinity"
RESERVATION = "projects/vtx-dev-123/zones/us-central1-a/reservations/l4-pool"
FLEX = _set([*SCHED, "strategy"], "FLEX_START")
STANDARD = _set([*SCHED, "strategy"], "STANDARD")

CASES: list[tuple[str, Callable[[dict], None], str, str]] = [
    # (rule, mutation, path of the problem, a word the message or hint must contain)
    ("display_name_valid", _set(["displayName"], "x" * 129), "displayName", "128"),
    ("labels_valid", _set(["labels"], {"Team": "ML"}), "labels.Team", "lower case"),
    ("machine_type_known", _set([*M0, "machineType"], "g2-standard-7"), f"{POOL0}.machineSpec.machineType", "did you mean"),
    ("machine_type_known", _set([*M0, "machineType"], None), f"{POOL0}.machineSpec.machineType", "required"),
    ("accelerator_fits_machine", _set([*M0, "acceleratorType"], "NVIDIA_TESLA_T4"), f"{POOL0}.machineSpec.acceleratorType", "g2-standard-8 comes with NVIDIA_L4"),
    ("accelerator_fits_machine", _set(M0, {"machineType": "n1-standard-8", "acceleratorType": "NVIDIA_TESLA_T4", "acceleratorCount": 8}), f"{POOL0}.machineSpec.acceleratorCount", "1, 2, 4"),
    ("accelerator_fits_machine", _set(M0, {"machineType": "a2-highgpu-1g", "acceleratorType": "NVIDIA_TESLA_A100", "acceleratorCount": 2}), f"{POOL0}.machineSpec.acceleratorCount", "a2-highgpu-2g"),
    ("accelerator_fits_machine", _set(M0, {"machineType": "a2-highgpu-1g"}), f"{POOL0}.machineSpec.acceleratorType", "NVIDIA_TESLA_A100"),
    ("accelerator_fits_machine", _set(M0, {"machineType": "n1-standard-4", "acceleratorCount": 1}), f"{POOL0}.machineSpec.acceleratorCount", "accelerator type"),
    ("chief_pool_present", _set(["jobSpec", "workerPoolSpecs"], [{}, _pool(valid_job(), 0)]), "jobSpec.workerPoolSpecs", "chief"),
    ("chief_single_replica", _set(["jobSpec", "workerPoolSpecs", 0, "replicaCount"], 3), f"{POOL0}.replicaCount", "replicaCount: 2"),
    ("replicas_positive", _chain(_add_workers, _set(["jobSpec", "workerPoolSpecs", 1, "replicaCount"], 0)), f"{POOL1}.replicaCount", "at least 1"),
    ("machines_within_limit", _chain(_add_workers, _set(["jobSpec", "workerPoolSpecs", 1, "replicaCount"], str(2**31))), f"{POOL1}.replicaCount", "2,147,483,649 machines at once (chief 1, workers 2,147,483,648); vtx takes at most 10,000"),
    ("chief_single_replica", _set(["jobSpec", "workerPoolSpecs", 0, "replicaCount"], 0), f"{POOL0}.replicaCount", "not 0"),
    # The API's JSON leaves a 0 out: an absent count is proto3's 0, never a default of 1.
    ("chief_single_replica", lambda j: j["jobSpec"]["workerPoolSpecs"][0].pop("replicaCount"), f"{POOL0}.replicaCount", "not 0"),
    ("image_present", _set(["jobSpec", "workerPoolSpecs", 0, "containerSpec"], {}), f"{POOL0}.containerSpec.imageUri", "image"),
    ("reduction_server_rules", _chain(lambda j: _pool(j, 0) and j["jobSpec"]["workerPoolSpecs"].append({}), _add_rs), f"{POOL2}", "add workerPoolSpecs[1]"),
    ("reduction_server_rules", _chain(_add_workers, _add_rs, _set(["jobSpec", "workerPoolSpecs", 2, "containerSpec", "imageUri"], "trainer")), f"{POOL2}.containerSpec.imageUri", "reductionserver"),
    ("reduction_server_rules", _chain(_add_workers, _add_rs, _set(["jobSpec", "workerPoolSpecs", 2, "machineSpec"], {"machineType": "g2-standard-4", "acceleratorType": "NVIDIA_L4", "acceleratorCount": 1})), f"{POOL2}.machineSpec.acceleratorType", "CPU"),
    ("reduction_server_rules", _chain(_set(M0, {"machineType": "n1-standard-8"}), _add_workers, _add_rs), f"{POOL0}.machineSpec.machineType", "GPU"),
    ("tpu_topology_valid", _set(M0, {"machineType": "ct5lp-hightpu-4t", "acceleratorType": "TPU_V5_LITEPOD", "acceleratorCount": 4}), f"{POOL0}.machineSpec.tpuTopology", "tpuTopology: one of 2x2, 2x4, 4x4"),
    ("tpu_topology_valid", _set(M0, {"machineType": "ct5lp-hightpu-8t", "tpuTopology": "4x4"}), f"{POOL0}.machineSpec.tpuTopology", "machineType: ct5lp-hightpu-4t for 4x4"),
    ("tpu_topology_valid", _set([*M0, "tpuTopology"], "2x2"), f"{POOL0}.machineSpec.tpuTopology", "only for TPU"),
    ("tpu_topology_valid", _set(M0, {"machineType": "cloud-tpu", "acceleratorType": "TPU_V3", "acceleratorCount": 8, "tpuTopology": "2x2"}), f"{POOL0}.machineSpec.tpuTopology", "sized by its accelerator count"),
    # Google: "Using Spot VMs with TPU Pods isn't supported"; a multi-host slice is refused ...
    ("tpu_spot_not_on_pods", _set(M0, {"machineType": "ct5lp-hightpu-4t", "tpuTopology": "4x4"}), "jobSpec.scheduling.strategy", "4x4 slice of ct5lp-hightpu-4t is 4 VMs"),
    ("tpu_spot_not_on_pods", _set(M0, {"machineType": "cloud-tpu", "acceleratorType": "TPU_V3", "acceleratorCount": 32}), "jobSpec.scheduling.strategy", "acceleratorCount: 8 (one VM)"),
    # ... and one replica is the whole slice, however many VMs its topology is.
    ("tpu_one_pool_one_replica", _chain(_set(M0, {"machineType": "ct5lp-hightpu-4t", "tpuTopology": "4x4"}), _set(["jobSpec", "workerPoolSpecs", 0, "replicaCount"], "4")), f"{POOL0}.replicaCount", "is 4 VMs, and Vertex starts all of them from one replica"),
    ("tpu_one_pool_one_replica", _chain(_set(M0, {"machineType": "ct5lp-hightpu-4t", "tpuTopology": "2x2"}), _add_workers), f"{POOL1}", "TPU and GPU pools do not mix"),
    ("tpu_machine_confirmed", _set(M0, {"machineType": "ct4p-hightpu-4t", "tpuTopology": "2x2x1"}), f"{POOL0}.machineSpec.machineType", "UNCONFIRMED"),
    ("accelerator_fits_machine", _set(M0, {"machineType": "cloud-tpu", "acceleratorType": "TPU_V3", "acceleratorCount": 16}), f"{POOL0}.machineSpec.acceleratorCount", "8, 32, 64, 96, ..., 2048"),
    ("flex_start_gpus", _chain(FLEX, _set(M0, {"machineType": "ct5lp-hightpu-4t", "tpuTopology": "4x4"})), f"{POOL0}.machineSpec.machineType", "strategy: STANDARD, or a machine"),
    ("strategy_known", _set([*SCHED, "strategy"], "LOW_COST"), "jobSpec.scheduling.strategy", "SPOT"),
    ("flex_start_only_fields", _set([*SCHED, "maxWaitDuration"], "3600s"), "jobSpec.scheduling.maxWaitDuration", "FLEX_START"),
    ("timeout_bounds", _set([*SCHED, "timeout"], "1209600s"), "jobSpec.scheduling.timeout", "7d"),
    ("max_wait_bounds", _chain(FLEX, _set([*SCHED, "maxWaitDuration"], "315576000001s")), "jobSpec.scheduling.maxWaitDuration", "0 waits indefinitely"),
    ("flex_start_gpus", _chain(FLEX, _set(M0, {"machineType": "n1-standard-8", "acceleratorType": "NVIDIA_TESLA_T4", "acceleratorCount": 1})), f"{POOL0}.machineSpec.acceleratorType", "NVIDIA_L4"),
    ("flex_start_gpus", _chain(FLEX, _set(M0, {"machineType": "n1-standard-8"})), f"{POOL0}.machineSpec.machineType", "no GPU"),
    ("flex_start_same_machines", _chain(FLEX, lambda j: _add_workers(j, "g2-standard-16")), f"{POOL1}.machineSpec.machineType", "machineType: g2-standard-8"),
    ("flex_start_same_machines", _chain(FLEX, _add_workers, _add_rs), f"{POOL2}.machineSpec.machineType", "remove the Reduction Server"),
    ("reservation_affinity_valid", _chain(STANDARD, _set(RA0, {"key": "compute.googleapis.com/reservation-name", "values": [RESERVATION]})), f"{RA0_PATH}.reservationAffinityType", "TYPE_UNSPECIFIED"),
    ("reservation_affinity_valid", _chain(STANDARD, _set(RA0, {"reservationAffinityType": "SPECIFIC_RESERVATION", "values": [RESERVATION]})), f"{RA0_PATH}.key", "compute.googleapis.com/reservation-name"),
    ("reservation_affinity_valid", _chain(STANDARD, _set(RA0, {"reservationAffinityType": "SPECIFIC_RESERVATION", "key": "compute.googleapis.com/reservation-name"})), f"{RA0_PATH}.values", "values is empty"),
    ("reservation_affinity_valid", _chain(STANDARD, _set(RA0, {"reservationAffinityType": "SPECIFIC_RESERVATION", "key": "compute.googleapis.com/reservation-name", "values": ["l4-pool"]})), f"{RA0_PATH}.values[0]", "projects/PROJECT/zones/ZONE/reservations/l4-pool"),
    ("reservation_strategy", _set(RA0, {"reservationAffinityType": "ANY_RESERVATION"}), f"{RA0_PATH}.reservationAffinityType", "Spot VMs cannot"),
    ("reservation_strategy", _chain(FLEX, _set(RA0, {"reservationAffinityType": "SPECIFIC_RESERVATION", "key": "compute.googleapis.com/reservation-name", "values": [RESERVATION]})), f"{RA0_PATH}.reservationAffinityType", "NO_RESERVATION"),
    ("boot_disk_valid", _set(["jobSpec", "workerPoolSpecs", 0, "diskSpec", "bootDiskSizeGb"], 50), f"{POOL0}.diskSpec.bootDiskSizeGb", "100"),
    ("boot_disk_valid", _set(["jobSpec", "workerPoolSpecs", 0, "diskSpec", "bootDiskType"], "local-ssd"), f"{POOL0}.diskSpec.bootDiskType", "pd-ssd"),
    ("no_persistent_disk_paths", _set(["jobSpec", "workerPoolSpecs", 0, "containerSpec", "args"], ["--out", "/mnt/disks/ckpt"]), f"{POOL0}.containerSpec.args[1]", "AIP_CHECKPOINT_DIR"),
    ("env_count", _set(ENV0, [{"name": f"V{i}", "value": "1"} for i in range(101)]), f"{POOL0}.containerSpec.env", "100"),
    ("env_names_valid", _set(ENV0, [{"name": "my-var", "value": "1"}]), f"{POOL0}.containerSpec.env[0]", "MY_VAR"),
    ("env_names_valid", _set(ENV0, [{"name": "2fa-code", "value": "1"}]), f"{POOL0}.containerSpec.env[0]", "e.g. _2FA_CODE"),
    ("env_names_valid", _set(ENV0, [{"name": "", "value": "1"}]), f"{POOL0}.containerSpec.env[0]", "without a name"),
    ("env_names_valid", _set(ENV0, [{"value": "1"}]), f"{POOL0}.containerSpec.env[0]", "without a name"),
    ("env_names_unique", _set(ENV0, [{"name": "A", "value": "1"}, {"name": "A", "value": "2"}]), f"{POOL0}.containerSpec.env[1]", "twice"),
    ("env_values_startable", _set(ENV0, [{"name": "A", "value": "x\x00y"}]), f"{POOL0}.containerSpec.env[0].value", "NUL"),
    ("output_dir_is_a_gcs_folder", _set(["jobSpec", "baseOutputDirectory"], {"outputUriPrefix": "file:///etc"}), "jobSpec.baseOutputDirectory.outputUriPrefix", "is not a Cloud Storage URI"),
    ("output_dir_is_a_gcs_folder", _set(["jobSpec", "baseOutputDirectory"], {"outputUriPrefix": "gs://../.."}), "jobSpec.baseOutputDirectory.outputUriPrefix", "bucket name '..'"),
    ("output_dir_is_a_gcs_folder", _set(["jobSpec", "baseOutputDirectory"], {"outputUriPrefix": "gs://ckpt/runs/../../x"}), "jobSpec.baseOutputDirectory.outputUriPrefix", "are not folders of a bucket"),
    ("env_not_reserved", _set(ENV0, [{"name": "AIP_CHECKPOINT_DIR", "value": "gs://b/x"}]), f"{POOL0}.containerSpec.env[0]", "set by Vertex"),
    ("no_plaintext_secrets", _set(ENV0, [{"name": "WANDB_API_KEY", "value": "abc123"}]), f"{POOL0}.containerSpec.env[0]", "secrets:"),
    ("no_plaintext_secrets", _set(ENV0, [{"name": "HUB_LOGIN", "value": "hf_" + "a1B2c3D4" * 5}]), f"{POOL0}.containerSpec.env[0]", "has the shape of a Hugging Face token"),
    ("no_plaintext_secrets", _set(ENV0, [{"name": "MY_SETTING", "value": "0a1b2c3d4e" * 4}]), f"{POOL0}.containerSpec.env[0]", "has the shape of a W&B API key"),
    ("no_secret_shaped_values", _set(["labels", "team"], "0a1b2c3d4e" * 4), "labels.team", "has the shape of a W&B API key"),
    ("no_secret_shaped_values", _set(["jobSpec", "workerPoolSpecs", 0, "containerSpec", "args"], ["--hub", "hf_" + "a1B2c3D4" * 5]), f"{POOL0}.containerSpec.args[1]", "secrets: {HF_TOKEN: hf-token}"),
    ("secret_names_valid", _set(ENV0, [{"name": "VTX_SECRETS", "value": json.dumps({"HF_TOKEN": "hf_" + "a1B2c3D4" * 5})}]), f"{POOL0}.containerSpec.env[0]", "VTX_SECRETS HF_TOKEN: this looks like the secret's value"),
    ("secret_names_valid", _set(ENV0, [{"name": "VTX_SECRETS", "value": "HF_TOKEN=hf-token,hf-token"}]), f"{POOL0}.containerSpec.env[0]", "entry 2 is not ENV_NAME=SECRET"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("rule", "mutate", "path", "words"), CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)]
)
def test_rule_reports_problem_only_when_enabled(
    rule: str, mutate: Callable[[dict], None], path: str, words: str
) -> None:
    job = valid_job()
    mutate(job)
    problems = validate_custom_job(job)
    found = [p for p in problems if p.path == path]
    assert found, f"no problem at {path}: {[str(p) for p in problems]}"
    assert any(words in f"{p.message} {p.hint}" for p in found), [str(p) for p in found]
    # Without the rule, nothing (neither another rule nor the field check) reports it.
    facts = facts_from_rest_job(job)
    others = run_rules(facts, load_catalog(), skip=frozenset({rule})) + check_rest_fields(job)
    assert not [p for p in others if p.path == path and words in f"{p.message} {p.hint}"]


def test_every_rule_has_a_test() -> None:
    # Regional rules: test_regional_rules; accelerator_in_api: a REST job's enum check refuses a
    # name the v1 API lacks first (tests/jobs/custom_jobs/test_tpu_templates.py tests the rule).
    assert {c[0] for c in CASES} | {"region_known", "machine_offered_in_region",
                                   "accelerator_offered_in_region", "tpu_pod_offered_in_region",
                                   "accelerator_in_api"} == set(RULES)  # fmt: skip


@pytest.mark.parametrize(
    ("rule", "region", "mutate", "path"),
    [
        ("region_known", "us-centrall1", lambda j: None, "region"),
        ("machine_offered_in_region", "europe-west1", _set(M0, {"machineType": "a2-highgpu-1g", "acceleratorType": "NVIDIA_TESLA_A100", "acceleratorCount": 1}), f"{POOL0}.machineSpec.machineType"),
        ("accelerator_offered_in_region", "us-west1", lambda j: None, None),
        ("accelerator_offered_in_region", "us-west1", _set(M0, {"machineType": "a2-ultragpu-1g", "acceleratorType": "NVIDIA_A100_80GB", "acceleratorCount": 1}), f"{POOL0}.machineSpec.acceleratorType"),
        # Google's locations table: europe-west4's TPU v5e "isn't available for training".
        ("machine_offered_in_region", "europe-west4", _set(M0, {"machineType": "ct5lp-hightpu-4t", "tpuTopology": "2x2"}), f"{POOL0}.machineSpec.machineType"),
        ("accelerator_offered_in_region", "us-west1", _set(M0, {"machineType": "cloud-tpu", "acceleratorType": "TPU_V3", "acceleratorCount": 8}), f"{POOL0}.machineSpec.acceleratorType"),
        # TPU v3 in us-central1, but its Pods only in europe-west4.
        ("tpu_pod_offered_in_region", "us-central1", _set(M0, {"machineType": "cloud-tpu", "acceleratorType": "TPU_V3", "acceleratorCount": 32}), f"{POOL0}.machineSpec.acceleratorCount"),
        ("tpu_pod_offered_in_region", "us-central1", _set(M0, {"machineType": "cloud-tpu", "acceleratorType": "TPU_V3", "acceleratorCount": 8}), None),
    ],
)  # fmt: skip
def test_regional_rules(rule: str, region: str, mutate: Callable, path: str | None) -> None:
    job = valid_job()
    mutate(job)
    facts = facts_from_rest_job(job)
    facts.region = region
    facts.paths["region"] = "region"
    with_rule = {p.path for p in run_rules(facts, load_catalog())}
    without = {p.path for p in run_rules(facts, load_catalog(), skip=frozenset({rule}))}
    if path is None:  # offered there (L4 in us-west1; one TPU v3 VM in us-central1)
        assert with_rule == without
    else:
        assert path in with_rule
        assert path not in without


KEY = "hf_" + "Q7pZ2xL9" * 5  # a value: none of the problems below may show it
MALFORMED_VTX_SECRETS = {
    "a value alone": KEY,
    "a value for a name": f"HF_TOKEN={KEY}",
    "a colon for '='": f"HF_TOKEN:{KEY}",
    "a quoted value": f'HF_TOKEN="{KEY} x"',
    "JSON with an object for a name": json.dumps({"HF_TOKEN": {"value": KEY}}),
    "JSON cut short": json.dumps({"HF_TOKEN": KEY})[:-1],
    "a value as the variable": json.dumps({KEY: "hf-token"}),
    "JSON nested past the parser": '{"HF_TOKEN": ' + "[" * 100_000 + "]" * 100_000 + "}",
}


@pytest.mark.parametrize(
    "raw", list(MALFORMED_VTX_SECRETS.values()), ids=list(MALFORMED_VTX_SECRETS)
)
def test_a_rest_jobs_vtx_secrets_is_read_as_the_trainer_reads_it_and_never_echoed(
    raw: str,
) -> None:
    job = valid_job()
    _set(ENV0, [{"name": "VTX_SECRETS", "value": raw}])(job)
    problems = [p for p in validate_custom_job(job) if p.path == f"{POOL0}.containerSpec.env[0]"]
    assert problems, f"{raw!r} passed"
    assert KEY not in "\n".join(str(p) for p in problems)


def test_vtx_secrets_as_vtx_compiles_it_passes() -> None:
    job = valid_job()
    compiled = {
        "HF_TOKEN": "projects/vtx-dev-123/secrets/hf-token/versions/latest",
        "WANDB_API_KEY": "projects/123456789012/secrets/wandb/versions/3",
    }
    _set(ENV0, [{"name": "VTX_SECRETS", "value": json.dumps(compiled)}])(job)
    assert validate_custom_job(job) == []
    _set(ENV0, [{"name": "VTX_SECRETS", "value": "HF_TOKEN=hf-token, B=projects/p/secrets/b"}])(job)
    assert validate_custom_job(job) == []


def test_a_key_or_a_bad_name_as_a_secrets_variable_is_refused_without_echoing_the_key() -> None:
    from jobs.launch.checks import validate_template_doc

    doc = {
        "name": "t",
        "image": "trainer",
        "pools": {"chief": {"machine": "n1-standard-4"}},
        "secrets": {KEY: "hf-token", "hf-token": "hf-token", "HF_TOKEN": "hf-token"},
    }
    problems = {p.path: p for p in validate_template_doc(doc)}
    assert "looks like a key" in problems["secrets"].message
    assert "HF_TOKEN" in (problems["secrets.hf-token"].hint or "")
    assert set(problems) == {"secrets", "secrets.hf-token"}
    assert KEY not in "\n".join(str(p) for p in problems.values())
