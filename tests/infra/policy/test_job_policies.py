"""Job policies: each rule passes a compliant job and reports the violating field."""

from __future__ import annotations

import copy

import pytest

from jobs.core.stack import PROD_ENVIRONMENTS, StackOutputs
from jobs.custom_jobs.policies import check_job_policies, timeout_cap_s

REGISTRY = "europe-west4-docker.pkg.dev/acme-ml-prod/trainer"


def make_stack(environment: str) -> StackOutputs:
    return StackOutputs(
        project=f"acme-ml-{environment}",
        project_number="123456789012",
        region="europe-west4",
        environment=environment,
        trainer_service_account=f"vtx-trainer@acme-ml-{environment}.iam.gserviceaccount.com",
        launcher_service_account=f"vtx-launcher@acme-ml-{environment}.iam.gserviceaccount.com",
        buckets={"data": "d", "checkpoints": "ckpt", "staging": "s", "models": "m"},
        artifact_registry=REGISTRY,
    )


def compliant_job() -> dict:
    return {
        "displayName": "finetune",
        "jobSpec": {
            "workerPoolSpecs": [
                {
                    "machineSpec": {"machineType": "n1-standard-4"},
                    "replicaCount": "1",
                    "containerSpec": {"imageUri": f"{REGISTRY}/trainer@sha256:abc"},
                },
                {},
                {
                    "machineSpec": {"machineType": "n1-highcpu-16"},
                    "replicaCount": "1",
                    "containerSpec": {
                        "imageUri": "europe-docker.pkg.dev/vertex-ai-restricted/training/"
                        "reductionserver:latest"
                    },
                },
            ],
            "scheduling": {"strategy": "SPOT", "timeout": "86400s"},
            "serviceAccount": "vtx-trainer@acme-ml-prod.iam.gserviceaccount.com",
            "baseOutputDirectory": {"outputUriPrefix": "gs://ckpt/runs/r1/"},
        },
    }


# Every spelling of production (jobs.core.stack.PROD_ENVIRONMENTS) gets the prod rules.
PRODS = sorted(PROD_ENVIRONMENTS)


@pytest.mark.parametrize("environment", ["dev", *PRODS])
def test_compliant_job_has_no_problems(environment: str) -> None:
    assert check_job_policies(compliant_job(), make_stack(environment)) == []


def _paths(job: dict, environment: str) -> list[str]:
    return [p.path for p in check_job_policies(job, make_stack(environment))]


@pytest.mark.parametrize("prod", PRODS)
def test_web_access_is_refused_in_prod_only(prod: str) -> None:
    job = compliant_job()
    job["jobSpec"]["enableWebAccess"] = True
    assert _paths(job, prod) == ["jobSpec.enableWebAccess"]
    assert _paths(job, "dev") == []


@pytest.mark.parametrize("prod", PRODS)
def test_dashboard_access_is_refused_in_prod(prod: str) -> None:
    job = compliant_job()
    job["jobSpec"]["enableDashboardAccess"] = True
    assert _paths(job, prod) == ["jobSpec.enableDashboardAccess"]


def test_spot_job_without_checkpoint_directory_is_refused() -> None:
    job = compliant_job()
    del job["jobSpec"]["baseOutputDirectory"]
    problems = check_job_policies(job, make_stack("dev"))
    assert [p.path for p in problems] == ["jobSpec.baseOutputDirectory.outputUriPrefix"]
    assert "gs://ckpt/runs/" in (problems[0].hint or "")


def test_spot_checkpoint_directory_must_be_gcs() -> None:
    job = compliant_job()
    job["jobSpec"]["baseOutputDirectory"] = {"outputUriPrefix": "/tmp/ckpt"}
    assert _paths(job, "dev") == ["jobSpec.baseOutputDirectory.outputUriPrefix"]


def test_standard_job_needs_no_checkpoint_directory() -> None:
    job = compliant_job()
    job["jobSpec"]["scheduling"]["strategy"] = "STANDARD"
    del job["jobSpec"]["baseOutputDirectory"]
    assert _paths(job, "dev") == []


@pytest.mark.parametrize("prod", PRODS)
def test_timeout_over_the_cap_is_refused(prod: str) -> None:
    job = compliant_job()
    job["jobSpec"]["scheduling"]["timeout"] = f"{timeout_cap_s('dev') + 1}s"
    assert _paths(job, "dev") == ["jobSpec.scheduling.timeout"]
    assert _paths(job, prod) == []
    job["jobSpec"]["scheduling"]["timeout"] = f"{timeout_cap_s(prod) + 1}s"
    assert _paths(job, prod) == ["jobSpec.scheduling.timeout"]


@pytest.mark.parametrize("prod", PRODS)
def test_missing_timeout_falls_back_to_vertex_default_which_exceeds_dev_cap(prod: str) -> None:
    job = compliant_job()
    del job["jobSpec"]["scheduling"]["timeout"]
    assert _paths(job, "dev") == ["jobSpec.scheduling.timeout"]
    assert _paths(job, prod) == []


def test_every_spelling_of_production_gets_the_prod_timeout_cap() -> None:
    assert {timeout_cap_s(env) for env in PRODS} == {timeout_cap_s("prod")}
    assert timeout_cap_s("prod") > timeout_cap_s("dev") == timeout_cap_s("staging")


def test_malformed_timeout_is_reported() -> None:
    job = compliant_job()
    job["jobSpec"]["scheduling"]["timeout"] = "1 day"
    problems = check_job_policies(job, make_stack("dev"))
    assert [p.path for p in problems] == ["jobSpec.scheduling.timeout"]
    assert "not a duration" in problems[0].message


@pytest.mark.parametrize("prod", PRODS)
def test_foreign_image_is_refused_in_prod_only(prod: str) -> None:
    job = compliant_job()
    job["jobSpec"]["workerPoolSpecs"][0]["containerSpec"]["imageUri"] = "docker.io/me/trainer:1"
    assert _paths(job, prod) == ["jobSpec.workerPoolSpecs[0].containerSpec.imageUri"]
    assert _paths(job, "dev") == []


def test_registry_prefix_must_match_a_whole_path_segment() -> None:
    job = compliant_job()
    job["jobSpec"]["workerPoolSpecs"][0]["containerSpec"]["imageUri"] = f"{REGISTRY}-evil/t:1"
    assert _paths(job, "prod") == ["jobSpec.workerPoolSpecs[0].containerSpec.imageUri"]


def test_python_package_executor_image_is_checked() -> None:
    job = compliant_job()
    pool = job["jobSpec"]["workerPoolSpecs"][0]
    del pool["containerSpec"]
    pool["pythonPackageSpec"] = {"executorImageUri": "gcr.io/someone/pytorch:latest"}
    assert _paths(job, "prod") == ["jobSpec.workerPoolSpecs[0].pythonPackageSpec.executorImageUri"]


def test_job_without_service_account_is_refused() -> None:
    job = compliant_job()
    del job["jobSpec"]["serviceAccount"]
    problems = check_job_policies(job, make_stack("dev"))
    assert [p.path for p in problems] == ["jobSpec.serviceAccount"]
    assert "vtx-trainer@acme-ml-dev" in (problems[0].hint or "")


def test_default_compute_account_is_refused() -> None:
    job = copy.deepcopy(compliant_job())
    job["jobSpec"]["serviceAccount"] = "123456789012-compute@developer.gserviceaccount.com"
    problems = check_job_policies(job, make_stack("dev"))
    assert [p.path for p in problems] == ["jobSpec.serviceAccount"]
    assert "Compute Engine default" in problems[0].message
