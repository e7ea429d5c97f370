"""Fields and calls of the discovery document the SDK can reach, through the real REST client:
webAccessUris, create_time filters, readMask, and a cancel of a job that already ended."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest
from google.api_core import exceptions
from google.protobuf import field_mask_pb2

from jobs.core.stack import StackOutputs
from tests.jobs.local.local_helpers import PARENT, client, custom_job, pool, wait_for, wait_terminal

SLEEPER = "import time; print('up', flush=True); time.sleep(600)"


def _names(jobs, filter_: str) -> list[str]:
    return [j.name for j in jobs.list_custom_jobs(request={"parent": PARENT, "filter": filter_})]


def test_web_access_uris_name_every_replica_while_it_runs(local_platform: StackOutputs) -> None:
    jobs = client(local_platform.vertex_endpoint)
    spec = custom_job("shell", pool(SLEEPER))
    spec.job_spec.enable_web_access = True
    job = jobs.create_custom_job(parent=PARENT, custom_job=spec)
    try:
        running = wait_for(
            lambda: (j := jobs.get_custom_job(name=job.name)).state == 3 and j  # RUNNING
        )
        assert list(running.web_access_uris) == ["workerpool0-0"]
        uri = running.web_access_uris["workerpool0-0"]
        assert uri.startswith(local_platform.vertex_endpoint)
        request = urllib.request.Request(
            uri, headers={"Authorization": f"Bearer {local_platform.local_token}"}
        )
        with pytest.raises(urllib.error.HTTPError) as caught:
            urllib.request.urlopen(request)
        assert caught.value.code == 501
        assert "not served by the local platform" in json.load(caught.value)["error"]["message"]
    finally:
        jobs.cancel_custom_job(name=job.name)
    plain = jobs.create_custom_job(parent=PARENT, custom_job=custom_job("plain", pool("pass")))
    assert not wait_terminal(jobs, plain.name).web_access_uris


def test_list_filters_compare_create_times(local_platform: StackOutputs) -> None:
    jobs = client(local_platform.vertex_endpoint)
    labels = {"vtx-run-id": "times"}
    first = jobs.create_custom_job(
        parent=PARENT, custom_job=custom_job("t1", pool("pass"), labels=labels)
    )
    second = jobs.create_custom_job(
        parent=PARENT, custom_job=custom_job("t2", pool("pass"), labels=labels)
    )
    run = 'labels.vtx-run-id="times"'
    t1, t2 = first.create_time.rfc3339(), second.create_time.rfc3339()
    assert set(_names(jobs, f'{run} AND create_time>="{t1}"')) == {first.name, second.name}
    assert _names(jobs, f'{run} AND create_time<"{t2}"') == [first.name]
    assert _names(jobs, f'{run} AND create_time>"{t2}"') == []
    assert _names(jobs, f'{run} AND create_time>"2026-01-01T00:00:00Z"') != []
    assert _names(jobs, f'{run} AND display_name:"t*"') != []
    with pytest.raises(exceptions.BadRequest, match="RFC 3339"):
        _names(jobs, 'create_time>"yesterday"')
    with pytest.raises(exceptions.BadRequest, match="create_time only"):
        _names(jobs, 'state>"JOB_STATE_FAILED"')


def test_read_mask_returns_only_the_masked_fields(local_platform: StackOutputs) -> None:
    jobs = client(local_platform.vertex_endpoint)
    created = jobs.create_custom_job(
        parent=PARENT,
        custom_job=custom_job("masked", pool("pass"), labels={"vtx-run-id": "masks"}),
    )
    mask = field_mask_pb2.FieldMask(paths=["name", "display_name", "labels"])
    [job] = jobs.list_custom_jobs(
        request={"parent": PARENT, "filter": 'labels.vtx-run-id="masks"', "read_mask": mask}
    )
    assert (job.name, job.display_name, dict(job.labels)) == (
        created.name,
        "masked",
        {"vtx-run-id": "masks"},
    )
    assert job.state == 0 and not job.job_spec.worker_pool_specs and not job.create_time
    bad = field_mask_pb2.FieldMask(paths=["no_such_field"])
    with pytest.raises(exceptions.BadRequest, match="no field no_such_field"):
        list(jobs.list_custom_jobs(request={"parent": PARENT, "read_mask": bad}))


def test_cancel_of_a_finished_job_is_a_failed_precondition(local_platform: StackOutputs) -> None:
    jobs = client(local_platform.vertex_endpoint)
    job = jobs.create_custom_job(parent=PARENT, custom_job=custom_job("done", pool("pass")))
    assert wait_terminal(jobs, job.name).state == 4
    with pytest.raises(exceptions.BadRequest) as caught:
        jobs.cancel_custom_job(name=job.name)
    assert "FAILED_PRECONDITION" in str(caught.value.response.json()["error"]["status"])
    assert "already ended" in caught.value.message
    assert jobs.get_custom_job(name=job.name).state == 4  # left as it was
