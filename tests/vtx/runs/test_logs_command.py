"""`vtx logs`: options, formats, following a run to its end."""

from __future__ import annotations

import io
import json
import re
import threading
from collections.abc import Iterator

import pytest
import requests
from fastapi import FastAPI, Request
from rich.console import Console
from typer.testing import CliRunner

from jobs.local.plumbing.ports import free_port
from jobs.runs.logs import (
    CloudLoggingSource,
    LogEntry,
    severity_of,
    stream,
)
from jobs.vertex.job_records import JobRecord
from jobs.vertex.rest import VertexRest
from tests.conftest import TEST_DATA, wait_for_port
from vtx.cli import app
from vtx.commands.logs import LogFormat, log_view
from vtx.flows.follow import numbered

JOBS = [
    ("projects/p/locations/us-central1/customJobs/11", 1),
    ("projects/p/locations/us-central1/customJobs/12", 2),
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


def test_reads_every_page_of_every_attempt_in_order(logging_api: LoggingServer) -> None:
    logging_api.entries = [
        entry("a", "2026-11-22T08:00:00Z", "11", "first"),
        entry("b", "2026-11-22T08:05:00Z", "12", "after resubmission"),
    ]
    entries = list(stream(source(logging_api), done=lambda: True, follow=False))
    assert [(e.attempt, e.replica, e.restart, e.message) for e in entries] == [
        (1, "workerpool0-0", None, "first"),  # Cloud Logging does not say which restart
        (2, "workerpool0-0", None, "after resubmission"),
    ]
    assert logging_api.received[0]["resourceNames"] == ["projects/p"]
    assert logging_api.received[1]["pageToken"] == "1"


def test_a_runs_jobs_are_numbered_from_one_oldest_first_as_vtx_status_numbers_them() -> None:
    def job(job_id: str, created: str | None) -> JobRecord:
        rest = {"name": f"projects/p/locations/r/customJobs/{job_id}", "createTime": created}
        return JobRecord.from_rest(rest)

    newest_first = [job("12", "2026-11-22T09:00:00Z"), job("11", "2026-11-22T08:00:00Z")]
    assert [(name[-2:], n) for name, n in numbered(newest_first)] == [("11", 1), ("12", 2)]
    assert numbered([job("13", None)])[0][1] == 1  # never seen from Vertex: still the first


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


def test_a_structured_cloud_entry_keeps_its_fields_and_severity(logging_api: LoggingServer) -> None:
    raw = entry("a", "2026-11-22T08:00:00Z", "11", "")
    del raw["textPayload"]
    raw |= {"severity": "WARNING", "jsonPayload": {"message": "train", "step": 3}}
    logging_api.entries = [raw]
    (got,) = list(stream(source(logging_api), done=lambda: True, follow=False))
    assert severity_of(got) == "WARNING"
    assert json.loads(got.message) == {"message": "train", "step": 3}


def _vtx_logs(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["logs", *args, "--stack", "local"])
    assert "Traceback" not in result.output
    return result.exit_code, result.stdout, result.stderr


def test_vtx_logs_text_filtered_by_replica_and_severity(finished_run: str) -> None:
    code, out, _ = _vtx_logs(finished_run, "--format", "text", "--replica", "workerpool0-0")
    assert code == 0, out
    assert "workerpool0-0    INFO    step 3/9 loss 1.5 lr 0.001 2.5k tok/s" in out
    assert "service" not in out
    code, out, _ = _vtx_logs(finished_run, "--format", "text", "--severity", "warning")
    assert code == 0, out
    # time, replica (one attempt, no restart: nothing after its name), severity, message
    assert [line.split(None, 3)[-1] for line in out.splitlines()[1:]] == ["slow disk"]


def test_vtx_logs_piped_is_json_lines_and_follow_ends_with_the_run(finished_run: str) -> None:
    code, out, err = _vtx_logs(finished_run, "--follow", "--poll-s", "0.2")
    assert code == 0, out + err
    rows = [json.loads(line) for line in out.splitlines()]  # stdout is JSON lines only
    assert {"service", "workerpool0-0"} == {row["replica"] for row in rows}
    assert any(row.get("jsonPayload", {}).get("step") == 3 for row in rows)
    assert "JOB_STATE_SUCCEEDED" in err  # the run's end is said on stderr


def test_vtx_logs_refuses_an_unknown_severity(finished_run: str) -> None:
    code, _, err = _vtx_logs(finished_run, "--severity", "loud")
    assert code == 2
    assert "unknown severity 'loud'" in err


@pytest.mark.parametrize(
    ("terminal", "fmt", "as_json"),
    [
        (True, LogFormat.auto, False),  # a person reads a terminal
        (False, LogFormat.auto, True),  # a pipe feeds a program
        (False, LogFormat.text, False),
        (True, LogFormat.json, True),
    ],
)
def test_the_format_follows_the_terminal_unless_one_is_asked_for(
    terminal: bool, fmt: LogFormat, as_json: bool
) -> None:
    out = Console(force_terminal=terminal, file=io.StringIO())
    assert log_view(out, fmt, None, None).json is as_json


STACK_FILE = str(TEST_DATA / "stack-dev.json")

ENDED_JOB = "projects/p/locations/us-central1/customJobs/7"


class StillFollowing(Exception):
    """The fake's polls ran out: the command kept following a job that had ended."""


class EndingRest(VertexRest):
    """One job: RUNNING for the first poll, then ``end`` for good; no Vertex behind it. The
    command's polls are counted, so that following past the end fails instead of hanging."""

    def __init__(self, end: str, run_id: str | None, polls: int = 50) -> None:
        self.states = ["JOB_STATE_RUNNING", end]
        self.run_id = run_id
        self.polls = polls

    def _job(self) -> JobRecord:
        self.polls -= 1
        if self.polls < 0:
            raise StillFollowing(f"still following a job that is {self.states[-1]}")
        state = self.states.pop(0) if len(self.states) > 1 else self.states[0]
        labels = {"vtx-run-id": self.run_id} if self.run_id else {}
        return JobRecord.from_rest({"name": ENDED_JOB, "state": state, "labels": labels})

    def list_studies(self, run_id: str | None = None) -> list[dict]:
        return []

    def resolve(self, ref: str) -> JobRecord:
        return self._job()

    def get(self, name: str) -> JobRecord:
        return self._job()

    def list(self, run_id: str | None = None) -> list[JobRecord]:
        return [self._job()]


class NoEntries:
    def fetch(self, cursor: object) -> tuple[list[LogEntry], object]:
        return [], cursor


@pytest.mark.parametrize("run_id", ["logs-ended-1", None], ids=["a run", "a job without run id"])
@pytest.mark.parametrize("end", ["JOB_STATE_EXPIRED", "JOB_STATE_PARTIALLY_SUCCEEDED"])
def test_vtx_logs_follow_ends_with_any_final_state_and_exit_1(
    monkeypatch: pytest.MonkeyPatch, end: str, run_id: str | None
) -> None:
    """EXPIRED and PARTIALLY_SUCCEEDED are ends too (docs/vertex-facts.md, "Job states"): the
    follow says the state and exits 1, as for FAILED, rather than waiting forever."""
    import vtx.commands.logs as log_commands
    import vtx.flows.follow as follow

    rest = EndingRest(end, run_id)
    monkeypatch.setattr(log_commands, "VertexRest", lambda stack: rest)
    monkeypatch.setattr(follow, "watcher", lambda vertex: rest)
    monkeypatch.setattr(follow, "log_source", lambda *a, **k: NoEntries())
    result = CliRunner().invoke(
        app,
        [
            "logs",
            run_id or "7",
            "--follow",
            "--poll-s",
            "0",
            "--format",
            "text",
            "--stack-file",
            STACK_FILE,
        ],
        catch_exceptions=True,
    )
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert result.exit_code == 1, result.output
    assert f"{ENDED_JOB}: {end}" in result.stdout
