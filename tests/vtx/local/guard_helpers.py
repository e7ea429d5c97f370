"""What the progress-guard end-to-end tests share: the CLI in-process, a wait on an observable
state (its deadline only catches a hang), a run's record, and the trainer's own lines."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from typer.testing import CliRunner

from jobs.control.record import RunRecord
from jobs.control.records import Records
from jobs.core.stack import StackOutputs
from jobs.local.plumbing.client import read_logs
from tests.conftest import HANG_S
from vtx.cli import app

runner = CliRunner(env={"COLUMNS": "200"})


def vtx(*args: str) -> str:
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def until(what: str, found: Callable[[], Any]) -> Any:
    deadline = time.monotonic() + HANG_S  # only catches a hang
    while time.monotonic() < deadline:
        value = found()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"{what} never happened")


def record(stack: StackOutputs, run_id: str) -> RunRecord:
    stored = Records(stack).read(run_id)
    assert stored is not None
    return stored.record


def trainer_lines(stack: StackOutputs, run_id: str) -> list[dict[str, Any]]:
    """The run's trainer lines so far (its JSON log lines), each with the job id that wrote it
    under ``job``."""
    endpoint, token = stack.vertex_endpoint or "", stack.local_token or ""
    found, cursor = [], 0
    while True:
        page = read_logs(endpoint, token, run_id=run_id, cursor=cursor)
        for entry in page["entries"]:
            try:
                line = json.loads(entry["message"])
            except ValueError:
                continue
            if isinstance(line, dict) and "message" in line:
                found.append(line | {"job": job_id(str(entry["job"]))})
        if page["cursor"] == cursor or not page["entries"]:
            return found
        cursor = page["cursor"]


def job_id(name: str) -> str:
    """A CustomJob's id from its resource name (or the id itself)."""
    return name.rsplit("/", 1)[-1]
