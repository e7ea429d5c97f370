"""How a capacity ladder prints in a plan: one row per rung (where, what, its price and its
quota now), and the price lines under it."""

from __future__ import annotations

from dataclasses import dataclass

from rich.table import Table
from rich.text import Text

from jobs.core.durations import exact_duration
from jobs.core.formats import usd_per_h
from jobs.launch.names import resources
from jobs.pricing.estimates import CostEstimate, disks_note
from jobs.quota.cloud_quotas import TRAINING_METRIC_PREFIX, MetricCheck, QuotaCheck
from vtx.views.fit_table import FitTable
from vtx.views.quota import units


@dataclass(frozen=True)
class RungRow:
    """One rung of a ladder as the plan shows it."""

    number: int
    estimate: CostEstimate
    check: QuotaCheck
    max_wait_s: float | None
    hopeless: str | None
    """Why it will be skipped (the live quota says it cannot run); None when it will be tried."""


def _available(m: MetricCheck) -> str:
    if not m.listed:
        return "not listed"
    return "unlimited" if m.limit is None else f"{units(m.free)} of {units(m.limit)}"


def _quota_cells(estimate: CostEstimate, check: QuotaCheck) -> tuple[str, str]:
    """(needed, available) per metric in the same order, short names; available is what is
    free now of the limit."""
    needed = "\n".join(
        f"{m.removeprefix(TRAINING_METRIC_PREFIX)} {n}" for m, n in sorted(estimate.quota.items())
    )
    if check.skipped is not None:  # the plan says why, once
        return needed or "-", "not checked"
    by_metric = {m.metric: _available(m) for m in check.metrics}
    available = "\n".join(by_metric.get(m, "-") for m in sorted(estimate.quota))
    return needed or "-", available or "-"


def rung_price_lines(rows: list[RungRow]) -> list[str]:
    """Where each rung's price comes from: its table and date, and the SKU behind each figure
    (refreshed tables), every rung's as traceable as the first's."""
    lines = []
    for row in rows:
        est = row.estimate
        where = f"rung {row.number} {est.region} {est.price_kind} price"
        if est.table is None:
            lines.append(f"{where}: no price table for {est.region}")
            continue
        skus = (
            ", ".join(f"{s.name} SKU {s.sku}" for s in est.skus) or "no SKU (not a refreshed table)"
        )
        lines.append(f"{where}: table {est.table.name}, as of {est.table.as_of}: {skus}")
    return lines


def ladder_table(rows: list[RungRow]) -> Table:
    """Every rung beside its price and the live quota: what the launch will try, in order."""
    table = FitTable(
        title="Capacity ladder (tried in order; one run id, one output prefix)",
        title_justify="left",
        caption=f"quota: metrics under {TRAINING_METRIC_PREFIX}; available: free now of the limit "
        "(Cloud Quotas, now); max wait: in QUEUED/PENDING before the next rung",
        caption_justify="left",
    )
    for column in ("rung", "region", "resources", "strategy", "$/h"):
        table.add_column(column, no_wrap=True, justify="right" if column == "$/h" else "left")
    table.add_column("quota needed", overflow="fold")
    for column in ("available", "max wait", "verdict"):
        table.add_column(column, overflow="fold")
    last = rows[-1].number if rows else 0
    for row in rows:
        needed, available = _quota_cells(row.estimate, row.check)
        wait = (
            "-" if row.number == last or row.max_wait_s is None else exact_duration(row.max_wait_s)
        )
        verdict = Text("skip: over quota", "red") if row.hopeless else Text("try", "green")
        est = row.estimate
        table.add_row(
            str(row.number), est.region, resources(est), est.strategy,
            usd_per_h(est.usd_per_h) + disks_note(est.excludes_disks),
            needed, available, wait, verdict,
        )  # fmt: skip
    return table
