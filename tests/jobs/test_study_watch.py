"""A submitted study, without a server: REST JSON read into a StudyRecord (trials, the best one by
the metric's goal), the trials table and JSON, VertexRest's study calls over a scripted session,
`vtx status|list|cancel` handing a study run to its views, the trials' logs as one source, and
`Vertex.submit_study` creating a study once (a 503 that landed is not sent again)."""

from __future__ import annotations

import io
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import requests
from rich.console import Console
from typer.testing import CliRunner

from jobs.core.stack import StackOutputs
from jobs.runs.logs import LocalLogSource, LogEntry
from jobs.spec.gcloud import load_template
from jobs.tuning.study_job import compile_study, plan_study
from jobs.tuning.study_records import StudyRecord
from jobs.vertex.client import Backoff, Vertex, VertexError, VertexRest
from tests.conftest import dev_stack
from vtx.cli import app
from vtx.commands import runs as run_commands
from vtx.views import study_watch
from vtx.views.studies import study_json, trials_table

HERE = Path(__file__).resolve().parent
STACK_FILE = HERE / "data" / "stack-dev.json"
TINY_TUNE = HERE.parents[1] / "jobs" / "templates" / "tiny-tune.yaml"
PARENT = "projects/vtx-dev-123/locations/us-central1"
T0 = datetime(2026, 11, 23, 10, 0, tzinfo=UTC)
FAST = Backoff(initial_s=0.0, maximum_s=0.0, multiplier=1.0, deadline_s=5.0)
runner = CliRunner(env={"COLUMNS": "200"})


def stamp(seconds: float) -> str:
    return (T0 + timedelta(seconds=seconds)).isoformat().replace("+00:00", "Z")


def trial(
    trial_id: str, state: str, lr: float, r: int, loss: float | None, ended_s: float | None
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": trial_id,
        "state": state,
        "parameters": [
            {"parameterId": "learning_rate", "value": lr},
            {"parameterId": "model.lora.r", "value": r},
        ],
        "startTime": stamp(10),
        "customJob": f"{PARENT}/customJobs/10{trial_id}",
    }
    if loss is not None:
        out["finalMeasurement"] = {
            "stepCount": "20",
            "metrics": [{"metricId": "eval_loss", "value": loss}],
        }
    if ended_s is not None:
        out["endTime"] = stamp(ended_s)
    return out


def rest_study(goal: str = "MINIMIZE", run_id: str = "tiny-tune-1", **changes: Any) -> dict:
    study: dict[str, Any] = {
        "name": f"{PARENT}/hyperparameterTuningJobs/77",
        "displayName": run_id,
        "state": "JOB_STATE_RUNNING",
        "labels": {"vtx-run-id": run_id},
        "createTime": stamp(0),
        "studySpec": {
            "metrics": [{"metricId": "eval_loss", "goal": goal}],
            "parameters": [{"parameterId": "learning_rate"}, {"parameterId": "model.lora.r"}],
        },
        "maxTrialCount": 4,
        "parallelTrialCount": 2,
        "trialJobSpec": {"baseOutputDirectory": {"outputUriPrefix": f"gs://c/runs/{run_id}/"}},
        "trials": [
            trial("1", "SUCCEEDED", 0.001, 4, 2.5, 70),
            trial("2", "SUCCEEDED", 0.01, 8, 1.25, 100),
            trial("3", "INFEASIBLE", 0.03, 8, None, 40),
            trial("4", "ACTIVE", 0.0003, 4, None, None),
        ],
    }
    return {**study, **changes}


def _text(renderable: object) -> str:
    console = Console(width=200, record=True, file=io.StringIO())
    console.print(renderable)
    return console.export_text()


def test_the_best_trial_is_the_succeeded_one_best_by_the_goal() -> None:
    low = StudyRecord.from_rest(rest_study("MINIMIZE"))
    high = StudyRecord.from_rest(rest_study("MAXIMIZE"))
    assert low.best is not None and low.best.id == "2"
    assert high.best is not None and high.best.id == "1"
    assert low.trial_output(low.best) == "gs://c/runs/tiny-tune-1/2/"
    assert low.trials[0].parameters == {"learning_rate": 0.001, "model.lora.r": 4}
    assert (low.trials[0].metric, low.trials[0].step) == (2.5, 20)
    assert low.run_id == "tiny-tune-1" and not low.terminal


def test_no_best_trial_before_one_succeeds_with_the_metric() -> None:
    study = rest_study()
    study["trials"] = [trial("1", "ACTIVE", 0.01, 4, None, None)]
    assert StudyRecord.from_rest(study).best is None


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


@dataclass
class Scripted:
    """Answers each request by (method, path suffix) and records what was asked."""

    answers: dict[tuple[str, str], list[dict]]
    seen: list[tuple[str, str, dict]] = field(default_factory=list)

    def request(self, method: str, url: str, timeout: float, **kwargs: Any) -> requests.Response:
        self.seen.append((method, url, kwargs.get("params") or {}))
        body: dict = {}
        for (m, suffix), bodies in self.answers.items():
            if m == method and url.endswith(suffix) and bodies:
                body = bodies.pop(0) if len(bodies) > 1 else bodies[0]
                break
        response = requests.Response()
        response.status_code = 200
        response._content = json.dumps(body).encode()
        return response


def test_list_studies_pages_and_keeps_only_vtx_runs_newest_first() -> None:
    other = rest_study(run_id="x")
    del other["labels"]
    newer = rest_study(run_id="newer", createTime=stamp(500))
    session = Scripted(
        {
            ("GET", "/hyperparameterTuningJobs"): [
                {"hyperparameterTuningJobs": [rest_study(), other], "nextPageToken": "t"},
                {"hyperparameterTuningJobs": [newer]},
            ]
        }
    )
    found = VertexRest(dev_stack(), session=session, backoff=FAST).list_studies()
    assert [s["displayName"] for s in found] == ["newer", "tiny-tune-1"]
    assert session.seen[1][2]["pageToken"] == "t"
    assert session.seen[0][2]["filter"] == "labels.vtx-run-id:*"


def cli_with(monkeypatch: pytest.MonkeyPatch, session: Scripted) -> None:
    def rest_client(stack_name: str | None, stack_file: Path | None) -> VertexRest:
        return VertexRest(dev_stack(), session=session, backoff=FAST)

    monkeypatch.setattr(run_commands, "rest_client", rest_client)


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


def test_list_shows_studies_beside_jobs_and_their_trials_jobs_under_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    trial_job = {  # the local platform labels a trial's CustomJob with the study's labels
        "name": f"{PARENT}/customJobs/101",
        "displayName": "trial",
        "state": "JOB_STATE_SUCCEEDED",
        "labels": {"vtx-run-id": "tiny-tune-1"},
        "jobSpec": {"workerPoolSpecs": [{"machineSpec": {"machineType": "n1-standard-4"}}]},
    }
    session = Scripted(
        {
            ("GET", "/customJobs"): [{"customJobs": [trial_job]}],
            ("GET", "/hyperparameterTuningJobs"): [{"hyperparameterTuningJobs": [rest_study()]}],
        }
    )
    cli_with(monkeypatch, session)
    result = runner.invoke(app, ["list", "--stack-file", str(STACK_FILE)])
    assert result.exit_code == 0, result.output
    assert "studies (hyperparameter tuning)" in result.output
    assert "eval_loss=1.25 (trial 2)" in result.output
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
        }
    ]


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


# ---- submitting -----------------------------------------------------------------------------


@dataclass
class FakeJobService:
    """The JobServiceClient methods submit_study calls; ``fail_first`` answers the first create
    with a 503 after storing the study (a request that landed)."""

    studies: list[Any] = field(default_factory=list)
    creates: int = 0
    fail_first: bool = False
    parents: list[str] = field(default_factory=list)

    def list_custom_jobs(self, request: Any, retry: Any = None) -> list:
        return []

    def list_hyperparameter_tuning_jobs(self, request: Any, retry: Any = None) -> list:
        return list(self.studies)

    def create_hyperparameter_tuning_job(
        self, parent: str, hyperparameter_tuning_job: Any, retry: Any = None
    ) -> Any:
        from google.api_core import exceptions

        self.creates += 1
        self.parents.append(parent)
        self.studies.append(hyperparameter_tuning_job)
        if self.fail_first and self.creates == 1:
            raise exceptions.ServiceUnavailable("busy")
        return hyperparameter_tuning_job


def study_plan(on: StackOutputs | None = None, **template: Any) -> Any:
    loaded = load_template(TINY_TUNE).model_copy(update=template)
    return plan_study(compile_study(loaded, on or dev_stack(), "tiny-tune-1"))


def submit(vertex: Vertex, plan: Any) -> Any:
    return vertex.submit_study(plan.study.to_proto(), plan.quota, plan.study.stack.region)


def test_submit_study_creates_the_planned_study_once() -> None:
    service = FakeJobService()
    created = submit(Vertex(dev_stack(), client=service, backoff=FAST), study_plan())  # type: ignore[arg-type]
    assert service.creates == 1
    assert created.labels["vtx-run-id"] == "tiny-tune-1"
    assert created.max_trial_count == 4


def test_a_503_on_create_that_landed_is_not_sent_again() -> None:
    service = FakeJobService(fail_first=True)
    created = submit(Vertex(dev_stack(), client=service, backoff=FAST), study_plan())  # type: ignore[arg-type]
    assert service.creates == 1
    assert created.display_name == "tiny-tune-1"


def test_a_run_id_that_already_has_a_study_is_refused() -> None:
    plan = study_plan()
    service = FakeJobService(studies=[plan.study.to_proto()])
    with pytest.raises(VertexError, match="already exists"):
        submit(Vertex(dev_stack(), client=service, backoff=FAST), plan)  # type: ignore[arg-type]
    assert service.creates == 0


def test_a_study_in_a_further_region_is_created_there() -> None:
    attachment = "projects/vtx-dev-123/regions/europe-west4/networkAttachments/vtx-training"
    regional = dev_stack(regions={"europe-west4": {"network_attachment": attachment}})
    service = FakeJobService()
    plan = study_plan(regional, region="europe-west4")
    submit(Vertex(regional, client=service, backoff=FAST), plan)  # type: ignore[arg-type]
    assert service.parents == ["projects/vtx-dev-123/locations/europe-west4"]
