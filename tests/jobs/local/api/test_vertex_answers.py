"""Answers whose shape the SDK reads as Vertex writes them: a create's state and server defaults,
and the long-running operations of deletes (named under the resource, with
DeleteOperationMetadata), through the SDK's own clients and over REST."""

from __future__ import annotations

import json
import urllib.request

from jobs.core.stack import StackOutputs
from tests.jobs.local.local_helpers import (
    PARENT,
    client,
    container_pipeline,
    custom_job,
    pipelines_client,
    pool,
    tuning_job,
    wait_pipeline,
    wait_study,
    wait_terminal,
)


def assert_delete_operation(operation, resource_name: str) -> None:
    """A google.api_core operation of a delete, as Vertex answers it."""
    from google.cloud.aiplatform_v1 import DeleteOperationMetadata

    raw = operation.operation
    assert raw.name.startswith(resource_name + "/operations/")
    assert raw.done
    assert isinstance(operation.metadata, DeleteOperationMetadata)
    generic = operation.metadata.generic_metadata
    assert generic.create_time and generic.update_time


def test_a_created_custom_job_is_pending_with_its_disk_defaults(
    local_platform: StackOutputs,
) -> None:
    jobs = client(local_platform.vertex_endpoint)
    a3u = pool("pass")
    a3u["machine_spec"] = {
        "machine_type": "a3-ultragpu-8g",
        "accelerator_type": "NVIDIA_H200_141GB",
        "accelerator_count": 8,
    }
    sized = {**pool("pass"), "disk_spec": {"boot_disk_size_gb": 200}}
    plain = jobs.create_custom_job(parent=PARENT, custom_job=custom_job("plain", pool("pass")))
    mixed = jobs.create_custom_job(parent=PARENT, custom_job=custom_job("mixed", sized, a3u))
    assert plain.state.name == mixed.state.name == "JOB_STATE_PENDING"

    def disks(job) -> list[tuple[str, int]]:
        specs = job.job_spec.worker_pool_specs
        return [(p.disk_spec.boot_disk_type, p.disk_spec.boot_disk_size_gb) for p in specs]

    assert disks(plain) == [("pd-ssd", 100)]
    # A size given is kept; A3 Ultra's boot disk defaults to Hyperdisk (DiskSpec's docstring).
    assert disks(mixed) == [("pd-ssd", 200), ("hyperdisk-balanced", 100)]
    assert disks(jobs.get_custom_job(name=mixed.name)) == disks(mixed)
    jobs.cancel_custom_job(name=mixed.name)
    wait_terminal(jobs, mixed.name)
    wait_terminal(jobs, plain.name)


def test_deletes_answer_operations_under_the_resource_with_metadata(
    local_platform: StackOutputs,
) -> None:
    jobs = client(local_platform.vertex_endpoint)
    job = jobs.create_custom_job(parent=PARENT, custom_job=custom_job("deleted", pool("pass")))
    wait_terminal(jobs, job.name)
    assert_delete_operation(jobs.delete_custom_job(name=job.name), job.name)

    study = jobs.create_hyperparameter_tuning_job(
        parent=PARENT, hyperparameter_tuning_job=tuning_job("deleted-study", "pass", max_trials=1)
    )
    wait_study(jobs, study.name)
    assert_delete_operation(jobs.delete_hyperparameter_tuning_job(name=study.name), study.name)

    pipelines = pipelines_client(local_platform.vertex_endpoint)
    pipeline = pipelines.create_training_pipeline(
        parent=PARENT, training_pipeline=container_pipeline("deleted-pipeline", "pass")
    )
    wait_pipeline(pipelines, pipeline.name)
    operation = pipelines.delete_training_pipeline(name=pipeline.name)
    assert_delete_operation(operation, pipeline.name)


def test_model_deletes_answer_operations_under_the_model(local_platform: StackOutputs) -> None:
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import aiplatform_v1

    models = aiplatform_v1.ModelServiceClient(
        transport="rest",
        credentials=AnonymousCredentials(),
        client_options={"api_endpoint": local_platform.vertex_endpoint},
    )
    first = models.upload_model(parent=PARENT, model={"display_name": "deleted-model"}).result()
    again = {
        "parent": PARENT,
        "model": {"display_name": "deleted-model"},
        "parent_model": first.model,
    }
    second = models.upload_model(request=again).result()
    assert second.model_version_id == "2"
    operation = models.delete_model_version(name=f"{first.model}@2")
    assert_delete_operation(operation, first.model)
    operation = models.delete_model(name=first.model)
    assert_delete_operation(operation, first.model)
    # The operation stays readable after its model is gone, where its name says it is.
    url = f"{local_platform.vertex_endpoint}/v1/{operation.operation.name}"
    with urllib.request.urlopen(url) as answer:
        assert json.load(answer)["done"] is True


def test_an_endpoint_delete_answers_an_operation_under_the_endpoint(
    local_platform: StackOutputs,
) -> None:
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import aiplatform_v1

    endpoints = aiplatform_v1.EndpointServiceClient(
        transport="rest",
        credentials=AnonymousCredentials(),
        client_options={"api_endpoint": local_platform.vertex_endpoint},
    )
    endpoint = endpoints.create_endpoint(
        parent=PARENT, endpoint={"display_name": "deleted-endpoint"}
    ).result()
    assert_delete_operation(endpoints.delete_endpoint(name=endpoint.name), endpoint.name)
