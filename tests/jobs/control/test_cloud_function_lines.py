"""The controller function's structured lines, which the stack's alerts count (log-based
metrics on ``jsonPayload``): one per guard breach with its fields, then one per pass."""

from __future__ import annotations

import json

import pytest

from jobs.control import cloud_function
from jobs.control.driver import Driver, GuardBreach, PassReport
from jobs.core.stack import load_stack_file
from tests.conftest import TEST_DATA

STACK = load_stack_file(TEST_DATA / "stack-dev.json").model_dump_json()
BREACH = GuardBreach("r1", "next_rung", "projects/p/locations/l/customJobs/7", "stalled", "nlp")


def lines(out: str) -> list[dict]:
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def test_a_pass_writes_a_line_per_breach_then_its_own(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    report = PassReport(runs=3, breaches=[BREACH], errors=["r2: unreadable"])
    monkeypatch.setattr(Driver, "run_pass", lambda self: report)
    monkeypatch.setenv(cloud_function.STACK_ENV, STACK)
    _, status, _ = cloud_function.controller_pass()
    assert status == 200
    breach, done = lines(capsys.readouterr().out)
    assert breach == {
        "severity": "WARNING",
        "message": "run r1: progress guard breached (next_rung): stalled",
        "vtx_event": "guard_breach",
        "run_id": "r1",
        "action": "next_rung",
        "job": BREACH.job,
        "reason": "stalled",
        "team": "nlp",
    }
    assert done == {
        "severity": "INFO",
        "message": "pass over 3 live run(s)",
        "vtx_event": "controller_pass",
        "runs": 3,
        "breaches": 1,
        "errors": 1,
    }


def test_a_failed_pass_writes_no_pass_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """A pass that fails is no pass: the stack's 'controller stopped' alert must see it so."""

    def failing(self: Driver) -> PassReport:
        raise OSError("bucket unreachable")

    monkeypatch.setattr(Driver, "run_pass", failing)
    monkeypatch.setenv(cloud_function.STACK_ENV, STACK)
    _, status, _ = cloud_function.controller_pass()
    assert status == 500
    assert lines(capsys.readouterr().out) == []
