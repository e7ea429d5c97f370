"""`vtx prices refresh --stack local` against the running local platform, then `vtx cost` on a
Spot template in europe-west4 and a FLEX_START one in us-central1: a dollar figure with the
table, its date and the SKU(s) behind it."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from jobs.core.stack import StackOutputs
from tests.conftest import TEMPLATES
from vtx.cli import app


def _flat(text: str) -> str:
    return " ".join(text.replace("│", " ").split())


def test_refresh_then_cost_names_the_sku_and_date(
    local_platform: StackOutputs, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("VTX_PRICES_DIR", str(tmp_path))
    runner = CliRunner()
    template = str(TEMPLATES / "l4-spot-lora.yaml")
    before = _flat(runner.invoke(app, ["cost", template, "--region", "europe-west4"]).output)
    assert "This job (Spot price in europe-west4): unknown" in before

    mars = runner.invoke(app, ["prices", "refresh", "--stack", "local", "--region", "mars-east1"])
    assert mars.exit_code == 2 and "--region mars-east1: not a catalog region" in _flat(mars.output)
    refreshed = runner.invoke(app, ["prices", "refresh", "--stack", "local"])
    assert refreshed.exit_code == 0, refreshed.output
    out = _flat(refreshed.output)
    # TPUs have no SKU form known: every TPU the region offers stays unknown, v5e among them.
    unknown = re.search(r"unknown in us-central1 \(training\): ([^│]*?)(?: unknown in|$)", out)
    assert unknown and "TPU_V5_LITEPOD on-demand, TPU_V5_LITEPOD spot" in unknown.group(1), out
    assert "made-up figures, not Google's" in out
    today = datetime.now(UTC).date().isoformat()
    assert f"billing-local-training-europe-west4-{today}.yaml" in out

    # Made-up figures never price a job that is not the local stack's.
    elsewhere = runner.invoke(app, ["cost", template, "--region", "europe-west4"])
    assert "This job (Spot price in europe-west4): unknown" in _flat(elsewhere.output)
    local = ["--stack", "local", "--region", "europe-west4"]
    cost = runner.invoke(app, ["cost", template, *local])
    assert cost.exit_code == 0, cost.output
    text = _flat(cost.output)
    assert re.search(r"This job \(Spot price in europe-west4\): \$\d+\.\d+/h", text), text
    assert f"table billing-local-training-europe-west4-{today}" in text
    assert "not Google's prices" in text
    sku = re.search(r"g2-standard-8 \(Spot\): SKU ([0-9A-F-]{14})", text)
    assert sku is not None, text
    assert "Spot Preemptible Custom Training g2-standard-8 running in europe-west4" in text
    assert f"fetched {today}T" in text
    # FLEX_START: its own column, from the stand-in's Compute Engine DWS and Vertex fee SKUs.
    flex_template = str(TEMPLATES / "h100x16-flex-start.yaml")
    flex = runner.invoke(
        app, ["cost", flex_template, "--stack", "local", "--region", "us-central1"]
    )
    assert flex.exit_code == 0, flex.output
    flex_text = _flat(flex.output)
    assert re.search(r"This job \(FLEX_START price in us-central1\): \$[\d,]+\.\d+/h", flex_text)
    assert "FLEX_START $/h *" in flex_text
    assert re.search(
        r"NVIDIA_H100_80GB \(FLEX_START\): SKU [0-9A-F-]{14}\+[0-9A-F-]{14}", flex_text
    )
    assert "attached to DWS Defined Duration VMs" in flex_text and "management fee" in flex_text

    # A ladder's plan names every rung's table, date and SKUs, not only the first rung's.
    ladder = str(TEMPLATES / "l4-ladder.yaml")
    plan = runner.invoke(app, ["launch", ladder, *local[:2], "--dry-run", "--run-id", "skus-1"])
    assert plan.exit_code == 0, plan.output
    table = f"table billing-local-training-us-central1-{today}, as of {today}"
    sku = "[0-9A-F]{4}-[0-9A-F]{4}-[0-9A-F]{4}"
    for rung, kind, joined in ((1, "Spot", ""), (2, "on-demand", ""), (3, "FLEX_START", "\\+")):
        line = rf"rung {rung} us-central1 {kind} price: {table}: g2-standard-8 SKU {sku}{joined}"
        assert re.search(line, _flat(plan.output)), (line, plan.output)
