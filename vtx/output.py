"""What the CLI prints: problems, errors, plans, costs and the catalog (presentation only)."""

from __future__ import annotations

from collections.abc import Iterable

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from jobs.catalog import Catalog
from jobs.cost import CostEstimate
from jobs.durations import human_duration
from jobs.problems import Problem

BASIS_NOTE = {
    "verified": "verified",
    "derived": "derived from verified figures",
    "recalled": "recalled, not re-checked: confirm on the pricing page",
}


def print_error(console: Console, message: object, label: str = "error") -> None:
    """One red-labelled line on `console`; the message is escaped, because paths and API
    messages may hold [brackets] that rich would take for markup."""
    console.print(f"[red]{label}:[/red] {escape(str(message))}", highlight=False)


def print_problems(console: Console, problems: Iterable[Problem]) -> None:
    for p in problems:
        where = f"{p.source}: " if p.source else ""
        line = Text(f"✗ {where}", style="red")
        line.append(f"{p.path}: ", style="bold")
        line.append(p.message)
        console.print(line)
        if p.hint:
            console.print(Text(f"    write instead: {p.hint}", style="cyan"))


def _usd(value: float) -> str:
    return f"${value:,.2f}"


def _accelerators(accelerator: str | None, count: int) -> str:
    return f"{count} x {accelerator}" if accelerator else "-"


def cost_table(estimate: CostEstimate, title: str) -> Table:
    spot_label = "Spot $/h (est.)"
    table = Table(title=title, title_justify="left")
    for column in ("pool", "machine", "accelerators", "replicas", "on-demand $/h", spot_label):
        # Wrap, never cut: a truncated machine name ("a2-ultragp…") hides what will run.
        table.add_column(
            column,
            justify="right" if "$" in column or column == "replicas" else "left",
            overflow="fold",
        )
    for pool in estimate.pools:
        table.add_row(
            pool.role,
            pool.machine,
            _accelerators(pool.accelerator, pool.accelerator_count),
            str(pool.replicas),
            _usd(pool.on_demand_usd_per_h),
            _usd(pool.spot_usd_per_h),
        )
    table.add_row(
        "total", "", "", "", _usd(estimate.on_demand_usd_per_h), _usd(estimate.spot_usd_per_h),
        style="bold",
    )  # fmt: skip
    return table


def quota_table(estimate: CostEstimate) -> Table:
    table = Table(title=f"Quota needed in {estimate.region}", title_justify="left")
    # Metric names are long (~75 chars): fold them rather than squeeze the units column away.
    table.add_column("metric", overflow="fold")
    table.add_column("units", justify="right", no_wrap=True, min_width=5)
    for metric, units in sorted(estimate.quota.items()):
        table.add_row(metric, str(units))
    return table


def print_cost(console: Console, estimate: CostEstimate, title: str) -> None:
    console.print(cost_table(estimate, title))
    strategy = estimate.strategy
    console.print(
        f"This job ({strategy.lower()}): {_usd(estimate.usd_per_h)}/h; at its timeout cap "
        f"({human_duration(estimate.timeout_s)}): {_usd(estimate.usd_at_timeout)}"
        + (" (Spot price estimated)" if strategy == "SPOT" else ""),
        highlight=False,
    )
    if strategy == "FLEX_START":
        console.print(
            "FLEX_START has its own discounted prices, not in this table: shown on-demand."
        )
    console.print(quota_table(estimate))
    print_price_source(console, estimate)


def print_price_source(console: Console, estimate: CostEstimate) -> None:
    table = estimate.table
    console.print(
        f"Prices: table {table.name} ({table.source}, as of {table.as_of}); "
        f"figures: {', '.join(BASIS_NOTE[b] for b in sorted(estimate.bases)) or 'none'}. "
        f"Spot = on-demand x {table.spot_estimate_factor} (estimate).",
        style="dim",
        highlight=False,
    )
    if not estimate.table_matches_region:
        console.print(
            f"No price table for {estimate.region}: used {table.region} prices.", style="yellow"
        )
    if estimate.missing:
        console.print(
            f"No price for {', '.join(estimate.missing)}: counted as $0 above.", style="yellow"
        )


def catalog_table(cat: Catalog, accelerator: str | None, region: str | None) -> Table:
    table_prices, _ = cat.price_table(region)
    table = Table(title="Accelerators for Vertex AI custom training", title_justify="left")
    for column in ("accelerator", "memory", "machine: counts", "regions", "$/h per unit"):
        # Names are what users copy into templates: never cut them ("NVIDIA_TESLA_V…").
        table.add_column(column, no_wrap=column == "accelerator", overflow="fold")
    for acc in cat.accelerators.values():
        if accelerator and acc.name != accelerator.upper():
            continue
        regions = [r.name for r in cat.regions.values() if acc.name in r.accelerators]
        if region and region not in regions:
            continue
        machines = [
            f"{m.name}: {','.join(map(str, m.accelerators[acc.name]))}"
            for m in cat.machines_for(acc.name)
        ]
        price = table_prices.accelerators.get(acc.name)
        table.add_row(
            acc.name,
            f"{acc.memory_gb:g} GB",
            "\n".join(machines) if accelerator else _count_summary(cat, acc.name),
            ", ".join(regions),
            f"{price.usd_per_h:.4f} ({price.basis})" if price and price.usd_per_h else "-",
        )
    return table


def _count_summary(cat: Catalog, accelerator: str) -> str:
    machines = cat.machines_for(accelerator)
    counts = sorted({c for m in machines for c in m.accelerators[accelerator]})
    return f"{', '.join(map(str, counts))} per VM on {len(machines)} machine type(s)"


def machines_table(cat: Catalog, region: str | None) -> Table:
    prices, _ = cat.price_table(region)
    table = Table(title="Machine types", title_justify="left")
    for column in ("machine", "vCPUs", "memory", "built-in", "$/h (machine part)"):
        table.add_column(column, no_wrap=column == "machine", overflow="fold")
    offered = cat.regions.get(region or "")
    for m in cat.machines.values():
        if offered and m.family not in offered.families:
            continue
        builtin = ", ".join(f"{c[0]} x {a}" for a, c in m.accelerators.items()) if m.builtin else ""
        price = prices.machines.get(m.name)
        table.add_row(
            m.name,
            str(m.vcpus),
            f"{m.memory_gb:g} GB",
            builtin,
            f"{price.usd_per_h:.4f} ({price.basis})" if price and price.usd_per_h else "-",
        )
    return table
