"""A study end to end on the local platform (`local_platform` fixture: the control plane and GCS
emulator on 127.0.0.1), driven through the `vtx` CLI: `vtx launch jobs/templates/tiny-tune.yaml
--stack local -y` submits the HyperparameterTuningJob, its trials run the real trainer on the
tiny model, and `vtx status` shows the trials and the best one."""

from __future__ import annotations

import json
import time

import pytest
from typer.testing import CliRunner

from jobs.core.stack import StackOutputs
from jobs.tuning.study_records import StudyRecord
from jobs.vertex.rest import VertexRest
from tests.conftest import TEMPLATES
from vtx.cli import app

pytestmark = pytest.mark.slow
runner = CliRunner(env={"COLUMNS": "200"})
TINY_TUNE = TEMPLATES / "tiny-tune.yaml"
RUN_ID = "tiny-tune-e2e"


def wait_study(stack: StackOutputs, run_id: str) -> StudyRecord:
    # A safety net for a hung study, not a timing assertion.
    vertex = VertexRest(stack)
    deadline = time.monotonic() + 540
    while time.monotonic() < deadline:
        found = vertex.list_studies(run_id)
        if found and (study := StudyRecord.from_rest(found[0])).terminal:
            return study
        time.sleep(1.0)
    raise AssertionError(f"study {run_id} did not end")


@pytest.mark.slow(cost_s=30)
def test_launch_a_study_locally_then_status_shows_its_trials_and_the_best(
    local_platform: StackOutputs,
) -> None:
    launched = runner.invoke(
        app,
        [
            *("launch", str(TINY_TUNE), "--stack", "local", "-y"),
            *("--run-id", RUN_ID, "--follow", "--poll-s", "0.5"),
        ],
    )
    assert launched.exit_code == 0, launched.output
    assert "study parameters" in launched.output  # the plan
    assert "/hyperparameterTuningJobs/" in launched.output
    assert "step" in launched.output  # the trials' lines
    assert "best trial:" in launched.output  # --follow ends with the trials and the best

    study = wait_study(local_platform, RUN_ID)
    assert study.state == "JOB_STATE_SUCCEEDED", study.error
    assert len(study.trials) == 4
    assert {t.state for t in study.trials} == {"SUCCEEDED"}

    shown = runner.invoke(app, ["status", RUN_ID, "--stack", "local"])
    assert shown.exit_code == 0, shown.output
    assert "study tiny-tune-e2e: JOB_STATE_SUCCEEDED" in shown.output
    assert "learning_rate=" in shown.output and "model.lora.r=" in shown.output
    best = study.best
    assert best is not None
    assert f"best trial: {best.id} with eval_loss" in shown.output

    doc = json.loads(
        runner.invoke(app, ["status", RUN_ID, "--stack", "local", "--format", "json"]).output
    )
    assert doc["best"]["id"] == best.id
    assert min(t["metric"] for t in doc["trials"]) == doc["best"]["metric"]
    assert {t["outputs"] for t in doc["trials"]} == {
        f"gs://{local_platform.buckets.checkpoints}/runs/{RUN_ID}/{t.id}/" for t in study.trials
    }
    assert {t["parameters"]["model.lora.r"] for t in doc["trials"]} <= {4, 8}

    logs = runner.invoke(app, ["logs", RUN_ID, "--stack", "local", "--format", "json"])
    assert logs.exit_code == 0, logs.output
    jobs = {json.loads(line)["job"] for line in logs.output.splitlines() if line.startswith("{")}
    assert jobs == {t.custom_job for t in study.trials}

    listed = runner.invoke(app, ["list", "--stack", "local", "--format", "json"])
    studies = [e for e in json.loads(listed.output) if e.get("kind") == "study"]
    # The session's platform may hold other modules' studies (xdist runs modules in any order).
    assert [(e["run_id"], e["succeeded"]) for e in studies if e["run_id"] == RUN_ID] == [
        (RUN_ID, 4)
    ]
