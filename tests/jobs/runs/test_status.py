"""What `vtx status` and `vtx list` compute, without a server: REST JSON read into JobRecords,
the trainer's progress from its log lines, retries and restarts, cost so far, the stable JSON
keys, and VertexRest's retries and explained errors over a scripted session."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pytest
import requests

from jobs.core.stack import StackOutputs
from jobs.runs.checkpoints import Storage, committed_steps, root_of, stored_checkpoints
from jobs.runs.logs import LogEntry
from jobs.runs.watch import run_status, trainer_progress
from jobs.vertex.errors import VertexError
from jobs.vertex.job_records import JobRecord
from jobs.vertex.rest import VertexRest
from jobs.vertex.retry import Backoff
from tests.conftest import stack_outputs
from tests.jobs.runs.run_records import PARENT, T0, rest_job, stamp, trainer

FAST = Backoff(initial_s=0.0, maximum_s=0.0, multiplier=1.0, deadline_s=5.0)


def test_progress_follows_the_newest_attempt_and_counts_every_attempts_checkpoints() -> None:
    entries = [
        trainer("1", 10, "training", step=0, total_steps=100),
        trainer("1", 20, "train", step=10, loss=2.5, tokens_per_s=900.0),
        trainer("1", 21, "checkpoint committed", step=10, path="gs://c/step-10"),
        trainer("2", 100, "training", step=10, total_steps=100),  # resumed by attempt 2
        trainer("2", 120, "train", step=30, loss=2.0, tokens_per_s=1000.0),
        trainer("2", 120, "train", rank=1, step=30, loss=9.0, tokens_per_s=1.0),  # rank 1
        trainer("2", 121, "checkpoint committed", step=30, path="gs://c/step-30"),
        LogEntry(stamp(122), f"{PARENT}/customJobs/2", "workerpool0-0", 0, "{not json"),
    ]
    progress = trainer_progress(entries, f"{PARENT}/customJobs/2")
    assert (progress.step, progress.total_steps) == (30, 100)
    assert (progress.loss, progress.tokens_per_s) == (2.0, 1000.0)
    assert progress.steps_per_s == pytest.approx(1.0)  # 20 steps in 20 s since the resume
    assert progress.eta_s(running=True) == pytest.approx(70.0)
    assert progress.eta_s(running=False) is None
    assert (progress.checkpoints, progress.checkpoint_step) == (2, 30)
    assert progress.checkpoint_path == "gs://c/step-30"
    assert not progress.done


def test_a_finished_trainer_has_no_eta() -> None:
    entries = [
        trainer("1", 0, "training", step=0, total_steps=10),
        trainer("1", 5, "train", step=10, loss=1.0, tokens_per_s=5.0),
        trainer("1", 6, "done", step=10),
    ]
    progress = trainer_progress(entries, f"{PARENT}/customJobs/1")
    assert progress.done and progress.eta_s(running=True) is None


def test_local_restarts_are_every_start_of_a_replica_after_its_first() -> None:
    job = JobRecord.from_rest(rest_job("1", 0, started_s=1))
    name = job.name

    def line(replica: str, restart: int | None, at_s: float) -> LogEntry:
        return LogEntry(stamp(at_s), name, replica, 2, "x", restart=restart)

    entries = [
        line("service", None, 1),
        line("workerpool0-0", 0, 2),
        line("workerpool1-0", 0, 2),
        line("workerpool1-0", 1, 30),  # workerpool1-0 restarted alone
        line("service", None, 40),  # then every replica restarted (or a retry)
        line("workerpool0-0", 1, 41),
        line("workerpool1-0", 2, 42),
        LogEntry(stamp(50), f"{PARENT}/customJobs/0", "workerpool0-0", 1, "an older", restart=7),
    ]
    status = run_status([job], entries, "us-central1", T0 + timedelta(seconds=60), local=True)
    replicas = {r.name: r for p in status.pools for r in p.replicas}
    assert {n: r.restarts for n, r in replicas.items()} == {
        "workerpool0-0": 1,
        "workerpool1-0": 2,
        "workerpool1-1": 0,
    }
    assert replicas["workerpool1-0"].last_log == T0 + timedelta(seconds=42)
    assert replicas["workerpool0-0"].last_log == T0 + timedelta(seconds=41)  # this attempt's
    assert replicas["workerpool1-1"].last_log is None  # never logged
    on_vertex = run_status([job], entries, "us-central1", T0, local=False)
    assert {r.restarts for p in on_vertex.pools for r in p.replicas} == {None}


def test_cost_so_far_sums_the_running_time_of_every_attempt_at_the_catalog_price() -> None:
    first = JobRecord.from_rest(rest_job("1", 0, "JOB_STATE_FAILED", started_s=0, ended_s=1800))
    second = JobRecord.from_rest(rest_job("2", 3600, started_s=3600))
    now = T0 + timedelta(seconds=5400)
    status = run_status([second, first], [], "us-central1", now, local=False)
    assert [a.number for a in status.attempts] == [1, 2]
    assert status.newest.job.job_id == "2"
    assert status.running_s == pytest.approx(3600)
    per_h = status.newest.price.usd_per_h
    assert per_h is not None and per_h > 0  # 3 x n1-standard-4 on demand
    assert status.usd == pytest.approx(per_h * 1.0)
    assert status.elapsed_s == pytest.approx(5400)


def test_an_attempt_that_never_started_cost_nothing_even_at_an_unknown_price() -> None:
    job = JobRecord.from_rest(rest_job("1", 0, "JOB_STATE_QUEUED"))
    job.rest["jobSpec"]["workerPoolSpecs"][0]["machineSpec"]["machineType"] = "n9-imaginary-4"
    status = run_status([job], [], "us-central1", T0 + timedelta(hours=1), local=False)
    assert status.usd == 0.0 and status.running_s == 0.0


def stack() -> StackOutputs:
    return stack_outputs(project="p")


@dataclass
class Scripted:
    """Answers each request with the next (status, body) and records (method, url, params)."""

    answers: list[tuple[int, dict]]
    seen: list[tuple[str, str, dict]] = field(default_factory=list)

    def request(self, method: str, url: str, timeout: float, **kwargs: Any) -> requests.Response:
        self.seen.append((method, url, kwargs.get("params") or {}))
        status, body = self.answers.pop(0)
        response = requests.Response()
        response.status_code = status
        response._content = json.dumps(body).encode()
        return response


def google_error(code: int, message: str) -> dict:
    return {"error": {"code": code, "message": message}}


def test_rest_reads_retry_transient_answers_then_succeed() -> None:
    session = Scripted([(503, google_error(503, "busy")), (429, {}), (200, rest_job("7", 0))])
    job = VertexRest(stack(), session=session, backoff=FAST).get(f"{PARENT}/customJobs/7")
    assert job.job_id == "7"
    assert [m for m, _, _ in session.seen] == ["GET"] * 3
    assert (
        session.seen[0][1]
        == f"https://us-central1-aiplatform.googleapis.com/v1/{PARENT}/customJobs/7"
    )


def test_rest_list_follows_pages_filters_by_run_and_sorts_newest_first() -> None:
    other = rest_job("9", 50, run_id="other")
    plain = {k: v for k, v in rest_job("8", 60).items() if k != "labels"}
    session = Scripted(
        [
            (200, {"customJobs": [rest_job("1", 0), other], "nextPageToken": "t"}),
            (200, {"customJobs": [rest_job("2", 100), plain]}),
        ]
    )
    jobs = VertexRest(stack(), session=session, backoff=FAST).list("run-1")
    assert [j.job_id for j in jobs] == ["2", "1"]
    assert session.seen[0][2]["filter"] == 'labels.vtx-run-id="run-1"'
    assert session.seen[1][2]["pageToken"] == "t"


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (403, "permission denied in p"),
        (404, "not found: no such job"),
        (400, "Vertex rejected the job"),
        (409, "Vertex API error"),
    ],
)
def test_rest_errors_are_explained(status: int, expected: str) -> None:
    session = Scripted([(status, google_error(status, "no such job"))])
    with pytest.raises(VertexError, match=expected):
        VertexRest(stack(), session=session, backoff=FAST).get(f"{PARENT}/customJobs/7")
    assert len(session.seen) == 1  # not transient: asked once


def test_a_persistent_503_gives_up_with_a_message() -> None:
    session = Scripted([(503, google_error(503, "busy"))] * 100)
    short = Backoff(initial_s=0.01, maximum_s=0.01, multiplier=1.0, deadline_s=0.05)
    with pytest.raises(VertexError, match="unavailable after retries: busy"):
        VertexRest(stack(), session=session, backoff=short).get(f"{PARENT}/customJobs/7")
    assert 1 < len(session.seen) < 100


def test_an_unknown_run_id_names_where_it_looked() -> None:
    session = Scripted([(200, {})])
    with pytest.raises(VertexError, match="no job with run id 'nope' in projects/p/locations"):
        VertexRest(stack(), session=session, backoff=FAST).resolve("nope")


def test_committed_steps_are_marked_step_folders_directly_under_the_root() -> None:
    root = "runs/r1/checkpoints"
    names = [
        f"{root}/step-000000010/COMMITTED",
        f"{root}/step-000000010/.metadata",
        f"{root}/step-000000020/.metadata",  # written, never committed
        f"{root}/step-000000005/COMMITTED",
        f"{root}/step-000000030/nested/COMMITTED",  # not a marker of step 30
        f"{root}/latest/COMMITTED",
        f"{root}-old/step-000000040/COMMITTED",  # a sibling prefix
        "runs/r1/model/COMMITTED",
    ]
    assert committed_steps(names, root) == [5, 10]


def test_the_root_is_the_logged_one_else_vertexs_checkpoint_dir() -> None:
    logged = "gs://b/elsewhere/ckpt/step-000000010"
    assert root_of("gs://b/runs/r1/", logged) == "gs://b/elsewhere/ckpt"
    assert root_of("gs://b/runs/r1/", None) == "gs://b/runs/r1/checkpoints"
    assert root_of(None, None) is None


@dataclass
class Listing:
    """GCS objects.list pages in order; records the params of each call."""

    pages: list[tuple[int, dict]]
    params: list[dict] = field(default_factory=list)

    def get(self, url: str, params: dict, timeout: float) -> requests.Response:
        assert url == "https://storage.googleapis.com/storage/v1/b/b/o"
        self.params.append(params)
        status, body = self.pages.pop(0)
        response = requests.Response()
        response.status_code, response._content = status, json.dumps(body).encode()
        return response


def test_storage_lists_every_page_and_a_refusal_is_reported_not_raised() -> None:
    marker = "runs/r1/checkpoints/step-{:09d}/COMMITTED".format
    listing = Listing(
        [
            (200, {"items": [{"name": marker(10)}], "nextPageToken": "t"}),
            (200, {"items": [{"name": marker(20)}]}),
        ]
    )
    found = stored_checkpoints(Storage(stack(), session=listing), "gs://b/runs/r1/", None)
    assert (found.root, found.steps, found.error) == ("gs://b/runs/r1/checkpoints", [10, 20], None)
    assert listing.params[0]["prefix"] == "runs/r1/checkpoints/"
    assert listing.params[1]["pageToken"] == "t"

    refused = Listing([(403, {"error": {"message": "no"}})])
    found = stored_checkpoints(Storage(stack(), session=refused), "gs://b/runs/r1/", None)
    assert found.steps is None and "403" in (found.error or "")
