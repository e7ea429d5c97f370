"""The pure parts of training pipelines: what a create must be, the backing job it becomes and
where its Model's artifacts are (no process, no server)."""

from __future__ import annotations

import pytest

from jobs.local.custom_jobs.pipelines import (
    CUSTOM_TASK,
    backing_job,
    custom_job_spec_problems,
    model_artifact_uri,
    parse_job_spec,
)

INPUTS = {
    "worker_pool_specs": [
        {
            "machine_spec": {"machine_type": "n1-standard-4"},
            "replica_count": 1,
            "container_spec": {"image_uri": "img", "command": ["python", "-c", "pass"]},
        }
    ],
    "base_output_directory": {"output_uri_prefix": "gs://b/run/"},
}


def _pipeline(**extra) -> dict:
    pipeline = {
        "name": "projects/1/locations/us-central1/trainingPipelines/7",
        "displayName": "p",
        "trainingTaskDefinition": CUSTOM_TASK,
        "trainingTaskInputs": INPUTS,
    }
    return {**pipeline, **extra}


def test_the_sdks_snake_case_inputs_become_a_rest_job_spec() -> None:
    spec = parse_job_spec(INPUTS)
    assert spec["workerPoolSpecs"][0]["machineSpec"] == {"machineType": "n1-standard-4"}
    assert spec["baseOutputDirectory"] == {"outputUriPrefix": "gs://b/run/"}
    with pytest.raises(ValueError, match="not a CustomJobSpec"):
        parse_job_spec({"worker_pool_spec": []})


def test_the_backing_job_carries_the_spec_name_and_labels() -> None:
    job = backing_job(_pipeline(labels={"vtx-run-id": "r"}), "projects/1/locations/x/customJobs/9")
    assert job["displayName"] == "p-custom-job"
    assert job["labels"] == {"vtx-run-id": "r"}
    assert job["jobSpec"] == parse_job_spec(INPUTS)


def test_only_custom_tasks_with_inputs_are_served() -> None:
    assert custom_job_spec_problems(_pipeline()) == []
    automl = _pipeline(trainingTaskDefinition="gs://x/automl_tables_1.0.0.yaml")
    assert "custom training tasks only" in custom_job_spec_problems(automl)[0]
    bare = {k: v for k, v in _pipeline().items() if k not in ("displayName", "trainingTaskInputs")}
    assert [p.split(":")[0] for p in custom_job_spec_problems(bare)] == [
        "displayName",
        "trainingTaskInputs",
    ]


def test_the_model_is_read_from_the_jobs_model_dir_unless_named() -> None:
    assert model_artifact_uri(_pipeline(modelToUpload={"displayName": "m"})) == "gs://b/run/model"
    named = _pipeline(modelToUpload={"artifactUri": "gs://b/elsewhere"})
    assert model_artifact_uri(named) == "gs://b/elsewhere"
    no_base = _pipeline(trainingTaskInputs={"worker_pool_specs": INPUTS["worker_pool_specs"]})
    assert model_artifact_uri(no_base) is None
