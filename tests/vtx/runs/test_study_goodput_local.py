"""A study's goodput end to end on the local platform (`local_platform` fixture): three trials of
the tiny LoRA trainer, two at a time, launched and read back through the `vtx` CLI. Each trial's
phases tile its own CustomJob's wall time as the platform recorded it, the study's figures are
the trials' sums, and the HTML report has one lane per trial."""

from __future__ import annotations

import json
from datetime import datetime
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from jobs.core.stack import StackOutputs
from jobs.vertex.rest import VertexRest
from tests.conftest import TEMPLATES
from tests.vtx.runs.test_study_local import wait_study
from vtx.cli import app

pytestmark = pytest.mark.slow
runner = CliRunner(env={"COLUMNS": "200"})
RUN_ID = "tiny-tune-goodput"
TRIALS = 3


def vtx(*args: str) -> str:
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def seconds(start: str, end: str) -> float:
    return (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds()


def tiny_study(tmp_path: Path) -> Path:
    """jobs/templates/tiny-tune.yaml cut to three trials of a few steps each."""
    template = yaml.safe_load((TEMPLATES / "tiny-tune.yaml").read_text())
    template["args"] += ["--set", "max_steps=6", "--set", "eval_steps=3",
                         "--set", "logging_steps=1"]  # fmt: skip
    template["study"].update(max_trials=TRIALS, parallel_trials=2, max_failed_trials=0)
    path = tmp_path / "tiny-tune-goodput.yaml"
    path.write_text(yaml.safe_dump(template))
    return path


def category(figures: list[dict[str, Any]], key: str) -> dict[str, Any]:
    return next(c for c in figures if c["category"] == key)


@pytest.mark.slow(cost_s=20)
def test_a_studys_goodput_is_each_trials_timeline_and_their_sums(
    local_platform: StackOutputs, tmp_path: Path
) -> None:
    vtx("launch", str(tiny_study(tmp_path)), "--stack", "local", "-y", "--run-id", RUN_ID)
    study = wait_study(local_platform, RUN_ID)
    assert study.state == "JOB_STATE_SUCCEEDED", study.error

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
        assert trial["unique_steps"] == 6 and trial["steps_lost"] == 0
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
    assert [row.split()[0] for row in rows] == ["trial", "t1", "t2", "t3"]
    assert all(row.split("|")[1].strip() for row in rows[1:]), table  # each trial's bar

    page = tmp_path / "study.html"
    assert "wrote" in vtx("report", RUN_ID, "--stack", "local", "--output", str(page))
    html = page.read_text()
    assert html.count('class="lane"') == TRIALS
    assert all(f'data-trial="{n}"' in html for n in range(1, TRIALS + 1))
