"""A study through `vtx render|cost`: the plan and the documents the CLI prints."""

from __future__ import annotations

import io
import json

from rich.console import Console
from typer.testing import CliRunner

from jobs.custom_jobs.facts import template_facts
from jobs.pricing.estimates import StudyCost, estimate
from tests.conftest import TEST_DATA
from tests.jobs.custom_jobs.update_snapshots import RUN_ID, read_snapshot
from tests.jobs.tuning.study_templates import SNAPSHOT, TINY_TUNE, rich_template
from vtx.cli import app
from vtx.views.studies import print_study_plan


def test_the_study_plan_shows_parallel_rounds_wall_time_and_unknown_prices() -> None:
    template = rich_template()
    assert template.study is not None
    out = Console(width=200, record=True, file=io.StringIO())
    priced = estimate(template_facts(template), "us-central1")
    print_study_plan(out, template.study, StudyCost(priced, 8, 3), trial_hours=0.5)
    text = out.export_text()
    assert "8, 3 at a time (3 rounds)" in text
    assert "30m 00s a trial -> about 1h 30m wall time" in text
    assert "model.lora.r in {16}" in text  # the conditional parameter
    unknown = Console(width=200, record=True, file=io.StringIO())
    unpriced = estimate(template_facts(template), "nowhere-1")
    print_study_plan(unknown, template.study, StudyCost(unpriced, 8, 3), trial_hours=0.5)
    assert "unknown for the study" in unknown.export_text()


def test_vtx_render_and_cost_of_a_study_template() -> None:
    runner = CliRunner(env={"COLUMNS": "200"})
    stack_file = str(TEST_DATA / "stack-dev.json")
    args = ["render", str(TINY_TUNE), "--stack-file", stack_file, "--run-id", RUN_ID]
    rendered = runner.invoke(app, [*args, "--format", "json"])
    assert rendered.exit_code == 0, rendered.output
    assert json.loads(rendered.output) == read_snapshot(SNAPSHOT)
    priced = runner.invoke(app, ["cost", str(TINY_TUNE)])
    assert priced.exit_code == 0, priced.output
    study = "study: $0.44/h excl. boot disks while 2 run; every trial at its cap: $0.44"
    assert study in priced.output
