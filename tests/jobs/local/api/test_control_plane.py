"""The control plane through the real aiplatform_v1 REST client: create, get, list, cancel,
delete, and Vertex-style 400s."""

from __future__ import annotations

import json

import pytest
from google.api_core import exceptions

from jobs.core.stack import StackOutputs
from tests.jobs.local.local_helpers import (
    PARENT,
    client,
    custom_job,
    pool,
    replica_output,
    wait_for,
    wait_terminal,
)


def test_job_runs_to_success_through_the_rest_client(local_platform: StackOutputs) -> None:
    jobs = client(local_platform.vertex_endpoint)
    created = jobs.create_custom_job(
        parent=PARENT, custom_job=custom_job("ok", pool("print('hello from the primary')"))
    )
    assert created.name.startswith("projects/424242424242/locations/us-central1/customJobs/")
    assert created.state == 2  # PENDING, as Vertex answers a create
    done = wait_terminal(jobs, created.name)
    assert done.state == 4, done.error
    assert done.start_time and done.end_time
    out = replica_output(local_platform, created.name, "workerpool0-0")
    assert out == ["hello from the primary"]


def test_list_filters_on_state_and_labels(local_platform: StackOutputs) -> None:
    jobs = client(local_platform.vertex_endpoint)
    ok = jobs.create_custom_job(
        parent=PARENT,
        custom_job=custom_job("f-ok", pool("pass"), labels={"vtx-run-id": "list-a"}),
    )
    bad = jobs.create_custom_job(
        parent=PARENT,
        custom_job=custom_job("f-bad", pool("exit(3)"), labels={"vtx-run-id": "list-a"}),
    )
    wait_terminal(jobs, ok.name)
    wait_terminal(jobs, bad.name)

    def names(filter_: str) -> set[str]:
        pager = jobs.list_custom_jobs(request={"parent": PARENT, "filter": filter_})
        return {j.name for j in pager}

    assert names('labels.vtx-run-id="list-a"') == {ok.name, bad.name}
    assert names('labels.vtx-run-id="list-a" AND state="JOB_STATE_FAILED"') == {bad.name}
    assert names('labels.vtx-run-id="list-a" AND NOT state="JOB_STATE_FAILED"') == {ok.name}
    assert names('labels.vtx-run-id="nobody"') == set()


def test_list_pages_through_every_job(local_platform: StackOutputs) -> None:
    jobs = client(local_platform.vertex_endpoint)
    created = {
        jobs.create_custom_job(
            parent=PARENT, custom_job=custom_job("p", pool("pass"), labels={"vtx-run-id": "pages"})
        ).name
        for _ in range(5)
    }
    pager = jobs.list_custom_jobs(
        request={"parent": PARENT, "filter": 'labels.vtx-run-id="pages"', "page_size": 2}
    )
    pages = list(pager.pages)
    assert [len(page.custom_jobs) for page in pages] == [2, 2, 1]
    assert {j.name for page in pages for j in page.custom_jobs} == created


def test_cancel_stops_a_running_job(local_platform: StackOutputs) -> None:
    jobs = client(local_platform.vertex_endpoint)
    job = jobs.create_custom_job(
        parent=PARENT,
        custom_job=custom_job("c", pool("import time; print('up', flush=True); time.sleep(600)")),
    )
    wait_for(lambda: replica_output(local_platform, job.name, "workerpool0-0"))
    jobs.cancel_custom_job(name=job.name)
    done = wait_terminal(jobs, job.name)
    assert done.state == 7  # CANCELLED
    assert done.error.code == 1


def test_delete_removes_a_finished_job_and_refuses_a_running_one(
    local_platform: StackOutputs,
) -> None:
    jobs = client(local_platform.vertex_endpoint)
    running = jobs.create_custom_job(
        parent=PARENT, custom_job=custom_job("d1", pool("import time; time.sleep(600)"))
    )
    with pytest.raises(exceptions.BadRequest, match="cancel it first"):
        jobs.delete_custom_job(name=running.name).result()
    jobs.cancel_custom_job(name=running.name)
    wait_terminal(jobs, running.name)
    jobs.delete_custom_job(name=running.name).result()
    with pytest.raises(exceptions.NotFound):
        jobs.get_custom_job(name=running.name)


def test_unknown_field_gets_a_vertex_style_400(local_platform: StackOutputs) -> None:
    import urllib.request

    body = {
        "displayName": "bad",
        "jobSpec": {
            "workerPoolSpecs": [
                {
                    "machineSpec": {"machineType": "n1-standard-4"},
                    "replicaCount": "1",
                    "containerSpec": {"imageUri": "x", "command": ["python"]},
                    "persistentDiskSizeGb": 100,
                }
            ]
        },
    }
    request = urllib.request.Request(
        f"{local_platform.vertex_endpoint}/v1/{PARENT}/customJobs",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(request)
    assert info.value.code == 400
    error = json.load(info.value)["error"]
    assert error["status"] == "INVALID_ARGUMENT"
    assert "persistentDiskSizeGb" in error["message"]


def test_job_without_command_is_refused_with_the_field_path(local_platform: StackOutputs) -> None:
    jobs = client(local_platform.vertex_endpoint)
    spec = pool("pass")
    spec["container_spec"] = {"image_uri": "local/test:1"}
    where = r"workerPoolSpecs\[0\]\.containerSpec\.command"
    with pytest.raises(exceptions.BadRequest, match=where):
        jobs.create_custom_job(parent=PARENT, custom_job=custom_job("nocmd", spec))


def test_too_many_replicas_is_refused(local_platform: StackOutputs) -> None:
    jobs = client(local_platform.vertex_endpoint)
    with pytest.raises(exceptions.TooManyRequests, match="at most 8"):
        jobs.create_custom_job(
            parent=PARENT, custom_job=custom_job("big", pool("pass"), pool("pass", replicas=8))
        )


def test_unknown_job_is_404(local_platform: StackOutputs) -> None:
    jobs = client(local_platform.vertex_endpoint)
    with pytest.raises(exceptions.NotFound):
        jobs.get_custom_job(name=f"{PARENT}/customJobs/123")


def test_invalid_spec_gets_the_message_of_our_validation(local_platform: StackOutputs) -> None:
    jobs = client(local_platform.vertex_endpoint)
    spec = pool("pass")
    spec["machine_spec"] = {
        "machine_type": "a2-highgpu-1g",
        "accelerator_type": "NVIDIA_TESLA_T4",
        "accelerator_count": 1,
    }
    with pytest.raises(exceptions.BadRequest) as info:
        jobs.create_custom_job(parent=PARENT, custom_job=custom_job("t4-on-a2", spec))
    message = info.value.message
    assert "jobSpec.workerPoolSpecs[0].machineSpec.acceleratorType" in message
    assert "cannot be attached to a2-highgpu-1g" in message


def test_job_waits_pending_while_the_replica_cap_is_taken(local_platform: StackOutputs) -> None:
    jobs = client(local_platform.vertex_endpoint)
    big = jobs.create_custom_job(
        parent=PARENT,
        custom_job=custom_job(
            "big", pool("import time; time.sleep(600)"), pool("import time; time.sleep(600)", 7)
        ),
    )
    wait_for(lambda: jobs.get_custom_job(name=big.name).state == 3)
    small = jobs.create_custom_job(parent=PARENT, custom_job=custom_job("small", pool("pass")))
    # The executor ticks several times per second: a job that could start would have.
    wait_for(lambda: len(replica_output(local_platform, big.name, "service")) >= 9)
    # Waiting for resources (all 8 replicas are busy): PENDING as Vertex shows it, in answers
    # and filters alike.
    assert jobs.get_custom_job(name=small.name).state == 2
    waiting = jobs.list_custom_jobs(
        request={"parent": PARENT, "filter": 'state="JOB_STATE_PENDING"'}
    )
    assert small.name in {j.name for j in waiting}
    jobs.cancel_custom_job(name=big.name)
    assert wait_terminal(jobs, small.name).state == 4


def test_enums_are_ints_only_when_the_client_asks(local_platform: StackOutputs) -> None:
    import urllib.request

    jobs = client(local_platform.vertex_endpoint)
    job = jobs.create_custom_job(parent=PARENT, custom_job=custom_job("enums", pool("pass")))
    wait_terminal(jobs, job.name)
    url = f"{local_platform.vertex_endpoint}/v1/{job.name}"
    with urllib.request.urlopen(url + "?%24alt=json%3Benum-encoding%3Dint") as resp:
        assert json.load(resp)["state"] == 4
    with urllib.request.urlopen(url) as resp:
        assert json.load(resp)["state"] == "JOB_STATE_SUCCEEDED"


def test_log_cursor_pages_without_gaps_or_repeats(local_platform: StackOutputs) -> None:
    from tests.jobs.local.local_helpers import logs

    jobs = client(local_platform.vertex_endpoint)
    code = "for i in range(2500): print(i)"
    job = jobs.create_custom_job(
        parent=PARENT, custom_job=custom_job("chatty", pool(code), labels={"vtx-run-id": "chatty"})
    )
    wait_terminal(jobs, job.name)
    seen, cursor = [], 0
    while True:
        page = logs(local_platform, run_id="chatty", cursor=cursor)
        if not page["entries"]:
            break
        seen += [e["message"] for e in page["entries"] if e["replica"] == "workerpool0-0"]
        cursor = page["cursor"]
    assert seen == [str(i) for i in range(2500)]
    assert logs(local_platform, run_id="chatty", cursor=cursor)["cursor"] == cursor


def test_missing_executable_fails_the_job_with_127_and_says_why(
    local_platform: StackOutputs,
) -> None:
    jobs = client(local_platform.vertex_endpoint)
    spec = pool("pass")
    spec["container_spec"]["command"] = ["vtx-no-such-program", "--flag"]
    job = jobs.create_custom_job(parent=PARENT, custom_job=custom_job("missing", spec))
    done = wait_terminal(jobs, job.name)
    assert done.state == 5
    assert "non-zero status of 127" in done.error.message
    output = replica_output(local_platform, job.name, "workerpool0-0")
    assert output and output[0].startswith("cannot start vtx-no-such-program")


@pytest.mark.parametrize(
    "labels",
    [{"vtx-chaos-per-hour": "often"}, {"vtx-chaos-per-hour": "nan"}, {"vtx-chaos-seed": "x"}],
)
def test_chaos_labels_that_are_not_numbers_get_a_400(
    local_platform: StackOutputs, labels: dict[str, str]
) -> None:
    jobs = client(local_platform.vertex_endpoint)
    job = custom_job("chaos", pool("pass"), labels=labels, scheduling={"strategy": "SPOT"})
    with pytest.raises(exceptions.BadRequest, match="must be whole numbers"):
        jobs.create_custom_job(parent=PARENT, custom_job=job)
