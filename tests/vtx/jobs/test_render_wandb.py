"""`vtx render --format wandb-launch`."""

from __future__ import annotations

import yaml
from typer.testing import CliRunner

from jobs.custom_jobs.wandb_launch import IMAGE_MACRO
from tests.conftest import TEMPLATES, TEST_DATA
from vtx.cli import app


def test_vtx_render_prints_it_and_refuses_a_study() -> None:
    stack_file = str(TEST_DATA / "stack-dev.json")
    runner = CliRunner()
    args = ["render", "--stack-file", stack_file, "--format", "wandb-launch"]
    result = runner.invoke(app, [*args[:1], str(TEMPLATES / "smoke-cpu.yaml"), *args[1:]])
    assert result.exit_code == 0, result.output
    body = yaml.safe_load(result.output)  # the header is YAML comments
    assert body["spec"]["worker_pool_specs"][0]["container_spec"]["image_uri"] == IMAGE_MACRO
    assert body["run"]["restart_job_on_worker_restart"] is True
    study = runner.invoke(app, [*args[:1], str(TEMPLATES / "tiny-tune.yaml"), *args[1:]])
    assert study.exit_code != 0
    assert "a study has no W&B Launch form" in study.output
