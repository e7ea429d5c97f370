"""What the CLI prints: problems, errors, plans, costs and the catalog (presentation only)."""

from __future__ import annotations

import copy
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
from rich.markup import escape
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from jobs.core.catalog import QUOTA_PREFIX, Catalog, Machine, Price
from jobs.core.credentials import redact
from jobs.core.durations import exact_duration
from jobs.core.formats import UNKNOWN, money, usd_per_h
from jobs.core.problems import Problem
from jobs.core.stack import StackOutputs
from jobs.launch.names import resources
from jobs.pricing.estimates import DISK_PRICE_KINDS, CostEstimate, budget_warning, disks_note
from jobs.quota.cloud_quotas import (
    NOT_LISTED,
    OK,
    OVER_LIMIT,
    SHORT_NOW,
    TRAINING_METRIC_PREFIX,
    MetricCheck,
    QuotaCheck,
    RegionQuota,
)

BASIS_NOTE = {
    "verified": "verified",
    "derived": "derived from verified figures",
    "catalog": "read from the billing catalog (SKUs below)",
}


class FitTable(Table):
    """Every table the CLI prints (a rich ``Table`` in all else). Columns shrink, the widest
    first, never below their longest word (a no-wrap column: its longest line). Where the console
    is too narrow for that, a table with headers prints each row as ``header: value`` lines
    instead of folding cells into columns one or two characters wide
    (``custom_model_training_cpus`` down a dozen lines); a table without headers is such lines
    already, and keeps its grid (a word longer than its value column folds)."""

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        widths = self.fitted_widths(console, options)
        if widths is None and not self.show_header:
            # Already `field: value` lines: the field keeps its width, a longer word folds.
            yield from Table.__rich_console__(self, console, options)
            return
        if widths is None:
            yield from self._vertical(console)
            return
        fitted = copy.copy(self)
        fitted.columns = [copy.copy(column) for column in self.columns]
        for index, (column, width) in enumerate(zip(fitted.columns, widths, strict=True)):
            column.width = width - self._get_padding_width(index)
        yield from Table.__rich_console__(fitted, console, options)

    def fitted_widths(self, console: Console, options: ConsoleOptions) -> list[int] | None:
        """Each column's width (padding included) within the console, no word broken and no
        no-wrap column's line: the widest shrink first, none below its longest word. None when
        the columns' longest words alone are wider than the console."""
        unbounded = options.update_width(1_000_000)
        measured = [self._measure_column(console, unbounded, column) for column in self.columns]
        widths = [m.maximum for m in measured]
        least = [
            m.maximum if column.no_wrap else m.minimum
            for column, m in zip(self.columns, measured, strict=True)
        ]
        room = options.max_width - self._extra_width
        if not self.columns or sum(least) > room:
            return None
        for _ in range(sum(widths) - room):
            widest = max(
                (i for i, width in enumerate(widths) if width > least[i]),
                key=lambda i: widths[i],
            )
            widths[widest] -= 1
        return widths

    def _vertical(self, console: Console) -> RenderResult:
        if self.title:
            yield _styled(console, self.title, self.title_style or "table.title")
        headers = [str(c.header) for c in self.columns]
        for index, row in enumerate(self.rows):
            if index:
                yield Text()
            cells = [column._cells[index] for column in self.columns]
            yield from _vertical_row(console, headers, cells, row.style or "")
        if self.caption:
            yield Text()
            yield _styled(console, self.caption, self.caption_style or "table.caption")


def _styled(console: Console, text: RenderableType, style: str) -> RenderableType:
    return console.render_str(text, style=style) if isinstance(text, str) else text


def _vertical_row(
    console: Console, headers: list[str], cells: list[RenderableType], style: str
) -> RenderResult:
    """One row as lines: ``header: value``; a value of several lines below its header, indented."""
    values = [console.render_str(c) if isinstance(c, str) else c for c in cells]
    for header, value in zip(headers, values, strict=True):
        if isinstance(value, Text) and not value.plain:
            continue
        key = Text(f"{header}:" if header else "", style="bold")
        if isinstance(value, Text) and "\n" not in value.plain:
            yield Text.assemble(key, " " if header else "", value, style=style)
        elif isinstance(value, Text):
            if header:
                yield key
            yield from (Text.assemble("  ", line, style=style) for line in value.split("\n"))
        else:
            if header:
                yield key
            yield Padding(value, (0, 0, 0, 2), style=style, expand=False)


def print_error(console: Console, message: object, label: str = "error") -> None:
    """One red-labelled line on `console`; the message is escaped, because paths and API
    messages may hold [brackets] that rich would take for markup, and redacted, because an
    error may quote what it was given (a value of a job, an API's answer about it)."""
    console.print(f"[red]{label}:[/red] {escape(redact(str(message)))}", highlight=False)


def print_problems(console: Console, problems: Iterable[Problem]) -> None:
    for p in problems:
        where = f"{p.source}: " if p.source else ""
        line = Text(f"✗ {where}", style="red")
        line.append(f"{p.path}: ", style="bold")
        line.append(p.message)
        console.print(line)
        if p.hint:
            console.print(Text(f"    write instead: {p.hint}", style="cyan"))


def print_warnings(console: Console, problems: Iterable[Problem]) -> None:
    """Like ``print_problems``, in yellow: worth fixing, not a reason to refuse the job."""
    for p in problems:
        where = f"{p.source}: " if p.source else ""
        line = Text(f"! warning: {where}", style="yellow")
        line.append(f"{p.path}: ", style="bold")
        line.append(p.message)
        console.print(line)
        if p.hint:
            console.print(Text(f"    instead: {p.hint}", style="cyan"))


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


def _units(value: int | None, unlimited: str = "unlimited") -> str:
    return unlimited if value is None else f"{value:,}"


VERDICT_STYLE = {OK: "green", SHORT_NOW: "yellow", OVER_LIMIT: "red", NOT_LISTED: "dim"}


def quota_check_table(check: QuotaCheck) -> Table:
    """The job's needs beside the live limit, what running jobs hold and what is free."""
    table = FitTable(
        title=f"Quota in {check.region} (limits: Cloud Quotas, now)",
        title_justify="left",
        caption="in use: the region's CustomJobs that have not ended, "
        "accelerators or vCPUs x replicas",
        caption_justify="left",
    )
    table.add_column("metric", overflow="fold")
    for column in ("needed", "limit", "in use", "free"):
        table.add_column(column, justify="right", no_wrap=True)
    table.add_column("verdict", no_wrap=True)
    for m in check.metrics:
        limit = _units(m.limit) if m.listed else "-"
        free = _units(m.free) if m.listed else "-"
        verdict = Text(m.verdict, style=VERDICT_STYLE[m.verdict])
        table.add_row(m.metric, str(m.needed), limit, str(m.in_use), free, verdict)
    return table


def _fix(m: MetricCheck, region: str, stack: StackOutputs) -> str:
    """What to request: the preference infra would create (GPUs), the quota by id (vCPUs, TPUs:
    infra does not request them), or on the local platform its capacity model's limit."""
    p = m.preference
    config = (
        "a stack's vtx:platform.quotas"
        if stack.is_local
        else f"Pulumi.{stack.environment}.yaml under vtx:platform.quotas, then `pulumi up`"
    )
    gcp = (
        f"request quota preference {p.preference_id}: add {p.stanza} to {config}"
        if p is not None
        else f"raise quota {m.quota_id or m.metric} in the console (Cloud Quotas): "
        "vtx:platform.quotas requests GPU quotas only"
    )
    if not stack.is_local:
        return gcp
    # `capacity set` replaces the whole model: edit what `capacity show` prints.
    return (
        f"raise regions.{region}.quotas.{m.metric} to {m.needed + m.in_use} in the local "
        "capacity model (`vtx local capacity show` into a file, edit it, `vtx local capacity "
        f"set FILE.yaml`); on Google Cloud: {gcp}"
    )


def quota_check_lines(check: QuotaCheck, stack: StackOutputs) -> list[tuple[str, str]]:
    """(style, line) for each metric that does not simply fit, and for a check not done."""
    if check.skipped is not None:
        return [("yellow", f"quota: not checked ({check.skipped})")]
    lines = []
    for m in check.over_limit:
        lines.append(
            (
                "red",
                f"quota: {m.metric} needs {m.needed}, over the limit of {m.limit} in "
                f"{check.region}: Vertex would refuse this job. "
                f"To fix: {_fix(m, check.region, stack)}",
            )
        )
    for m in check.short_now:
        lines.append(
            (
                "yellow",
                f"quota: {m.metric} needs {m.needed}, within the limit of {m.limit} but only "
                f"{m.free} free now ({m.in_use} held by running jobs): the job will wait until "
                f"they end. To run beside them: {_fix(m, check.region, stack)}",
            )
        )
    unlisted = [m.metric for m in check.metrics if m.verdict == NOT_LISTED]
    if unlisted:
        lines.append(
            (
                "dim",
                f"quota: Cloud Quotas lists no quota for {', '.join(unlisted)} in "
                f"{check.region}: not checked",
            )
        )
    return lines


def print_quota_check(console: Console, check: QuotaCheck, stack: StackOutputs) -> None:
    if check.skipped is None:
        console.print(quota_check_table(check))
    for style, line in quota_check_lines(check, stack):
        console.print(line, style=style, markup=False, highlight=False)


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


def _price_cell(price: Price | None, spot: bool) -> str:
    if price is None:
        return UNKNOWN
    usd, basis = (price.usd_per_h, price.basis)
    if spot:
        usd, basis = (price.spot_usd_per_h, price.spot_basis)
    return UNKNOWN if usd is None else f"{usd:.4f} ({basis})"


def _region_prices(
    cat: Catalog, regions: list[str], kind: Literal["machines", "accelerators"], name: str
) -> str:
    """One line per region with a figure (on-demand / Spot $/h); regions without any figure are
    named together on one line, so "unknown" is said without a line per region. Of several
    regions, those known only for their TPUs are counted, not named (`vtx catalog --region`
    names them): their long names would push an 80-column table out of its grid."""
    lines, unknown, tpu_only = [], [], 0
    for region in regions:
        table = cat.price_table(region)
        price = getattr(table, kind).get(name) if table else None
        cells = (_price_cell(price, spot=False), _price_cell(price, spot=True))
        if cells != (UNKNOWN, UNKNOWN):
            lines.append(f"{region}: {cells[0]} / {cells[1]}")
        elif len(regions) > 1 and cat.regions[region].tpus_only_known:
            tpu_only += 1
        else:
            unknown.append(region)
    if tpu_only:
        unknown.append(f"{tpu_only} region(s) known only for TPUs")
    if unknown:
        lines.append(f"{UNKNOWN} in {', '.join(unknown)}")
    return "\n".join(lines)


PRICE_COLUMN = "region: on-demand / Spot $/h"
PRICE_CAPTION = (
    "Prices per region from its newest table (each table's source and date below); 'unknown': "
    "the region's table has no figure read from a source: `vtx prices refresh` reads them from "
    "the billing catalog."
)


def catalog_table(cat: Catalog, accelerator: str | None, region: str | None) -> Table:
    table = FitTable(
        title="Accelerators for Vertex AI custom training",
        title_justify="left",
        caption=PRICE_CAPTION + " Per unit: add the machine's price.",
        caption_justify="left",
    )
    for column in ("accelerator", "memory", "machine: counts", PRICE_COLUMN):
        # Names are what users copy into templates: never cut them ("NVIDIA_TESLA_V…").
        table.add_column(column, no_wrap=column == "accelerator", overflow="fold")
    for acc in cat.accelerators.values():
        if accelerator and acc.name != accelerator.upper():
            continue
        regions = [r.name for r in cat.regions.values() if acc.name in r.accelerators]
        if region and region not in regions:
            continue
        machines = [_machine_counts(m, acc.name) for m in cat.machines_for(acc.name)]
        table.add_row(
            acc.name,
            f"{acc.memory_gb:g} GB",
            "\n".join(machines) if accelerator else _count_summary(cat, acc.name),
            _region_prices(cat, [region] if region else regions, "accelerators", acc.name),
        )
    return table


def _machine_counts(machine: Machine, accelerator: str) -> str:
    """``g2-standard-24: 2``; a TPU VM machine with its topologies and their VMs (the chips a
    job gets are the count per VM times the VMs); an unconfirmed machine says so."""
    line = f"{machine.name}: {','.join(map(str, machine.accelerators[accelerator]))}"
    if machine.tpu_topologies:
        slices = [
            f"{t}" + (f" ({n} VMs)" if n > 1 else "") for t, n in machine.tpu_topologies.items()
        ]
        line += f" per VM; tpu_topology {', '.join(slices)}"
    if machine.unconfirmed:
        line += " (UNCONFIRMED for training: refused)"
    return line


def _count_summary(cat: Catalog, accelerator: str) -> str:
    machines = cat.machines_for(accelerator)
    counts = sorted({c for m in machines for c in m.accelerators[accelerator]})
    return f"{', '.join(map(str, counts))} per VM on {len(machines)} machine type(s)"


def machines_table(cat: Catalog, region: str | None) -> Table:
    table = FitTable(
        title="Machine types",
        title_justify="left",
        caption=PRICE_CAPTION + " Machine part only: accelerators are priced apart.",
        caption_justify="left",
    )
    for column in ("machine", "vCPUs", "memory", "built-in", PRICE_COLUMN):
        table.add_column(column, no_wrap=column == "machine", overflow="fold")
    offered = cat.regions.get(region or "")
    if offered is not None and offered.tpus_only_known:
        table.caption = (
            f"{table.caption} {offered.name}: known only for its TPUs; its other machines are "
            "not recorded (unknown, not absent)."
        )
    for m in cat.machines.values():
        if offered and m.family not in offered.families:
            continue
        builtin = ", ".join(f"{c[0]} x {a}" for a, c in m.accelerators.items()) if m.builtin else ""
        regions = [r.name for r in cat.regions.values() if m.family in r.families]
        table.add_row(
            m.name,
            "?" if m.vcpus is None else str(m.vcpus),
            "?" if m.memory_gb is None else f"{m.memory_gb:g} GB",
            builtin,
            _region_prices(cat, [region] if region else regions, "machines", m.name),
        )
    return table


def quota_usage_rows(regions: list[RegionQuota], metrics: list[str] | None) -> list[dict]:
    """One row per region and training metric (``metrics`` keeps some, in that order)."""
    rows = []
    for quota in regions:
        names = metrics or sorted(set(quota.limits) | set(quota.in_use))
        for metric in names:
            limit = quota.limits.get(metric)
            used = quota.in_use.get(metric, 0)
            value = limit.limit if limit else None
            rows.append(
                {
                    "region": quota.region,
                    "metric": metric,
                    "quota_id": limit.quota_id if limit else None,
                    "listed": limit is not None,
                    "limit": value,
                    "unlimited": limit is not None and value is None,
                    "in_use": used,
                    "free": None if value is None else max(value - used, 0),
                }
            )
    return rows


def quota_usage_table(rows: list[dict]) -> Table:
    table = FitTable(
        title="Vertex AI custom training quota (limits: Cloud Quotas; in use: running CustomJobs); "
        f"metrics under {QUOTA_PREFIX}",
        title_justify="left",
        caption="'not listed': Cloud Quotas has no such quota in the region; in use counts "
        "CustomJobs only (tuning jobs, pipelines and persistent resources hold quota too)",
        caption_justify="left",
    )
    for column in ("region", "metric", "quota id", "limit", "in use", "free"):
        numeric = column in ("limit", "in use", "free")
        # The metric is what users grep for and paste: never folded; the id may fold.
        table.add_column(
            column,
            justify="right" if numeric else "left",
            overflow="fold",
            no_wrap=column in ("region", "metric"),
        )
    for row in rows:
        listed = row["listed"]
        table.add_row(
            row["region"],
            row["metric"].removeprefix(QUOTA_PREFIX),
            row["quota_id"] or "-",
            _units(row["limit"]) if listed else "not listed",
            str(row["in_use"]),
            _units(row["free"]) if listed else "-",
        )
    return table


# ---- a capacity ladder ----------------------------------------------------------------------


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
    return "unlimited" if m.limit is None else f"{_units(m.free)} of {_units(m.limit)}"


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
