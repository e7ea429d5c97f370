"""Persistent resources end to end through the real SDK (``aiplatform.persistent_resource.
PersistentResource`` and ``CustomJob.submit(persistent_resource_id=...)``, under gRPC and REST)
on the session's local platform: create a resource, run a job on it, a job no pool holds
refused with a 400 naming the mismatch, two jobs on a one-replica pool one after the other,
reboot, update, delete. Replicas are one-line programs; waits are on states, never on time."""

from __future__ import annotations

from pathlib import Path

import pytest
from google.api_core import exceptions

from jobs.core.stack import StackOutputs
from tests.jobs.local.local_helpers import (
    SDK_TRANSPORTS,
    replica_output,
    transport_options,
    wait_for,
)

T4_POOL = {
    "id": "t4",
    "machine_spec": {
        "machine_type": "n1-standard-4",
        "accelerator_type": "NVIDIA_TESLA_T4",
        "accelerator_count": 1,
    },
    "replica_count": 1,
}


def _pool(code: str, machine: str = "n1-standard-4", t4: bool = True) -> dict:
    spec: dict = {"machine_type": machine}
    if t4:
        spec |= {"accelerator_type": "NVIDIA_TESLA_T4", "accelerator_count": 1}
    return {
        "machine_spec": spec,
        "replica_count": 1,
        "container_spec": {"image_uri": "local/test:1", "command": ["python", "-c", code]},
    }


@pytest.fixture(params=SDK_TRANSPORTS)
def sdk(request: pytest.FixtureRequest, local_platform: StackOutputs, local_platform_state):
    """The SDK under each of its transports (gRPC, its default, and REST)."""
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import aiplatform

    aiplatform.init(
        project=local_platform.project,
        location=local_platform.region,
        **transport_options(request.param, local_platform_state),
        credentials=AnonymousCredentials(),
        staging_bucket=f"gs://{local_platform.buckets.staging}",
    )
    return aiplatform


@pytest.fixture
def warm(sdk):
    """A one-replica T4 resource, created through the SDK and deleted after the test."""
    from google.cloud.aiplatform.persistent_resource import PersistentResource

    resource = PersistentResource.create(
        persistent_resource_id="warm-t4", resource_pools=[T4_POOL], labels={"team": "nlp"}
    )
    yield resource
    resource.delete()


def _job(sdk, name: str, code: str, **pool: object):
    return sdk.CustomJob(display_name=name, worker_pool_specs=[_pool(code, **pool)])


def _state(job) -> str:
    return job._gca_resource.state.name


def _wait_final(job) -> str:
    def final() -> str | None:
        job._sync_gca_resource()
        state = _state(job)
        return state if state in {"JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED"} else None

    return wait_for(final)


def test_create_run_on_it_and_delete(sdk, warm, local_platform: StackOutputs) -> None:
    from google.cloud.aiplatform.persistent_resource import PersistentResource

    assert warm.state.name == "RUNNING"
    assert warm.start_time is not None
    pool = warm._gca_resource.resource_pools[0]
    assert (pool.id, pool.replica_count, pool.disk_spec.boot_disk_type) == ("t4", 1, "pd-ssd")
    listed = [r.resource_name for r in PersistentResource.list()]
    assert warm.resource_name in listed

    job = _job(sdk, "on-warm", "print('warm start')")
    job.submit(persistent_resource_id="warm-t4")
    assert _wait_final(job) == "JOB_STATE_SUCCEEDED"
    assert job._gca_resource.job_spec.persistent_resource_id == "warm-t4"
    assert "warm start" in replica_output(local_platform, job.resource_name, "workerpool0-0")


def test_a_job_no_pool_holds_is_a_400_naming_the_closest_pool(sdk, warm) -> None:
    job = _job(sdk, "no-pool", "pass", machine="n1-standard-8")
    with pytest.raises(exceptions.BadRequest) as caught:
        job.submit(persistent_resource_id="warm-t4")
    message = caught.value.message
    assert (
        "jobSpec.workerPoolSpecs[0]: no resource pool of persistent resource 'warm-t4'" in message
    )
    assert "the closest is pool 't4'" in message
    assert "set jobSpec.workerPoolSpecs[0].machineSpec.machineType to n1-standard-4" in message


def test_a_job_without_the_pools_accelerator_is_refused_too(sdk, warm) -> None:
    job = _job(sdk, "no-gpu", "pass", t4=False)
    with pytest.raises(exceptions.BadRequest, match="acceleratorType to NVIDIA_TESLA_T4"):
        job.submit(persistent_resource_id="warm-t4")


def test_a_job_naming_no_such_resource_is_a_400(sdk) -> None:
    job = _job(sdk, "nowhere", "pass")
    with pytest.raises(exceptions.BadRequest, match="persistent resource 'absent' does not exist"):
        job.submit(persistent_resource_id="absent")


def test_two_jobs_on_a_one_replica_pool_run_one_after_the_other(
    sdk, warm, local_platform: StackOutputs, tmp_path: Path
) -> None:
    gate = tmp_path / "open"
    hold = f"import os, time\nwhile not os.path.exists({str(gate)!r}): time.sleep(0.05)"
    first = _job(sdk, "first", hold)
    first.submit(persistent_resource_id="warm-t4")
    wait_for(lambda: first._sync_gca_resource() or _state(first) == "JOB_STATE_RUNNING")
    warm._sync_gca_resource()
    assert warm._gca_resource.resource_pools[0].used_replica_count == 1

    second = _job(sdk, "second", "print('second ran')")
    second.submit(persistent_resource_id="warm-t4")
    waits = "waiting for free replicas of persistent resource 'warm-t4'"
    wait_for(
        lambda: any(
            waits in m for m in replica_output(local_platform, second.resource_name, "service")
        )
    )
    second._sync_gca_resource()
    assert _state(second) == "JOB_STATE_PENDING"

    gate.touch()
    assert _wait_final(first) == "JOB_STATE_SUCCEEDED"
    assert _wait_final(second) == "JOB_STATE_SUCCEEDED"
    assert second._gca_resource.start_time >= first._gca_resource.end_time


def test_reboot_and_update_complete_their_operations(sdk, warm) -> None:
    warm.reboot()
    assert warm.state.name == "RUNNING"
    client = warm.api_client
    resource = warm._gca_resource
    resource.labels["team"] = "vision"
    from google.protobuf import field_mask_pb2

    client.update_persistent_resource(
        persistent_resource=resource, update_mask=field_mask_pb2.FieldMask(paths=["labels"])
    ).result(timeout=60)
    warm._sync_gca_resource()
    assert warm.labels == {"team": "vision"}


def test_a_delete_with_a_job_running_on_it_is_refused(
    sdk, warm, local_platform: StackOutputs, tmp_path: Path
) -> None:
    gate = tmp_path / "open"
    hold = f"import os, time\nwhile not os.path.exists({str(gate)!r}): time.sleep(0.05)"
    job = _job(sdk, "holder", hold)
    job.submit(persistent_resource_id="warm-t4")
    wait_for(lambda: job._sync_gca_resource() or _state(job) == "JOB_STATE_RUNNING")
    with pytest.raises(exceptions.BadRequest, match="runs 1 job"):
        warm.api_client.delete_persistent_resource(name=warm.resource_name)
    gate.touch()
    assert _wait_final(job) == "JOB_STATE_SUCCEEDED"
