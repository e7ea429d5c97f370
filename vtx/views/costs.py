"""How a job's cost prints: the estimate's table, the quota it needs, its disks and reservation,
where each price comes from (the SKUs behind refreshed figures)."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from jobs.core.durations import exact_duration
from jobs.core.formats import money, usd_per_h
from jobs.core.stack import StackOutputs
from jobs.pricing.estimates import DISK_PRICE_KINDS, CostEstimate, budget_warning, disks_note
from jobs.quota.cloud_quotas import QuotaCheck
from vtx.views.fit_table import FitTable
from vtx.views.quota import print_quota_check

BASIS_NOTE = {
    "verified": "verified",
    "derived": "derived from verified figures",
    "catalog": "read from the billing catalog (SKUs below)",
}


def _accelerators(accelerator: str | None, count: int) -> str:
    return f"{count} x {accelerator}" if accelerator else "-"


def _where(estimate: CostEstimate) -> str:
    """The region and table the figures come from, for a table's title."""
    assumed = " (assumed: no region given)" if estimate.region_assumed else ""
    table = estimate.table
    source = f"table {table.name}, as of {table.as_of}" if table else "no price table"
    return f"{estimate.region}{assumed}; {source}"


def cost_table(estimate: CostEstimate, title: str) -> Table:
    # The column of the price this job pays is starred, so a reader never quotes the wrong one.
    star = {estimate.price_kind: " *"}
    price_columns = [f"on-demand $/h{star.get('on-demand', '')}", f"Spot $/h{star.get('Spot', '')}"]
    # FLEX_START's column only for a FLEX_START job: no other job can pay it.
    flex = estimate.price_kind == "FLEX_START"
    if flex:
        price_columns.append("FLEX_START $/h *")
    table = FitTable(
        title=f"{title} in {_where(estimate)}",
        title_justify="left",
        caption=f"* the price this job pays (strategy {estimate.strategy})"
        if estimate.price_kind in ("on-demand", "Spot", "FLEX_START")
        else f"this job pays {estimate.price_kind} prices, in no column here (see below)",
        caption_justify="left",
    )
    for column in ("pool", "machine", "accelerators", "replicas", *price_columns):
        # Wrap, never cut: a truncated machine name ("a2-ultragp…") hides what will run.
        table.add_column(
            column,
            justify="right" if "$" in column or column == "replicas" else "left",
            overflow="fold",
        )
    kinds = ["on-demand", "Spot", *(["FLEX_START"] if flex else [])]
    for pool in estimate.pools:
        table.add_row(
            pool.role,
            pool.machine,
            _accelerators(pool.accelerator, pool.accelerator_count),
            str(pool.replicas),
            money(pool.on_demand_usd_per_h),
            money(pool.spot_usd_per_h),
            *([money(pool.flex_start_usd_per_h)] if flex else []),
        )
        disk = pool.disk_usd_per_h
        table.add_row(
            "",
            f"boot disk {pool.disk_type} {pool.disk_size_gb} GB",
            "",
            str(pool.disks),
            *(money(disk if kind in DISK_PRICE_KINDS else None) for kind in kinds),
            style="dim",
        )
    table.add_row(
        "total", "", "", "", *(_total_cell(estimate, kind) for kind in kinds), style="bold"
    )
    return table


def _total_cell(estimate: CostEstimate, kind: str) -> str:
    """A column's total; "excl. boot disks" when the boot disks' figure is unknown (`cost.py` says
    why the total is not made unknown for them)."""
    total, excludes = estimate.total_for(kind)
    return money(total) + disks_note(excludes and total is not None)


def quota_table(estimate: CostEstimate) -> Table:
    table = FitTable(title=f"Quota needed in {estimate.region}", title_justify="left")
    # Metric names are long (~75 chars): fold them rather than squeeze the units column away.
    table.add_column("metric", overflow="fold")
    table.add_column("units", justify="right", no_wrap=True, min_width=5)
    for metric, units in sorted(estimate.quota.items()):
        table.add_row(metric, str(units))
    return table


def print_cost(
    console: Console,
    estimate: CostEstimate,
    title: str,
    live: tuple[QuotaCheck, StackOutputs] | None = None,
    budget_usd: float | None = None,
) -> None:
    """The cost tables; the quota needed, or with ``live`` the needs against the live quota;
    what the run's budget (``budget_usd``) means at these prices."""
    console.print(cost_table(estimate, title))
    kind = estimate.price_kind
    cap = exact_duration(estimate.timeout_s)
    console.print(
        f"This job ({kind} price in {estimate.region}): {usd_per_h(estimate.usd_per_h)}"
        f"{disks_note(estimate.excludes_disks)}; "
        f"at its timeout cap ({cap}): {money(estimate.usd_at_timeout)}",
        highlight=False,
    )
    console.print(_disk_line(estimate), style="yellow" if estimate.excludes_disks else "dim",
                  highlight=False, markup=False)  # fmt: skip
    if estimate.local_ssd_unknown_because is not None:
        console.print(_local_ssd_line(estimate), style="yellow", highlight=False, markup=False)
    if kind == "FLEX_START" and estimate.usd_per_h is None:
        console.print(
            "FLEX_START (Dynamic Workload Scheduler) is billed at its own prices (Compute "
            "Engine's DWS Defined Duration hour plus Vertex's management fee), which "
            f"`vtx prices refresh` reads: unknown here ({estimate.unknown_because}). On-demand "
            f"in the same region: {usd_per_h(estimate.on_demand_usd_per_h)}.",
            style="yellow",
            highlight=False,
        )
    elif kind == "reservation":
        console.print(_reservation_note(estimate), style="yellow", highlight=False)
    warning = budget_warning(estimate, budget_usd)
    if warning is not None:
        console.print(f"warning: {warning}", style="yellow", highlight=False, markup=False)
    if live is None or live[0].skipped is not None:
        console.print(quota_table(estimate))
    if live is not None:
        print_quota_check(console, *live)
    print_price_source(console, estimate)


def _disk_line(estimate: CostEstimate) -> str:
    """The boot disks' own line: their price in this job's, or why it is unknown."""
    disks = ", ".join(
        f"{p.role}: {p.disks} x {p.disk_size_gb} GB {p.disk_type}" for p in estimate.pools
    )
    figure = estimate.disk_usd_per_h
    if figure is not None:
        return f"Boot disks ({disks}): {usd_per_h(figure)}, included above."
    return (
        f"Boot disks ({disks}): unknown ({estimate.disks_unknown_because}); "
        + ("the price above excludes them." if estimate.excludes_disks else "")
    ).strip()


def _local_ssd_line(estimate: CostEstimate) -> str:
    """The built-in Local SSD's own line: how much, and why its price is unknown."""
    ssds = ", ".join(
        f"{p.role}: {p.disks} x {p.local_ssd_gib:,} GiB built into {p.machine}"
        for p in estimate.local_ssd_pools
    )
    return (
        f"Local SSD ({ssds}): unknown ({estimate.local_ssd_unknown_because}); not in the price "
        "above."
    )


def _reservation_note(estimate: CostEstimate) -> str:
    pools = ", ".join(f"{p.role} ({p.reservation})" for p in estimate.reservation_pools)
    fallback = (
        " ANY_RESERVATION runs at on-demand prices when no reservation matches."
        if any(p.reservation == "ANY_RESERVATION" for p in estimate.reservation_pools)
        else ""
    )
    return (
        f"Reservation: {pools} run on a Compute Engine reservation, billed at the "
        "reservation's Compute Engine price (with its committed-use discounts) plus Vertex's "
        "training fee, which no table here has: unknown. On-demand in the same region: "
        f"{usd_per_h(estimate.on_demand_usd_per_h)}.{fallback}"
    )


def _bases(bases: set[str]) -> str:
    return ", ".join(BASIS_NOTE[b] for b in sorted(bases)) or "none"


def print_price_source(console: Console, estimate: CostEstimate) -> None:
    table = estimate.table
    if table is None:
        console.print(
            f"No price table for {estimate.region} in jobs/core/catalog/prices/: every price is "
            "unknown (no other region's prices are used: they differ).",
            style="yellow",
            highlight=False,
        )
        return
    console.print(
        f"Prices: {table.region}, table {table.name} ({table.source}, as of {table.as_of}); "
        f"on-demand figures: {_bases(estimate.bases)}; Spot figures: "
        + (f"{_bases(estimate.spot_bases)} ({table.spot_source})" if table.spot_source else
           "none published in this table"),
        style="dim",
        highlight=False,
    )  # fmt: skip
    if estimate.price_kind == "FLEX_START":
        console.print(
            f"FLEX_START figures: {table.flex_start_source or 'none in this table'}",
            style="dim",
            highlight=False,
        )
    for line in _sku_lines(estimate):
        console.print(line, style="dim", highlight=False)
    if estimate.unpriced:
        kind = estimate.price_kind
        console.print(
            f"No {kind} price for {', '.join(estimate.unpriced)} in {table.region}: "
            f"this job's {kind} cost is unknown.",
            style="yellow",
            highlight=False,
        )


def _sku_lines(estimate: CostEstimate) -> list[str]:
    """The SKU behind each figure the job's price uses (refreshed tables name one)."""
    return [
        f'  {s.name} ({s.kind}): SKU {s.sku} "{s.description}", fetched {s.fetched_at}'
        for s in estimate.skus
    ]
