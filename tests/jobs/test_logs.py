"""Cloud Logging reading, against a minimal in-test FastAPI server that answers
`entries:list` the way Cloud Logging does (pages, nextPageToken) and records each request.
The local platform's log endpoint is exercised in test_submission.py."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
import requests
from fastapi import FastAPI, Request

from jobs.logs import CloudLoggingSource, cloud_logging_filter, stream
from tests.conftest import free_port, wait_for_port

JOBS = [
    ("projects/p/locations/us-central1/customJobs/11", 0),
    ("projects/p/locations/us-central1/customJobs/12", 1),
]


def entry(ts: str, job_id: str, text: str) -> dict:
    return {
        "timestamp": ts,
        "resource": {"type": "ml_job", "labels": {"job_id": job_id}},
        "labels": {"ml.googleapis.com/task_name": "workerpool0-0"},
        "textPayload": text + "\n",
    }


@pytest.fixture
def logging_api() -> Iterator[tuple[str, list[dict]]]:
    import uvicorn

    received: list[dict] = []
    pages = {
        None: {"entries": [entry("2026-11-22T08:00:00Z", "11", "first")], "nextPageToken": "p2"},
        "p2": {"entries": [entry("2026-11-22T08:05:00Z", "12", "after resubmission")]},
    }
    app = FastAPI()

    @app.post("/v2/entries:list")
    async def entries_list(request: Request) -> dict:
        body = await request.json()
        received.append(body)
        return pages[body.get("pageToken")] if "timestamp>" not in body["filter"] else {}

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        wait_for_port(port)
        yield f"http://127.0.0.1:{port}/v2/entries:list", received
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def test_filter_selects_the_runs_jobs() -> None:
    assert cloud_logging_filter(["11", "12"], "2026-11-22T08:00:00Z") == (
        'resource.type="ml_job" AND (resource.labels.job_id="11" OR resource.labels.job_id="12")'
        ' AND timestamp>"2026-11-22T08:00:00Z"'
    )


def test_reads_every_page_of_every_attempt_in_order(logging_api: tuple[str, list[dict]]) -> None:
    url, received = logging_api
    source = CloudLoggingSource("p", lambda: JOBS, session=requests.Session(), api_url=url)
    entries = list(stream(source, done=lambda: True, follow=False))
    assert [(e.attempt, e.replica, e.message) for e in entries] == [
        (0, "workerpool0-0", "first"),
        (1, "workerpool0-0", "after resubmission"),
    ]
    assert received[0]["resourceNames"] == ["projects/p"]
    assert received[1]["pageToken"] == "p2"


def test_follow_continues_after_the_last_timestamp_until_done(
    logging_api: tuple[str, list[dict]],
) -> None:
    url, received = logging_api
    source = CloudLoggingSource("p", lambda: JOBS, session=requests.Session(), api_url=url)
    polls = iter([False, True])
    entries = list(stream(source, done=lambda: next(polls), follow=True, sleep=lambda _s: None))
    assert len(entries) == 2
    assert 'timestamp>"2026-11-22T08:05:00Z"' in received[-1]["filter"]
