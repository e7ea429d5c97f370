"""Cloud Logging reading, against a minimal in-test FastAPI server that answers `entries:list`
the way Cloud Logging does (time-ordered, `timestamp>=` filters, one entry per page with
nextPageToken) and records each request; the severities, filters and renderings of `vtx logs`
on entries as real runs print them, and the command itself on the local platform. The local
platform's log endpoint is exercised in test_submission.py too."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import requests

from jobs.local.custom_jobs.log_copier import SERVICE as LOCAL_SERVICE
from jobs.runs.logs import (
    SERVICE,
    HumanFormat,
    LocalLogSource,
    LogEntry,
    LogFilter,
    cloud_logging_filter,
    json_line,
    origin,
    severity_named,
    severity_of,
)
from tests.conftest import HANG_S


def test_filter_selects_the_runs_jobs() -> None:
    assert cloud_logging_filter(["11", "12"], "2026-11-22T08:00:00Z") == (
        'resource.type="ml_job" AND (resource.labels.job_id="11" OR resource.labels.job_id="12")'
        ' AND timestamp>="2026-11-22T08:00:00Z"'
    )


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
    subprocess.run([sys.executable, "-c", code], check=True, timeout=HANG_S)
