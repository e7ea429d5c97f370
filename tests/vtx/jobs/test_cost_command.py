"""`vtx cost`: the cost table as the CLI prints it."""

from __future__ import annotations

import io

from jobs.spec.gcloud import load_template
from jobs.training.cost import estimate
from jobs.training.facts import template_facts
from tests.conftest import TEMPLATES


def test_cost_table_on_80_columns_keeps_names_whole() -> None:
    from rich.console import Console

    from vtx.views.output import cost_table

    result = estimate(template_facts(load_template(TEMPLATES / "a100x16-fsdp.yaml")))
    console = Console(width=80, record=True, file=io.StringIO())
    console.print(cost_table(result, "plan"))
    text = console.export_text()
    assert "…" not in text
    # Too narrow for a grid with every name whole: each pool reads as `column: value` lines.
    for pool in result.pools:
        assert f"machine: {pool.machine}" in text
        if pool.accelerator:
            assert f"accelerators: {pool.accelerator_count} x {pool.accelerator}" in text
