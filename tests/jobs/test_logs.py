"""Cloud Logging reading, against a minimal in-test FastAPI server that answers `entries:list`
the way Cloud Logging does (time-ordered, `timestamp>=` filters, one entry per page with
nextPageToken) and records each request; the severities, filters and renderings of `vtx logs`
on entries as real runs print them, and the command itself on the local platform. The local
platform's log endpoint is exercised in test_submission.py too."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from fastapi import FastAPI, Request
from rich.console import Console
from typer.testing import CliRunner

from jobs.core.stack import StackOutputs
from jobs.local.platform.ports import free_port
from jobs.local.training.log_copier import SERVICE as LOCAL_SERVICE
from jobs.runs.logs import (
    SERVICE,
    CloudLoggingSource,
    HumanFormat,
    LocalLogSource,
    LogEntry,
    LogFilter,
    cloud_logging_filter,
    json_line,
    origin,
    severity_named,
    severity_of,
    stream,
)
from jobs.vertex.client import JobRecord, Vertex, VertexRest, is_terminal
from tests.conftest import wait_for_port
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


def test_local_logs_are_read_past_one_page(monkeypatch: pytest.MonkeyPatch) -> None:
    # The local control plane serves at most 1000 entries per request.
    a = {"message": "a\n", "attempt": 2, "replica": "workerpool1-0", "restart": 1}
    service = {"message": "b", "attempt": 2, "replica": "service", "restart": None}
    pages = {0: ([a, service], 2), 2: ([{"message": "c"}], 3), 3: ([], 3)}
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
    assert [(e.message, e.attempt, e.restart) for e in entries] == [
        ("a", 2, 1),
        ("b", 2, None),
        ("c", 1, None),
    ]
    assert cursor == 3 and asked == [0, 2, 3]


def test_cloud_logging_filters_severity_on_the_server() -> None:
    query = cloud_logging_filter(["11"], min_severity="WARNING")
    assert query == 'resource.type="ml_job" AND (resource.labels.job_id="11") AND severity>=WARNING'
    assert "severity" not in cloud_logging_filter(["11"])


def test_a_structured_cloud_entry_keeps_its_fields_and_severity(logging_api: LoggingServer) -> None:
    raw = entry("a", "2026-11-22T08:00:00Z", "11", "")
    del raw["textPayload"]
    raw |= {"severity": "WARNING", "jsonPayload": {"message": "train", "step": 3}}
    logging_api.entries = [raw]
    (got,) = list(stream(source(logging_api), done=lambda: True, follow=False))
    assert severity_of(got) == "WARNING"
    assert json.loads(got.message) == {"message": "train", "step": 3}


# Lines as a local run of jobs/templates/smoke-cpu.yaml printed them (trimmed).
RUN = [
    ("service", "job accepted: 2 replica(s)"),
    (
        "workerpool0-0",
        '{"severity": "INFO", "message": "training", "logger": "trainer.training.loop", '
        '"rank": 0, "step": 0, "total_steps": 120, "world_size": 2}',
    ),
    (
        "workerpool0-0",
        "/v/lib/transformers/modeling_utils.py:3303: FutureWarning: `x` is deprecated",
    ),
    ("workerpool0-0", "  warnings.warn("),
    (
        "workerpool0-0",
        '{"severity": "INFO", "message": "train", "logger": "trainer.training.loop", '
        '"rank": 0, "step": 40, "loss": 2.312345, "tokens_per_s": 1234.5, "lr": 0.0001, '
        '"grad_norm": 1.091795}',
    ),
    (
        "workerpool1-0",
        '{"severity": "INFO", "message": "train", "logger": "trainer.training.loop", '
        '"rank": 1, "step": 40, "loss": 2.312345, "tokens_per_s": 1234.5, "lr": 0.0001}',
    ),
    (
        "workerpool1-0",
        "W1123 15:12:58.837000 9286 torch/distributed/elastic/agent/server/"
        "api.py:753] Received 15 death signal, shutting down workers",
    ),
    (
        "workerpool0-0",
        "E1123 15:13:00.876000 9285 torch/distributed/elastic/multiprocessing/"
        "api.py:1002] failed (exitcode: 143) local_rank: 0 (pid: 9300)",
    ),
    (
        "workerpool0-0",
        '{"severity": "WARNING", "message": "workers stopped", "logger": '
        '"__main__", "rank": 0, "exit_code": 143}',
    ),
    ("workerpool0-0", "Traceback (most recent call last):"),
]


def _entries(day: str = "2026-11-23") -> list[LogEntry]:
    return [
        LogEntry(f"{day}T15:12:{i:02d}.123456Z", "projects/p/customJobs/1", replica, 1, message)
        for i, (replica, message) in enumerate(RUN)
    ]


def test_the_severity_of_each_kind_of_line() -> None:
    assert [severity_of(e) for e in _entries()] == [
        "INFO",  # the platform's own event
        "INFO",  # the trainer's JSON says so
        "WARNING",  # warnings.warn's first line
        "DEFAULT",  # ...and its source line: nothing says a severity
        "INFO",
        "INFO",
        "WARNING",  # glog W
        "ERROR",  # glog E
        "WARNING",
        "ERROR",
    ]
    given = LogEntry("t", "j", "workerpool0-0", 1, "plain", severity="CRITICAL")
    assert severity_of(given) == "CRITICAL"  # Cloud Logging's own severity wins


def test_severity_filter_keeps_that_level_and_above_as_gcloud_does() -> None:
    kept = LogFilter(min_severity="WARNING").apply(_entries())
    assert [e.message[:12] for e in kept] == [
        "/v/lib/trans",
        "W1123 15:12:",
        "E1123 15:13:",
        '{"severity":',
        "Traceback (m",
    ]


@pytest.mark.parametrize(
    ("replicas", "expected"),
    [
        (("workerpool1-0",), 2),
        (("workerpool1",), 2),  # a pool: all its replicas
        (("service",), 1),
        (("workerpool1-0", "service"), 3),
        (("workerpool1-00",), 0),  # a name, not a prefix
        ((), len(RUN)),
    ],
)
def test_replica_filter(replicas: tuple[str, ...], expected: int) -> None:
    assert len(list(LogFilter(replicas).apply(_entries()))) == expected


def test_severity_names_as_a_user_writes_them() -> None:
    assert [severity_named(n) for n in ("warning", "Warn", "ERROR")] == [
        "WARNING",
        "WARNING",
        "ERROR",
    ]
    with pytest.raises(ValueError, match="unknown severity 'loud'; one of DEFAULT"):
        severity_named("loud")


def test_human_lines_read_like_a_progress_log() -> None:
    human = HumanFormat()
    lines = [line for e in _entries() for line in human.lines(e)]
    assert lines[0] == "-- 2026-11-23 (UTC) --"
    assert lines[1] == "15:12:00.123 service          INFO    job accepted: 2 replica(s)"
    assert lines[2].endswith("INFO    training step=0 total_steps=120 world_size=2")
    assert lines[5] == (
        "15:12:04.123 workerpool0-0    INFO    "
        "step 40/120 loss 2.312 lr 0.0001 1.2k tok/s grad_norm=1.092"
    )
    assert lines[6].endswith("INFO    [rank 1] step 40/120 loss 2.312 lr 0.0001 1.2k tok/s")
    assert lines[9].endswith("WARNING workers stopped exit_code=143")
    assert sum(line.startswith("--") for line in lines) == 1  # one date line per date
    next_day = human.lines(_entries("2026-11-24")[0])
    assert next_day[0] == "-- 2026-11-24 (UTC) --"


@pytest.mark.parametrize(
    ("attempt", "restart", "attempts", "who"),
    [
        (1, 0, 1, "workerpool1-0"),  # one attempt, the first start: the replica alone
        (1, None, 1, "workerpool1-0"),  # Vertex does not say which restart
        (1, 2, 1, "workerpool1-0 r2"),  # the replica's second restart
        (1, 0, 2, "workerpool1-0 a1"),  # a run of several attempts names each line's
        (2, 1, 2, "workerpool1-0 a2 r1"),
    ],
)
def test_a_line_names_its_attempt_only_in_a_run_of_several_and_its_restart_if_any(
    attempt: int, restart: int | None, attempts: int, who: str
) -> None:
    line = LogEntry("t", "j", "workerpool1-0", attempt, "m", restart=restart)
    assert origin(line, attempts) == who


def test_human_lines_name_the_attempt_once_the_run_has_several() -> None:
    human = HumanFormat()
    first = LogEntry("2026-11-23T15:12:00.123Z", "j/1", "workerpool0-0", 1, "one")
    again = LogEntry("2026-11-23T15:13:00.123Z", "j/2", "workerpool0-0", 2, "two", restart=1)
    assert human.lines(first)[-1] == "15:12:00.123 workerpool0-0    DEFAULT one"
    # A later attempt joined the stream: from then on every line names its attempt.
    assert human.lines(again)[-1] == "15:13:00.123 workerpool0-0 a2 r1 DEFAULT two"
    assert human.lines(first)[-1] == "15:12:00.123 workerpool0-0 a1    DEFAULT one"
    assert HumanFormat(attempts=2).lines(first)[-1].endswith("workerpool0-0 a1    DEFAULT one")


def test_json_lines_use_cloud_logging_names() -> None:
    rows = [json.loads(json_line(e)) for e in _entries()]
    assert rows[0] == {
        "timestamp": "2026-11-23T15:12:00.123456Z",
        "severity": "INFO",
        "job": "projects/p/customJobs/1",
        "attempt": 1,
        "replica": "service",
        "restart": None,
        "textPayload": "job accepted: 2 replica(s)",
    }
    assert rows[4]["jsonPayload"]["loss"] == 2.312345
    assert "textPayload" not in rows[4]


def test_the_service_replica_is_the_local_platform_s_name() -> None:
    assert SERVICE == LOCAL_SERVICE


# -- the command on the local platform ------------------------------------------------------------

PRINTS = (
    "import json; "
    "print(json.dumps({'severity': 'INFO', 'message': 'training', 'rank': 0, 'total_steps': 9})); "
    "print(json.dumps({'severity': 'INFO', 'message': 'train', 'rank': 0, 'step': 3, "
    "'loss': 1.5, 'lr': 0.001, 'tokens_per_s': 2500.0})); "
    "print(json.dumps({'severity': 'WARNING', 'message': 'slow disk', 'rank': 0}))"
)


@pytest.fixture(scope="module")
def finished_run(local_platform: StackOutputs) -> str:
    """A run id whose one job printed the trainer's kind of lines and succeeded."""
    from google.cloud import aiplatform_v1

    pool = {
        "machine_spec": {"machine_type": "n1-standard-4"},
        "replica_count": 1,
        "container_spec": {"image_uri": "img", "command": ["python", "-c", PRINTS]},
    }
    run_id = "logs-format-1"
    vertex = Vertex(local_platform)
    job = vertex.create(
        aiplatform_v1.CustomJob(
            display_name="fmt",
            job_spec={"worker_pool_specs": [pool]},
            labels={"vtx-run-id": run_id},
        )
    )
    deadline = time.monotonic() + 60  # a safety net for a hung job, not a timing assertion
    while not is_terminal(vertex.get(job.name)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return run_id


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


# A fresh interpreter: the test process itself has imported aiplatform (the fixture submits).
NO_SDK = """
import sys
from typer.testing import CliRunner
from vtx.cli import app
for args in (["logs", RUN, "--stack", "local"], ["local", "preempt", RUN]):
    result = CliRunner().invoke(app, args)
    assert "Traceback" not in result.output, result.output
    assert "google.cloud.aiplatform_v1" not in sys.modules, args
"""


def test_vtx_logs_and_local_preempt_watch_over_rest_without_aiplatform(finished_run: str) -> None:
    # Importing aiplatform took seconds of every call (3.6-7.1 s -> 0.9-1.7 s measured).
    code = NO_SDK.replace("RUN", repr(finished_run))
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


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


# -- following a job to an end other than SUCCEEDED or FAILED ----------------------------------

STACK_FILE = str(Path(__file__).resolve().parent / "data" / "stack-dev.json")
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
