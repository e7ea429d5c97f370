"""A study end to end on the local platform (`local_platform` fixture: the control plane and GCS
emulator on 127.0.0.1), driven through the `vtx` CLI: `vtx launch jobs/templates/tiny-tune.yaml
--stack local -y --follow` submits the HyperparameterTuningJob, its trials run the real trainer
on the tiny model, two at a time, and `vtx status` shows the trials and the best one, and the
study's goodput: each trial's phases tile its own CustomJob's wall time as the platform recorded
it, the study's figures are the trials' sums, and the HTML report has one lane per trial.

Both tests read the one study this module launches (the launch is the costly part: a trainer
process per trial). The shipped template is cut, through `--set` as a user would, to three
trials of six steps: what is asserted does not depend on how long a trial trains."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from jobs.core.stack import StackOutputs
from jobs.tuning.study_records import StudyRecord
from jobs.vertex.rest import VertexRest
from tests.conftest import TEMPLATES
from tests.jobs.local.local_helpers import wait_for
from vtx.cli import app

pytestmark = pytest.mark.slow
runner = CliRunner(env={"COLUMNS": "200"})
TINY_TUNE = TEMPLATES / "tiny-tune.yaml"
RUN_ID = "tiny-tune-e2e"
TRIALS = 3
STEPS = 6
CUT = [  # tiny-tune.yaml's args 5 and 7 are the trainer's max_steps=20 and eval_steps=10
    *("--set", f"args.5=max_steps={STEPS}", "--set", "args.7=eval_steps=3"),
    *("--set", f"study.max_trials={TRIALS}"),
]


@dataclass(frozen=True)
class Launched:
    output: str
    study: StudyRecord


def wait_study(stack: StackOutputs, run_id: str) -> StudyRecord:
    vertex = VertexRest(stack)

    def ended() -> StudyRecord | None:
        found = vertex.list_studies(run_id)
        study = StudyRecord.from_rest(found[0]) if found else None
        return study if study is not None and study.terminal else None

    return wait_for(ended)


def vtx(*args: str) -> str:
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.output


@pytest.fixture(scope="module")
def launched(local_platform: StackOutputs) -> Launched:
    result = runner.invoke(
        app,
        [
            *("launch", str(TINY_TUNE), *CUT, "--stack", "local", "-y"),
            *("--run-id", RUN_ID, "--follow", "--poll-s", "0.5"),
        ],
    )
    assert result.exit_code == 0, result.output
    return Launched(result.output, wait_study(local_platform, RUN_ID))


@pytest.mark.slow(cost_s=30)
def test_launch_a_study_locally_then_status_shows_its_trials_and_the_best(
    local_platform: StackOutputs, launched: Launched
) -> None:
    assert "study parameters" in launched.output  # the plan
    assert "/hyperparameterTuningJobs/" in launched.output
    assert "step" in launched.output  # the trials' lines
    assert "best trial:" in launched.output  # --follow ends with the trials and the best

    study = launched.study
    assert study.state == "JOB_STATE_SUCCEEDED", study.error
    assert len(study.trials) == TRIALS
    assert {t.state for t in study.trials} == {"SUCCEEDED"}

    shown = vtx("status", RUN_ID, "--stack", "local")
    assert f"study {RUN_ID}: JOB_STATE_SUCCEEDED" in shown
    assert "learning_rate=" in shown and "model.lora.r=" in shown
    best = study.best
    assert best is not None
    assert f"best trial: {best.id} with eval_loss" in shown

    doc = json.loads(vtx("status", RUN_ID, "--stack", "local", "--format", "json"))
    assert doc["best"]["id"] == best.id
    assert min(t["metric"] for t in doc["trials"]) == doc["best"]["metric"]
    assert {t["outputs"] for t in doc["trials"]} == {
        f"gs://{local_platform.buckets.checkpoints}/runs/{RUN_ID}/{t.id}/" for t in study.trials
    }
    assert {t["parameters"]["model.lora.r"] for t in doc["trials"]} <= {4, 8}

    logs = vtx("logs", RUN_ID, "--stack", "local", "--format", "json")
    jobs = {json.loads(line)["job"] for line in logs.splitlines() if line.startswith("{")}
    assert jobs == {t.custom_job for t in study.trials}

    listed = vtx("list", "--stack", "local", "--format", "json")
    studies = [e for e in json.loads(listed) if e.get("kind") == "study"]
    # The session's platform may hold other modules' studies (xdist runs modules in any order).
    assert [(e["run_id"], e["succeeded"]) for e in studies if e["run_id"] == RUN_ID] == [
        (RUN_ID, TRIALS)
    ]


def seconds(start: str, end: str) -> float:
    return (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds()


def category(figures: list[dict[str, Any]], key: str) -> dict[str, Any]:
    return next(c for c in figures if c["category"] == key)


@pytest.mark.slow(cost_s=30)
def test_a_studys_goodput_is_each_trials_timeline_and_their_sums(
    local_platform: StackOutputs, launched: Launched, tmp_path: Path
) -> None:
    assert launched.study.state == "JOB_STATE_SUCCEEDED", launched.study.error

    goodput = json.loads(vtx("status", RUN_ID, "--stack", "local", "--format", "json"))["goodput"]
    trials = goodput["trials"]
    assert [t["trial"] for t in trials] == [str(n) for n in range(1, TRIALS + 1)]
    rest = VertexRest(local_platform)
    for trial in trials:
        (attempt,) = trial["attempts"]  # a trial is one CustomJob
        phases = attempt["phases"]
        assert phases[0]["start"] == trial["submitted"] and phases[-1]["end"] == trial["ended"]
        for before, after in pairwise(phases):
            assert before["end"] == after["start"]
        assert abs(sum(p["seconds"] for p in phases) - trial["wall_s"]) < 1e-2
        # Against the platform's own record of the trial's job.
        job = rest.get(trial["custom_job"])
        assert job.create_time and job.start_time and job.end_time
        assert abs(trial["wall_s"] - (job.end_time - job.create_time).total_seconds()) < 1e-2
        assert abs(trial["paid_s"] - (job.end_time - job.start_time).total_seconds()) < 1e-2
        assert trial["unique_steps"] == STEPS and trial["steps_lost"] == 0
        assert category(trial["categories"], "productive")["seconds"] > 0
        assert trial["tokens"] > 0

    for key in ("productive_s", "paid_s", "steps_trained", "tokens"):
        assert goodput[key] == pytest.approx(sum(t[key] for t in trials), abs=1e-2), key
    assert goodput["trial_s"] == pytest.approx(sum(t["wall_s"] for t in trials), abs=1e-2)
    for summed in goodput["categories"]:
        parts = [category(t["categories"], summed["category"]) for t in trials]
        assert summed["seconds"] == pytest.approx(sum(p["seconds"] for p in parts), abs=1e-2)
        if summed["usd"] is not None:
            assert summed["usd"] == pytest.approx(sum(p["usd"] for p in parts), abs=1e-5)
    assert goodput["usd"] == pytest.approx(sum(t["usd"] for t in trials), abs=1e-5)
    assert goodput["slots"] == 2
    wall = seconds(goodput["created"], goodput["ended"])
    assert goodput["wall_s"] == pytest.approx(wall, abs=1e-2)
    assert goodput["goodput"] == pytest.approx(
        goodput["productive_s"] / (2 * goodput["wall_s"]), abs=1e-4
    )
    assert goodput["paid_goodput"] == pytest.approx(
        goodput["productive_s"] / goodput["paid_s"], abs=1e-4
    )
    for trial in trials:  # every trial ran inside the study's life
        assert goodput["created"] <= trial["submitted"] and trial["ended"] <= goodput["ended"]

    table = vtx("status", RUN_ID, "--stack", "local", "--timeline")
    assert "goodput: " in table and "2 trial(s) at a time" in table
    rows = [line for line in table.splitlines() if line.startswith("t") and "|" in line]
    assert [row.split()[0] for row in rows] == ["trial", *(f"t{n}" for n in range(1, TRIALS + 1))]
    assert all(row.split("|")[1].strip() for row in rows[1:]), table  # each trial's bar

    page = tmp_path / "study.html"
    assert "wrote" in vtx("report", RUN_ID, "--stack", "local", "--output", str(page))
    html = page.read_text()
    assert html.count('class="lane"') == TRIALS
    assert all(f'data-trial="{n}"' in html for n in range(1, TRIALS + 1))
