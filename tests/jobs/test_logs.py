"""Cloud Logging reading, against a minimal in-test FastAPI server that answers `entries:list`
the way Cloud Logging does (time-ordered, `timestamp>=` filters, one entry per page with
nextPageToken) and records each request. The local platform's log endpoint is exercised in
test_submission.py."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator

import pytest
import requests
from fastapi import FastAPI, Request

from jobs.logs import CloudLoggingSource, LocalLogSource, cloud_logging_filter, stream
from tests.conftest import free_port, wait_for_port

JOBS = [
    ("projects/p/locations/us-central1/customJobs/11", 0),
    ("projects/p/locations/us-central1/customJobs/12", 1),
]


def entry(insert_id: str, ts: str, job_id: str, text: str) -> dict:
    return {
        "insertId": insert_id,
        "timestamp": ts,
        "resource": {"type": "ml_job", "labels": {"job_id": job_id}},
        "labels": {"ml.googleapis.com/task_name": "workerpool0-0"},
        "textPayload": text + "\n",
    }


class LoggingServer:
    def __init__(self) -> None:
        self.entries: list[dict] = []
        self.received: list[dict] = []
        self.url = ""

    def answer(self, body: dict) -> dict:
        self.received.append(body)
        after = re.search(r'timestamp>="([^"]+)"', body["filter"])
        ids = set(re.findall(r'job_id="(\d+)"', body["filter"]))
        matching = [
            e
            for e in self.entries
            if e["resource"]["labels"]["job_id"] in ids
            and (after is None or e["timestamp"] >= after.group(1))
        ]
        start = int(body.get("pageToken") or 0)
        page: dict = {"entries": matching[start : start + 1]}
        if start + 1 < len(matching):
            page["nextPageToken"] = str(start + 1)
        return page


@pytest.fixture
def logging_api() -> Iterator[LoggingServer]:
    import uvicorn

    state = LoggingServer()
    app = FastAPI()

    @app.post("/v2/entries:list")
    async def entries_list(request: Request) -> dict:
        return state.answer(await request.json())

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        wait_for_port(port)
        state.url = f"http://127.0.0.1:{port}/v2/entries:list"
        yield state
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def source(api: LoggingServer) -> CloudLoggingSource:
    return CloudLoggingSource("p", lambda: JOBS, session=requests.Session(), api_url=api.url)


def test_filter_selects_the_runs_jobs() -> None:
    assert cloud_logging_filter(["11", "12"], "2026-11-22T08:00:00Z") == (
        'resource.type="ml_job" AND (resource.labels.job_id="11" OR resource.labels.job_id="12")'
        ' AND timestamp>="2026-11-22T08:00:00Z"'
    )


def test_reads_every_page_of_every_attempt_in_order(logging_api: LoggingServer) -> None:
    logging_api.entries = [
        entry("a", "2026-11-22T08:00:00Z", "11", "first"),
        entry("b", "2026-11-22T08:05:00Z", "12", "after resubmission"),
    ]
    entries = list(stream(source(logging_api), done=lambda: True, follow=False))
    assert [(e.attempt, e.replica, e.message) for e in entries] == [
        (0, "workerpool0-0", "first"),
        (1, "workerpool0-0", "after resubmission"),
    ]
    assert logging_api.received[0]["resourceNames"] == ["projects/p"]
    assert logging_api.received[1]["pageToken"] == "1"


def test_follow_loses_and_repeats_nothing_when_entries_share_a_timestamp(
    logging_api: LoggingServer,
) -> None:
    ts = "2026-11-22T08:00:00Z"
    logging_api.entries = [entry("a", ts, "11", "one")]
    ticks = iter(range(4))

    def done() -> bool:
        tick = next(ticks)
        if tick == 1:  # a later line arrives with the same timestamp as the one already shown
            logging_api.entries.append(entry("b", ts, "11", "two"))
        if tick == 2:
            logging_api.entries.append(entry("c", "2026-11-22T08:00:01Z", "12", "three"))
        return tick >= 3

    lines = [
        e.message for e in stream(source(logging_api), done, follow=True, sleep=lambda _: None)
    ]
    assert lines == ["one", "two", "three"]


def test_local_logs_are_read_past_one_page(monkeypatch: pytest.MonkeyPatch) -> None:
    # The local control plane serves at most 1000 entries per request.
    pages = {0: ([{"message": "a\n"}, {"message": "b"}], 2), 2: ([{"message": "c"}], 3), 3: ([], 3)}
    asked = []

    class Response:
        def __init__(self, cursor: int) -> None:
            self.entries, self.cursor = pages[cursor]

        def raise_for_status(self) -> None:
            pass

        def json(self) -> dict:
            return {"entries": self.entries, "cursor": self.cursor}

    def get(url: str, params: dict, headers: dict, timeout: float) -> Response:
        assert headers == {"Authorization": "Bearer t0ken"}
        asked.append(params["cursor"])
        return Response(params["cursor"])

    monkeypatch.setattr(requests, "get", get)
    entries, cursor = LocalLogSource("http://127.0.0.1:1", "run-1", token="t0ken").fetch(None)
    assert [e.message for e in entries] == ["a", "b", "c"] and cursor == 3
    assert asked == [0, 2, 3]
