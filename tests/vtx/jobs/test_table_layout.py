"""Every CLI table reads in any terminal."""

from __future__ import annotations

import io
import re

import pytest
from rich.console import Console
from rich.table import Table
from rich.text import Text

from jobs.core.catalog import load_catalog
from jobs.custom_jobs.facts import template_facts
from jobs.pricing.estimates import estimate
from jobs.quota.cloud_quotas import MetricCheck, QuotaCheck
from jobs.spec.gcloud import load_template
from tests.conftest import REPO
from vtx.views.catalog import catalog_table, machines_table
from vtx.views.fit_table import FitTable
from vtx.views.ladder import RungRow, ladder_table

TEMPLATES = REPO / "jobs" / "templates"

WIDTHS = (60, 80, 120)


def _ladder() -> Table:
    rows = []
    template = template_facts(load_template(TEMPLATES / "l4-spot-lora.yaml"))
    for number, region in enumerate(("us-central1", "europe-west4", "us-east4"), start=1):
        cost = estimate(template, region)
        metrics = [
            MetricCheck(metric, needed, 8, 2, listed=True, quota_id=f"Quota{number}")
            for metric, needed in sorted(cost.quota.items())
        ]
        rows.append(RungRow(number, cost, QuotaCheck(region, metrics), 1800.0, None))
    return ladder_table(rows)


def _printed(table: Table, width: int) -> str:
    console = Console(width=width, record=True, file=io.StringIO())
    console.print(table)
    return console.export_text()


def _words(table: Table) -> set[str]:
    """Every word of every cell, as the table holds them."""
    words: set[str] = set()
    for column in table.columns:
        for cell in column._cells:
            text = cell.plain if isinstance(cell, Text) else Text.from_markup(str(cell)).plain
            words.update(text.split())
    return words


TABLES = {
    "ladder": _ladder,
    "catalog": lambda: catalog_table(load_catalog(), None, None),
    "machines": lambda: machines_table(load_catalog(), "us-central1"),
}


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("name", sorted(TABLES))
def test_no_word_is_broken_and_every_value_is_printed(name: str, width: int) -> None:
    table = TABLES[name]()
    assert isinstance(table, FitTable)
    printed = _printed(table, width)
    tokens = set(printed.split())
    missing = sorted(w for w in _words(table) if len(w) < width - 4 and w not in tokens)
    assert not missing, f"{name} at {width} columns breaks or drops: {missing[:10]}\n{printed}"
    assert all(len(line.rstrip()) <= width for line in printed.splitlines())


def test_the_ladder_is_a_grid_where_it_fits_and_lines_where_it_does_not() -> None:
    table = _ladder()
    wide, narrow = _printed(table, 120), _printed(table, 80)
    assert "┃ rung" in wide and "preemptible_nvidia_l4_gpus 1" in wide
    assert "┃" not in narrow and "rung: 2" in narrow and "region: europe-west4" in narrow
    # A value of several lines stands under its header; each metric on a line of its own.
    assert re.search(r"quota needed:\n +cpus 8\n +preemptible_nvidia_l4_gpus 1\n", narrow)


def test_a_table_without_headers_keeps_its_field_names_whole() -> None:
    table = FitTable(title="demo summary", show_header=False)
    table.add_column(no_wrap=True)
    table.add_column(overflow="fold")
    table.add_row("outputs", "gs://" + "b" * 70 + "/run")
    table.add_row("job state", "SUCCEEDED")
    printed = _printed(table, 60)
    assert "│ job state │ SUCCEEDED" in printed and "│ outputs   │ gs://bbb" in printed
