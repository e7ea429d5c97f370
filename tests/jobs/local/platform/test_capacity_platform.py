"""Capacity end to end, through the real aiplatform client, on a capacity_stack of its own started
with a capacity model (as `vtx local up --capacity FILE` does) and changed at run time (as
`vtx local capacity set` does): a create beyond quota, a Spot stockout, FLEX_START waiting and
starting, or running out of its maxWaitDuration, capacity released by a finished job, and the
Cloud Quotas read API. Replicas are one-line programs; waits are on states, never on time."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest
from google.api_core import exceptions

from jobs.core.catalog import load_catalog
from jobs.core.stack import StackOutputs
from jobs.local.platform.capacity import QUOTA_EXCEEDED
from jobs.local.plumbing.client import read_capacity
from tests.jobs.local.local_helpers import (
    PARENT,
    client,
    replica_output,
    wait_for,
    wait_terminal,
)
from tests.jobs.local.platform.capacity_helpers import (
    FAILED,
    L4,
    REGION,
    START,
    SUCCEEDED,
    l4_job,
    waiting,
)

SLEEP = "import time; print('up', flush=True); time.sleep(600)"


def test_the_starting_model_is_the_one_up_was_given(capacity_stack: StackOutputs) -> None:
    answer = read_capacity(capacity_stack.vertex_endpoint or "", capacity_stack.local_token or "")
    assert answer["capacity"] == START


def test_a_create_beyond_quota_is_vertexs_429_naming_metric_limit_region(
    capacity_stack: StackOutputs,
) -> None:
    """Over REST, api_core maps an HTTP 429 to TooManyRequests (ResourceExhausted, its subclass,
    is what the gRPC transport raises): the same as real Vertex's answer gives this client."""
    jobs = client(capacity_stack.vertex_endpoint)
    with pytest.raises(exceptions.TooManyRequests) as caught:
        jobs.create_custom_job(parent=PARENT, custom_job=l4_job("too-big", "pass", gpus=4))
    error = caught.value.response.json()["error"]
    assert (caught.value.code, error["status"]) == (429, "RESOURCE_EXHAUSTED")
    message = error["message"]
    assert message.startswith(f"{QUOTA_EXCEEDED}{L4}. ")
    assert f"limit 2 in region {REGION}, 0 in use, this job needs 4" in message


def test_quota_held_by_an_active_job_refuses_the_next_until_it_ends(
    capacity_stack: StackOutputs,
) -> None:
    jobs = client(capacity_stack.vertex_endpoint)
    first = jobs.create_custom_job(parent=PARENT, custom_job=l4_job("holds", SLEEP, gpus=2))
    with pytest.raises(exceptions.TooManyRequests, match="2 in use, this job needs 1"):
        jobs.create_custom_job(parent=PARENT, custom_job=l4_job("refused", "pass"))
    jobs.cancel_custom_job(name=first.name)
    wait_terminal(jobs, first.name)
    later = jobs.create_custom_job(parent=PARENT, custom_job=l4_job("after", "pass"))
    assert wait_terminal(jobs, later.name).state == SUCCEEDED


def test_a_job_waits_pending_for_accelerators_a_finished_job_releases(
    capacity_stack: StackOutputs, capacity
) -> None:
    capacity({"regions": {REGION: {"accelerators": {"NVIDIA_L4": {"on_demand": 1}}}}})
    jobs = client(capacity_stack.vertex_endpoint)
    holder = jobs.create_custom_job(parent=PARENT, custom_job=l4_job("holder", SLEEP))
    wait_for(lambda: replica_output(capacity_stack, holder.name, "workerpool0-0"))
    waiter = jobs.create_custom_job(parent=PARENT, custom_job=l4_job("waiter", "print('ran')"))
    wait_for(lambda: waiting(capacity_stack, jobs, waiter.name))
    assert replica_output(capacity_stack, waiter.name, "workerpool0-0") == []
    held = read_capacity(capacity_stack.vertex_endpoint or "", capacity_stack.local_token or "")[
        "in_use"
    ]
    assert held[REGION]["accelerators"] == {"NVIDIA_L4 on_demand": 1}  # the holder's, not both
    jobs.cancel_custom_job(name=holder.name)
    done = wait_terminal(jobs, waiter.name)
    assert done.state == SUCCEEDED, done.error
    assert replica_output(capacity_stack, waiter.name, "workerpool0-0") == ["ran"]


def test_a_job_waiting_for_accelerators_can_be_cancelled(
    capacity_stack: StackOutputs, capacity
) -> None:
    capacity({"regions": {REGION: {"accelerators": {"NVIDIA_L4": {"on_demand": 0}}}}})
    jobs = client(capacity_stack.vertex_endpoint)
    job = jobs.create_custom_job(parent=PARENT, custom_job=l4_job("never", "print('ran')"))
    wait_for(lambda: waiting(capacity_stack, jobs, job.name))
    jobs.cancel_custom_job(name=job.name)
    done = wait_terminal(jobs, job.name)
    assert (done.state, done.error.code) == (7, 1)  # CANCELLED, google.rpc.Code.CANCELLED
    assert replica_output(capacity_stack, job.name, "workerpool0-0") == []


def test_a_spot_job_in_a_stocked_out_region_fails_with_stockout(
    capacity_stack: StackOutputs, capacity
) -> None:
    capacity({"regions": {REGION: {"accelerators": {"NVIDIA_L4": {"spot_stockout": True}}}}})
    jobs = client(capacity_stack.vertex_endpoint)
    job = jobs.create_custom_job(
        parent=PARENT, custom_job=l4_job("spot", "print('ran')", scheduling={"strategy": "SPOT"})
    )
    done = wait_terminal(jobs, job.name)
    assert done.state == FAILED
    assert done.error.code == 8  # RESOURCE_EXHAUSTED
    assert done.error.message.startswith("STOCKOUT: Spot capacity for NVIDIA_L4 is exhausted.")
    assert f"Resources are insufficient in region: {REGION}" in done.error.message
    assert replica_output(capacity_stack, job.name, "workerpool0-0") == []


def test_flex_start_past_its_max_wait_duration_fails(
    capacity_stack: StackOutputs, capacity
) -> None:
    capacity({"regions": {REGION: {"accelerators": {"NVIDIA_L4": {"on_demand": 0}}}}})
    jobs = client(capacity_stack.vertex_endpoint)
    flex = {"strategy": "FLEX_START", "max_wait_duration": "1s"}
    job = jobs.create_custom_job(
        parent=PARENT, custom_job=l4_job("flex-late", "print('ran')", scheduling=flex)
    )
    done = wait_terminal(jobs, job.name)
    assert done.state == FAILED
    assert done.error.code == 8
    assert "maxWaitDuration of 1 s" in done.error.message
    assert replica_output(capacity_stack, job.name, "workerpool0-0") == []


def _get(capacity_stack: StackOutputs, path: str) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(f"{capacity_stack.vertex_endpoint}{path}") as resp:  # no token
            return resp.status, json.load(resp)
    except urllib.error.HTTPError as exc:
        return exc.code, json.load(exc)


QUOTA_INFOS = "/v1/projects/{}/locations/global/services/aiplatform.googleapis.com/quotaInfos"


def test_quota_infos_answer_with_the_limits_set(capacity_stack: StackOutputs, capacity) -> None:
    capacity({"regions": {REGION: {"quotas": {L4: 7}}}})
    quota_id = load_catalog().accelerators["NVIDIA_L4"].cloud_quota_id(False)
    for project in ("vtx-local", "424242424242"):
        status, page = _get(capacity_stack, QUOTA_INFOS.format(project))
        assert status == 200
        assert page["nextPageToken"] == ""
        [info] = [i for i in page["quotaInfos"] if i["quotaId"] == quota_id]
        assert info["metric"] == L4
        [here] = [d for d in info["dimensionsInfos"] if d["dimensions"] == {"region": REGION}]
        assert here["details"] == {"value": "7"}
    status, one = _get(capacity_stack, QUOTA_INFOS.format("vtx-local") + f"/{quota_id}")
    assert (status, one["quotaId"]) == (200, quota_id)


@pytest.mark.parametrize(
    ("path", "status"),
    [
        (QUOTA_INFOS.format("Someone_Else"), 404),
        (QUOTA_INFOS.format("vtx-local") + "/NoSuchQuota", 404),
        (QUOTA_INFOS.format("vtx-local").replace("aiplatform", "compute"), 404),
        (QUOTA_INFOS.format("vtx-local").replace("global", REGION), 400),
    ],
)
def test_quota_infos_refuse_what_is_not_served(
    capacity_stack: StackOutputs, path: str, status: int
) -> None:
    got, body = _get(capacity_stack, path)
    assert got == status
    assert body["error"]["code"] == status


def test_the_capacity_endpoint_wants_the_token_and_a_valid_model(
    capacity_stack: StackOutputs,
) -> None:
    status, body = _get(capacity_stack, "/vtx/capacity")
    assert (status, body["error"]["status"]) == (401, "UNAUTHENTICATED")
    bad = {"regions": {REGION: {"accelerators": {"NVIDIA_L44": {}}}}}
    request = urllib.request.Request(
        f"{capacity_stack.vertex_endpoint}/vtx/capacity",
        data=json.dumps(bad).encode(),
        headers={
            "Content-Type": "application/json",
            "Authorization": f"Bearer {capacity_stack.local_token}",
        },
        method="PUT",
    )
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(request)
    assert caught.value.code == 400
    assert "did you mean NVIDIA_L4" in json.load(caught.value)["error"]["message"]
