"""`vtx cost --run-time`: the trainer's estimate as the CLI prints it."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.conftest import TEMPLATES
from tests.jobs.core.price_tables import US_CENTRAL1_TABLE, write_table
from tests.jobs.custom_jobs.estimate_args import ON_L4, TINY
from vtx.cli import app


@pytest.mark.slow(cost_s=25)
def test_vtx_cost_run_time_prints_the_estimate_and_says_when_the_price_is_unknown(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("VTX_PRICES_DIR", str(tmp_path))
    write_table(tmp_path, US_CENTRAL1_TABLE)  # on-demand figures for g2-standard-8 and its L4
    args = ["cost", str(TEMPLATES / "smoke-cpu.yaml"), "--run-time", *TINY, *ON_L4]
    env = {"COLUMNS": "200"}
    on_demand = CliRunner().invoke(
        app, [*args, "--region", "us-central1", "--set", "scheduling.strategy=standard"], env=env
    )
    assert on_demand.exit_code == 0, on_demand.output
    assert "60" in _row(on_demand.output, "total steps")
    assert "$" in _row(on_demand.output, "cost of the run")
    spot = CliRunner().invoke(app, [*args, "--region", "us-central1"], env=env)  # no Spot price
    assert spot.exit_code == 0, spot.output
    assert "price per hour is unknown" in spot.output
    assert "unknown" in _row(spot.output, "cost of the run")


def _row(output: str, label: str) -> str:
    return next(line for line in output.splitlines() if label in line)


def test_vtx_cost_run_time_on_a_cpu_job_fails_with_the_reason() -> None:
    result = CliRunner().invoke(
        app, ["cost", str(TEMPLATES / "smoke-cpu.yaml"), "--run-time"], env={"COLUMNS": "200"}
    )
    assert result.exit_code == 1
    assert "has no GPU" in result.output
