"""A study through `vtx status|list|logs|cancel`."""

from __future__ import annotations

import io
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from typer.testing import CliRunner

from jobs.control.guards import StudyBudgetGuard
from jobs.core.catalog import load_catalog
from jobs.runs.logs import LocalLogSource, LogEntry
from jobs.tuning.study_records import StudyRecord
from jobs.vertex.rest import VertexRest
from tests.conftest import TEST_DATA, dev_stack
from tests.jobs.runs.run_records import preempted_once, rest_job, trainer
from tests.jobs.tuning.study_fakes import FAST, PARENT, T0, Scripted, rest_study, stamp
from vtx.cli import app
from vtx.commands import runs as run_commands
from vtx.flows import study_watch
from vtx.views.studies import study_json, trials_table

STACK_FILE = TEST_DATA / "stack-dev.json"


runner = CliRunner(env={"COLUMNS": "200"})


def _text(renderable: object) -> str:
    console = Console(width=200, record=True, file=io.StringIO())
    console.print(renderable)
    return console.export_text()


def test_the_trials_table_and_json_show_parameters_metric_and_the_best() -> None:
    study = StudyRecord.from_rest(rest_study())
    now = T0 + timedelta(seconds=130)
    text = _text(trials_table(study, now))
    assert "learning_rate=0.01, model.lora.r=8" in text
    assert "1.25 *" in text  # the best trial is marked
    assert "INFEASIBLE" in text
    doc = study_json(study, now)
    assert doc["best"]["id"] == "2" and doc["best"]["outputs"] == "gs://c/runs/tiny-tune-1/2/"
    assert [t["duration_s"] for t in doc["trials"]] == [60.0, 90.0, 30.0, 120.0]
    assert doc["metric"] == {"id": "eval_loss", "goal": "MINIMIZE"}


def cli_with(
    monkeypatch: pytest.MonkeyPatch, session: Scripted, entries: Sequence[LogEntry] = ()
) -> None:
    """The CLI on the dev stack, Vertex answered by ``session``, the trials' Cloud Logging
    entries ``entries`` (tests/vtx/runs/test_logs_command.py tests that source itself)."""

    def rest_client(stack_name: str | None, stack_file: Path | None) -> VertexRest:
        return VertexRest(dev_stack(), session=session, backoff=FAST)

    monkeypatch.setattr(run_commands, "rest_client", rest_client)
    monkeypatch.setattr(study_watch, "trial_entries", lambda vertex, study: list(entries))


def test_status_of_a_study_run_shows_its_trials_and_the_best(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    studies = {"hyperparameterTuningJobs": [rest_study()]}
    session = Scripted({("GET", "/hyperparameterTuningJobs"): [studies]})
    cli_with(monkeypatch, session)
    result = runner.invoke(app, ["status", "tiny-tune-1", "--stack-file", str(STACK_FILE)])
    assert result.exit_code == 0, result.output
    assert "study tiny-tune-1: JOB_STATE_RUNNING" in result.output
    assert "best trial: 2 with eval_loss = 1.25" in result.output
    assert "gs://c/runs/tiny-tune-1/2/" in result.output
    as_json = runner.invoke(
        app, ["status", "tiny-tune-1", "--stack-file", str(STACK_FILE), "--format", "json"]
    )
    assert json.loads(as_json.output)["best"]["parameters"] == {
        "learning_rate": 0.01,
        "model.lora.r": 8,
    }


def test_status_of_a_study_sums_what_its_trials_jobs_cost(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    studies = {"hyperparameterTuningJobs": [rest_study()]}
    hour = {"state": "JOB_STATE_SUCCEEDED", "started_s": 0, "ended_s": 3600}
    session = Scripted(
        {
            ("GET", "/hyperparameterTuningJobs"): [studies],
            ("GET", "/customJobs/101"): [rest_job("101", 0, **hour)],
            ("GET", "/customJobs/102"): [rest_job("102", 0, **hour)],
            ("GET", "/customJobs/103"): [rest_job("103", 0, state="JOB_STATE_FAILED")],
            ("GET", "/customJobs/104"): [rest_job("104", 0, state="JOB_STATE_QUEUED")],
        }
    )
    cli_with(monkeypatch, session)
    args = ["status", "tiny-tune-1", "--stack-file", str(STACK_FILE)]
    as_json = runner.invoke(app, [*args, "--format", "json"])
    cost = json.loads(as_json.output)["cost"]
    table = load_catalog().price_table("us-central1")
    assert table is not None
    per_h = 3 * (table.machines["n1-standard-4"].usd_per_h or 0)  # rest_job's three machines
    assert cost["usd"] == pytest.approx(2 * per_h, abs=1e-6)  # two ran an hour, two never ran
    assert cost["usd_unknown_because"] is None and len(cost["trials"]) == 4
    shown = runner.invoke(app, args)
    assert "so far over 4 trial job(s)" in shown.output


def _trial_job(number: int, **times: Any) -> dict:
    """A trial's CustomJob as the study names it (``customJobs/10<n>``): three n1-standard-4."""
    job = rest_job(f"10{number}", 0, run_id="tiny-tune-1", **times)
    job["name"] = f"{PARENT}/customJobs/10{number}"
    return job


def test_status_and_report_of_a_study_show_its_goodput_per_trial_and_summed(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    ended = rest_study(state="JOB_STATE_CANCELLED", endTime=stamp(130))
    cancelled = rest_job("104", 100, "JOB_STATE_CANCELLED", ended_s=130)
    session = Scripted(
        {
            ("GET", "/hyperparameterTuningJobs"): [{"hyperparameterTuningJobs": [ended]}],
            ("GET", "/customJobs/101"): [rest_job("101", 5, "JOB_STATE_SUCCEEDED", 10, 60)],
            ("GET", "/customJobs/102"): [rest_job("102", 0, "JOB_STATE_SUCCEEDED", 10, 100)],
            ("GET", "/customJobs/103"): [rest_job("103", 70, state="JOB_STATE_FAILED")],
            ("GET", "/customJobs/104"): [cancelled],
        }
    )
    lines = [
        trainer("101", 20, "training", step=0, total_steps=10),
        trainer("101", 40, "train", step=10, loss=2.0, tokens=500),
        trainer("101", 45, "done", step=10),
        *preempted_once("102"),
    ]
    cli_with(monkeypatch, session, lines)
    args = ["status", "tiny-tune-1", "--stack-file", str(STACK_FILE)]

    goodput = json.loads(runner.invoke(app, [*args, "--format", "json"]).output)["goodput"]
    assert [t["trial"] for t in goodput["trials"]] == ["1", "2", "3", "4"]
    assert [t["trial_state"] for t in goodput["trials"]][:3] == [
        "SUCCEEDED",
        "SUCCEEDED",
        "INFEASIBLE",
    ]
    one, two = goodput["trials"][:2]
    assert (one["productive_s"], two["productive_s"]) == (20, 21)
    assert goodput["productive_s"] == 41 and goodput["slots"] == 2
    assert (goodput["wall_s"], goodput["goodput"]) == (130, pytest.approx(41 / 260, abs=1e-6))
    assert goodput["paid_s"] == sum(t["paid_s"] for t in goodput["trials"])
    assert len(two["attempts"]) == 1 and len(two["attempts"][0]["preemptions"]) == 1
    for summed in goodput["categories"]:
        per_trial = [c for t in goodput["trials"] for c in t["categories"]]
        parts = [c["seconds"] for c in per_trial if c["category"] == summed["category"]]
        assert summed["seconds"] == pytest.approx(sum(parts), abs=1e-3)

    table = runner.invoke(app, [*args, "--timeline"]).output
    assert "goodput: " in table and "trial(s) at a time" in table
    rows = [line for line in table.splitlines() if line.startswith("t") and "|" in line]
    assert [row.split()[0] for row in rows] == ["trial", "t1", "t2", "t3", "t4"]
    assert "#" in rows[1] and "X" in rows[2]  # trial 2's preemption: recovery
    assert "legend: # productive steps" in table
    assert "legend:" not in runner.invoke(app, args).output  # the bars only with --timeline

    page = tmp_path / "study.html"
    report = ["report", "tiny-tune-1", "--stack-file", str(STACK_FILE), "--output", str(page)]
    assert runner.invoke(app, report).exit_code == 0
    html = page.read_text()
    assert html.count('class="lane"') == 4
    assert all(f'data-trial="{n}"' in html for n in "1234")
    assert html.count('class="preemption"') == 1 and "<script" not in html


def test_list_shows_studies_beside_jobs_and_their_trials_jobs_under_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    hour = {"state": "JOB_STATE_SUCCEEDED", "started_s": 0, "ended_s": 3600}
    # The local platform labels a trial's CustomJob with the study's labels: listed with it.
    trials = [_trial_job(1, **hour), _trial_job(2, **hour), _trial_job(3), _trial_job(4)]
    session = Scripted(
        {
            ("GET", "/customJobs"): [{"customJobs": trials}],
            ("GET", "/hyperparameterTuningJobs"): [{"hyperparameterTuningJobs": [rest_study()]}],
        }
    )
    cli_with(monkeypatch, session)
    result = runner.invoke(app, ["list", "--stack-file", str(STACK_FILE)])
    assert result.exit_code == 0, result.output
    assert "studies (hyperparameter tuning)" in result.output
    assert "eval_loss=1.25 (trial 2)" in result.output
    table = load_catalog().price_table("us-central1")
    assert table is not None
    usd = 2 * 3 * (table.machines["n1-standard-4"].usd_per_h or 0)  # two trials ran an hour
    assert "│ cost " in result.output or " cost " in result.output
    assert f"${usd:,.2f}" in result.output
    # Its trials' jobs were listed already: none is asked for again.
    assert not [url for _, url, _ in session.seen if "/customJobs/10" in url]
    as_json = runner.invoke(app, ["list", "--stack-file", str(STACK_FILE), "--format", "json"])
    entries = json.loads(as_json.output)
    assert entries == [
        {
            "run_id": "tiny-tune-1",
            "kind": "study",
            "job": f"{PARENT}/hyperparameterTuningJobs/77",
            "name": "tiny-tune-1",
            "state": "JOB_STATE_RUNNING",
            "trials": 4,
            "succeeded": 2,
            "best_metric": 1.25,
            "created": stamp(0),
            "usd": pytest.approx(usd, abs=1e-6),
            "usd_unknown_because": None,
            "budget_usd": None,
        }
    ]


def test_a_studys_cost_in_the_list_is_unknown_with_the_reason(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    odd = _trial_job(1, state="JOB_STATE_SUCCEEDED", started_s=0, ended_s=60)
    odd["jobSpec"]["workerPoolSpecs"][0]["machineSpec"]["machineType"] = "n9-imaginary-4"
    trials = [odd, _trial_job(2), _trial_job(3), _trial_job(4)]
    session = Scripted(
        {
            ("GET", "/customJobs"): [{"customJobs": trials}],
            ("GET", "/hyperparameterTuningJobs"): [{"hyperparameterTuningJobs": [rest_study()]}],
        }
    )
    cli_with(monkeypatch, session)
    result = runner.invoke(app, ["list", "--stack-file", str(STACK_FILE)])
    assert result.exit_code == 0, result.output
    assert "unknown (trial job 101: no on-demand price for n9-imaginary-4" in " ".join(
        result.output.replace("│", " ").split()
    )


BUDGETED = {"vtx-run-id": "tiny-tune-1", "vtx-budget-usd": "0_5"}


def test_the_study_follower_cancels_a_study_whose_meter_crosses_its_budget() -> None:
    hour = {"state": "JOB_STATE_SUCCEEDED", "started_s": 0, "ended_s": 3600}
    answers: dict[tuple[str, str], list[dict]] = {
        ("GET", f"/customJobs/10{n}"): [_trial_job(n, **hour)] for n in (1, 2)
    }
    answers.update(
        {
            ("GET", "/customJobs/103"): [_trial_job(3)],
            ("GET", "/customJobs/104"): [_trial_job(4)],
            ("POST", "/hyperparameterTuningJobs/77:cancel"): [{}],
        }
    )
    session = Scripted(answers)
    vertex = VertexRest(dev_stack(), session=session, backoff=FAST)
    guard = StudyBudgetGuard(vertex)
    assert (
        guard.check(StudyRecord.from_rest(rest_study(labels={"vtx-run-id": "tiny-tune-1"}))) is None
    )
    assert guard.cancelled is None  # no budget: nothing to hold it to
    why = guard.check(StudyRecord.from_rest(rest_study(labels=BUDGETED)))
    assert guard.cancelled is not None and why == guard.cancelled
    assert guard.cancelled.startswith("the study's cost so far $")
    assert "crossed budget.max_cost_usd $0.50" in guard.cancelled
    assert session.seen[-1][:2] == (
        "POST",
        f"https://us-central1-aiplatform.googleapis.com/v1/{PARENT}/hyperparameterTuningJobs/77:cancel",
    )
    assert guard.check(StudyRecord.from_rest(rest_study(labels=BUDGETED))) is None  # once only
    assert [m for m, *_ in session.seen].count("POST") == 1


def test_status_of_a_study_stopped_by_its_budget_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    stopped = rest_study(labels=BUDGETED, state="JOB_STATE_CANCELLED")
    hour = {"state": "JOB_STATE_SUCCEEDED", "started_s": 0, "ended_s": 3600}
    answers: dict[tuple[str, str], list[dict]] = {
        ("GET", "/hyperparameterTuningJobs"): [{"hyperparameterTuningJobs": [stopped]}],
        **{("GET", f"/customJobs/10{n}"): [_trial_job(n, **hour)] for n in (1, 2, 3, 4)},
    }
    cli_with(monkeypatch, Scripted(answers))
    args = ["status", "tiny-tune-1", "--stack-file", str(STACK_FILE)]
    shown = " ".join(runner.invoke(app, args).output.split())
    assert "budget: budget.max_cost_usd $0.50 (every trial's job)" in shown
    assert "stopped: by its budget: the study's cost so far $" in shown
    cost = json.loads(runner.invoke(app, [*args, "--format", "json"]).output)["cost"]
    assert cost["budget_usd"] == 0.5
    assert "crossed budget.max_cost_usd $0.50" in cost["stopped_by_budget"]


def test_cancel_of_a_study_run_cancels_the_study(monkeypatch: pytest.MonkeyPatch) -> None:
    session = Scripted(
        {
            ("GET", "/hyperparameterTuningJobs"): [{"hyperparameterTuningJobs": [rest_study()]}],
            ("POST", "/hyperparameterTuningJobs/77:cancel"): [{}],
        }
    )
    cli_with(monkeypatch, session)
    result = runner.invoke(app, ["cancel", "tiny-tune-1", "--stack-file", str(STACK_FILE)])
    assert result.exit_code == 0, result.output
    assert "cancel requested for study" in result.output
    assert session.seen[-1][0] == "POST"
    assert session.seen[-1][1].endswith("/hyperparameterTuningJobs/77:cancel")


def test_a_run_that_is_no_study_goes_on_to_its_jobs() -> None:
    session = Scripted({("GET", "/hyperparameterTuningJobs"): [{}]})
    vertex = VertexRest(dev_stack(), session=session, backoff=FAST)
    assert study_watch.find_study(vertex, "plain-run") is None
    assert study_watch.find_study(vertex, "12345") is None
    assert study_watch.find_study(vertex, f"{PARENT}/customJobs/1") is None


@dataclass
class FakeLogs:
    entries: list[LogEntry]

    def fetch(self, cursor: Any) -> tuple[list[LogEntry], Any]:
        start = cursor or 0
        return self.entries[start:], len(self.entries)


def entry(job: str, at_s: float, message: str) -> LogEntry:
    return LogEntry(stamp(at_s), job, "workerpool0-0", 1, message)


def test_a_studys_logs_are_its_trials_jobs_merged_by_time() -> None:
    merged = study_watch.TrialsLogSource(
        lambda: ["a", "b"],
        {
            "a": FakeLogs([entry("a", 1, "a1"), entry("a", 3, "a3")]),
            "b": FakeLogs([entry("b", 2, "b2")]),
        }.__getitem__,
    )
    first, cursor = merged.fetch(None)
    assert [e.message for e in first] == ["a1", "b2", "a3"]
    assert merged.fetch(cursor)[0] == []


def test_the_local_source_reads_each_trials_job_as_the_study_grows() -> None:
    local = dev_stack(vertex_endpoint="http://127.0.0.1:1")
    early = rest_study()
    early["trials"] = early["trials"][:1]
    session = Scripted({("GET", "/hyperparameterTuningJobs/77"): [early, rest_study()]})
    vertex = VertexRest(local, session=session, backoff=FAST)
    source = study_watch.log_source(vertex, StudyRecord.from_rest(early), "DEFAULT")
    assert isinstance(source, study_watch.TrialsLogSource)
    assert source.jobs() == [f"{PARENT}/customJobs/101"]
    assert source.jobs() == [f"{PARENT}/customJobs/10{i}" for i in "1234"]
    assert isinstance(source.source(f"{PARENT}/customJobs/101"), LocalLogSource)
