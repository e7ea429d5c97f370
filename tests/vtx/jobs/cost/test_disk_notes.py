"""A figure that leaves the boot disks out (their price unknown) says so in every view: `vtx
cost`, the ladder, the run meter, goodput's dollars, and the budget warning."""

from __future__ import annotations

import io
from datetime import timedelta

from rich.console import Console
from rich.table import Table

from jobs.core.catalog import Catalog
from jobs.pricing.estimates import EXCLUDES_DISKS, budget_warning, estimate
from jobs.quota.cloud_quotas import QuotaCheck
from jobs.runs.goodput import goodput_of
from jobs.runs.watch import run_status
from jobs.vertex.job_records import JobRecord
from tests.jobs.core.price_tables import DISK_TABLE, disk_job, with_table
from tests.jobs.runs.run_records import T0, preempted_once, rest_job
from vtx.views.goodput.run import goodput_json, goodput_line
from vtx.views.goodput.run_page import money_cells
from vtx.views.ladder import RungRow, ladder_table
from vtx.views.runs import status_json, status_table
from vtx.views.studies import study_cost

UNKNOWN_DISK = {"type": "pd-standard"}
"""No SKU wording is known for pd-standard: its figure is unknown in any table."""


def _text(table: Table) -> str:
    console = Console(width=250, record=True, file=io.StringIO())
    console.print(table)
    return " ".join(console.export_text().replace("│", " ").split())


def test_the_ladder_says_which_rungs_price_leaves_the_boot_disks_out() -> None:
    cat = with_table(DISK_TABLE)
    rows = [
        RungRow(n, estimate(disk_job(disk), catalog=cat), QuotaCheck("us-central1", []), None, None)
        for n, disk in ((1, UNKNOWN_DISK), (2, {"size_gb": 100}))
    ]
    text = _text(ladder_table(rows))
    assert f"$1.00/h {EXCLUDES_DISKS}" in text  # four n1-standard-4 at $0.25, disks unknown
    assert "$1.10/h" in text and f"$1.10/h {EXCLUDES_DISKS}" not in text  # disks known


def test_the_budget_warning_says_the_figure_undercounts_by_the_boot_disks() -> None:
    cat = with_table(DISK_TABLE)
    unknown = budget_warning(estimate(disk_job(UNKNOWN_DISK), catalog=cat), 0.5)
    assert unknown is not None
    assert f"$1.00/h {EXCLUDES_DISKS}; that figure undercounts by the boot disks" in unknown
    assert "pd-standard: no figure in test" in unknown
    known = budget_warning(estimate(disk_job({"size_gb": 100}), catalog=cat), 0.5)
    assert known is not None and "undercounts" not in known and EXCLUDES_DISKS not in known


def _meter(catalog: Catalog | None) -> tuple[dict, str, dict, str, str, str]:
    jobs = [JobRecord.from_rest(rest_job("1", 0, "JOB_STATE_SUCCEEDED", 10, 3610))]
    now = T0 + timedelta(hours=2)
    status = run_status(jobs, [], "us-central1", now, False, catalog)
    found = goodput_of(status.attempts, preempted_once(), now)
    return (
        status_json(status),
        _text(status_table(status)),
        goodput_json(found),
        goodput_line(found),
        money_cells(found)[1],
        study_cost(status.attempts),  # a study's trials are metered alike
    )


def test_the_run_meter_and_goodput_dollars_say_they_leave_the_boot_disks_out() -> None:
    # The shipped us-central1 table prices n1-standard-4 but has no pd-ssd figure.
    cost, table, goodput, line, page, study = _meter(None)
    assert cost["cost"]["usd"] is not None and cost["cost"]["usd_excludes_disks"] is True
    assert cost["attempts"][0]["usd_excludes_disks"] is True
    assert f"{EXCLUDES_DISKS} so far at the catalog's price" in table
    assert goodput["usd"] is not None and goodput["usd_excludes_disks"] is True
    assert f"tokens per $ {EXCLUDES_DISKS}" in line
    assert page.endswith(EXCLUDES_DISKS)
    assert study.startswith("$") and f"{EXCLUDES_DISKS} so far over 1 trial job(s)" in study
    # A table with the pd-ssd figure: the same run's dollars include the disks, and say nothing.
    cost, table, goodput, line, page, study = _meter(with_table(DISK_TABLE))
    assert cost["cost"]["usd_excludes_disks"] is False and goodput["usd_excludes_disks"] is False
    assert EXCLUDES_DISKS not in table + line + page + study
