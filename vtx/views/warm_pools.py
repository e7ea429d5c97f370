"""What `vtx cost` says of a job on a persistent resource: it adds nothing to the bill, and
what the resource itself costs per hour, busy or idle (jobs/pricing/warm_pools.py); the same
figure as `vtx review` shows it; and `vtx pool list|status` (a resource's state, pools, replicas
used and idle, $/h and the runs on it)."""

from __future__ import annotations

from typing import Any

from rich.console import Console

from infra.review.rows import HourlyCost
from jobs.core.catalog import load_catalog
from jobs.core.formats import duration, money
from jobs.core.stack import PersistentResourceOutputs
from jobs.pricing.warm_pools import PoolPrice, WarmCost, WarmShare, warm_cost
from jobs.runs.warm_pools import ResourceStatus, WindowUsage
from vtx.views.fit_table import FitTable


def _per_h(value: float | None) -> str:
    return "unknown" if value is None else f"{money(value)}/h"


def per_hour_text(cost: WarmCost) -> str:
    """``$1.23/h (up to $2.46/h scaled out)``, or ``unknown: why``."""
    if cost.usd_per_h is None:
        return f"unknown: {cost.unknown_because or 'no price'}"
    ceiling = cost.max_usd_per_h
    scaling = f" (up to {_per_h(ceiling)} scaled out)" if ceiling != cost.usd_per_h else ""
    return f"{_per_h(cost.usd_per_h)}{scaling}{_excluding(cost)}"


def _excluding(cost: WarmCost) -> str:
    """`` excluding boot disks (why)`` when a pool's disk figure is unknown (the price is the
    VMs' alone, as `jobs.pricing.estimates` says of a job's)."""
    return f" excluding boot disks ({cost.disks_unknown_because})" if cost.excludes_disks else ""


def _replica_text(price: PoolPrice) -> str:
    """``$1.60/h (VM $1.50/h + boot disk 100 GB pd-ssd $0.10/h)``: one replica of a pool."""
    pool = price.pool
    disk = f"{pool.boot_disk_size_gb} GB {pool.boot_disk_type}"
    disk += (
        f" {_per_h(price.disk_usd_per_h)}"
        if price.disk_usd_per_h is not None
        else f" unknown: {price.disk_unknown}"
    )
    return f"{_per_h(price.replica_usd_per_h)} (VM {_per_h(price.vm_usd_per_h)} + boot disk {disk})"


def _pool_line(price: PoolPrice) -> str:
    return f"pool {price.pool.id}: {price.pool.summary}, {_replica_text(price)} per replica"


def review_price(resource: PersistentResourceOutputs) -> HourlyCost:
    """`vtx review`'s pricer: the shipped catalog and the refreshed tables (a real stack's)."""
    cost = warm_cost(resource, load_catalog())
    return HourlyCost(cost.usd_per_h, cost.max_usd_per_h, cost.usd_per_month, per_hour_text(cost))


def warm_cost_lines(cost: WarmCost) -> list[str]:
    rid = cost.resource.name.rsplit("/", 1)[-1]
    ceiling = cost.max_usd_per_h
    scaling = f" (up to {_per_h(ceiling)} scaled out)" if ceiling != cost.usd_per_h else ""
    lines = [
        f"On persistent resource {rid!r} ({cost.resource.region}): this job adds nothing to the "
        f"bill beyond the resource's own price; the figures above are what it would cost on its "
        f"own VMs.",
        f"The resource costs {_per_h(cost.usd_per_h)}{scaling}{_excluding(cost)}, busy or idle, "
        f"for as long as it runs:"
        if cost.usd_per_h is not None
        else "The resource's price per hour is unknown (below); it is billed busy or idle alike:",
    ]
    for price in cost.pools:
        lines.append(f"  {_pool_line(price)}")
    if cost.unknown_because:
        lines.append(f"  unknown: {cost.unknown_because}")
    return lines


def share_lines(share: WarmShare, timeout_s: float, budget_usd: float | None) -> list[str]:
    """What the run's meter charges a job on a persistent resource, and its budget then."""
    lines = [
        f"The run's meter (its budget, `vtx status`) charges this job its {share.text}: the "
        f"replicas it holds x each pool's price per replica."
    ]
    warning = share.budget_warning(timeout_s, budget_usd)
    if warning is not None:
        lines.append(f"warning: {warning}")
    return lines


def print_warm_cost(
    console: Console,
    cost: WarmCost | None,
    share: WarmShare | None = None,
    timeout_s: float = 0.0,
    budget_usd: float | None = None,
) -> None:
    """`vtx cost`'s lines for a job on a persistent resource: the bill (the resource's), then
    what the run's meter charges it (``share``) and its budget against that."""
    for line in warm_cost_lines(cost) if cost else []:
        console.print(line, markup=False, highlight=False)
    for line in share_lines(share, timeout_s, budget_usd) if share else []:
        style = "yellow" if line.startswith("warning:") else None
        console.print(line, markup=False, highlight=False, style=style)


# ---- `vtx pool list` and `vtx pool status` ---------------------------------------------------


def _status_json(status: ResourceStatus) -> dict[str, Any]:
    """The stable keys of `vtx pool status --format json|yaml` (and of each `list` entry)."""
    cost = status.cost
    return {
        "name": status.name,
        "id": status.resource_id,
        "state": status.state,
        "region": status.region,
        "labels": status.labels,
        "error": status.error,
        "pools": [
            {
                "id": usage.pool.id,
                "machine": usage.pool.summary,
                "replicas": usage.pool.replica_count,
                "max_replicas": usage.pool.max_replica_count,
                "used": usage.used,
                "idle": usage.idle,
                **_pool_price_json(status.cost.pool(usage.pool.id)),
            }
            for usage in status.pools
        ],
        "cost": {
            "usd_per_h": cost.usd_per_h,
            "max_usd_per_h": cost.max_usd_per_h,
            "usd_unknown_because": cost.unknown_because,
            "boot_disks_unknown_because": cost.disks_unknown_because,
            "billed": "busy or idle",
        },
        "runs": [
            {"run_id": run.run_id, "job": run.job, "state": run.state, "replicas": run.replicas}
            for run in status.runs
        ],
    }


def _pool_price_json(price: PoolPrice | None) -> dict[str, Any]:
    """One pool's per-replica figures: VM, boot disk (None and why when unknown), the two."""
    if price is None:
        return {}
    return {
        "replica_usd_per_h": price.replica_usd_per_h,
        "vm_usd_per_h": price.vm_usd_per_h,
        "boot_disk": f"{price.pool.boot_disk_size_gb} GB {price.pool.boot_disk_type}",
        "boot_disk_usd_per_h": price.disk_usd_per_h,
        "boot_disk_unknown_because": price.disk_unknown if price.disk_usd_per_h is None else None,
    }


def pool_documents(statuses: list[ResourceStatus]) -> list[dict[str, Any]]:
    return [_status_json(s) for s in statuses]


def pool_document(status: ResourceStatus, usage: WindowUsage | None = None) -> dict[str, Any]:
    found = _status_json(status)
    if usage is not None:
        found["window"] = _usage_json(usage)
    return found


def _usage_json(usage: WindowUsage) -> dict[str, Any]:
    """The stable keys of `vtx pool status`'s ``window``: replica-hours and the idle cost."""
    return {
        "start": usage.start.isoformat(),
        "end": usage.end.isoformat(),
        "up_h": usage.up_s / 3600,
        "jobs": usage.jobs,
        "jobs_not_counted": usage.unplaced,
        "pools": [
            {
                "id": p.pool.id,
                "busy_replica_h": p.busy_h,
                "idle_replica_h": p.idle_h,
                "provisioned_replica_h": p.provisioned_h,
                "idle_usd": p.idle_usd,
            }
            for p in usage.pools
        ],
        "idle_usd": usage.idle_usd,
        "idle_usd_unknown_because": usage.unknown_because if usage.idle_usd is None else None,
    }


def print_window_usage(out: Console, usage: WindowUsage) -> None:
    """Each pool's busy and idle replica-hours over the window, and what the idle ones cost."""
    span = duration(_seconds(usage))
    title = (
        f"the last {span}: up {duration(usage.up_s)}, {usage.jobs} job(s) ran on it; idle cost "
        + (
            money(usage.idle_usd)
            if usage.idle_usd is not None
            else f"unknown ({usage.unknown_because})"
        )
    )
    table = FitTable(title=title, title_justify="left")
    for column in ("pool", "busy replica-h", "idle replica-h", "idle cost"):
        table.add_column(column, overflow="fold")
    for p in usage.pools:
        table.add_row(p.pool.id, f"{p.busy_h:.2f}", f"{p.idle_h:.2f}", money(p.idle_usd))
    out.print(table)
    for job in usage.unplaced:
        out.print(
            f"not counted: {job} fits none of the resource's pools as they are now",
            markup=False,
            highlight=False,
        )


def _seconds(usage: WindowUsage) -> float:
    return (usage.end - usage.start).total_seconds()


def _used(status: ResourceStatus) -> tuple[int, int]:
    return sum(u.used for u in status.pools), sum(u.idle for u in status.pools)


def pool_list_table(statuses: list[ResourceStatus], where: str) -> FitTable:
    table = FitTable(title=f"persistent resources in {where}", title_justify="left")
    for column in ("resource", "region", "state", "pools", "used", "idle", "$/h", "runs"):
        table.add_column(column, overflow="fold")
    for status in statuses:
        used, idle = _used(status)
        table.add_row(
            status.resource_id,
            status.region,
            status.state,
            ", ".join(u.pool.id for u in status.pools),
            str(used),
            str(idle),
            per_hour_text(status.cost),
            str(len(status.runs)),
        )
    return table


def print_pool_status(out: Console, status: ResourceStatus) -> None:
    used, idle = _used(status)
    lines = [
        f"persistent resource {status.resource_id} ({status.name})",
        f"state: {status.state}" + (f" ({status.error})" if status.error else ""),
        f"replicas: {used} used, {idle} idle",
        f"cost: {per_hour_text(status.cost)}, billed busy or idle: jobs on it add nothing",
    ]
    for line in lines:
        out.print(line, markup=False, highlight=False)
    pools = FitTable(title="pools", title_justify="left")
    for column in ("pool", "machine", "used", "idle", "$/h per replica"):
        pools.add_column(column, overflow="fold")
    for usage in status.pools:
        price = status.cost.pool(usage.pool.id)
        pools.add_row(
            usage.pool.id,
            usage.pool.summary,
            str(usage.used),
            str(usage.idle),
            _replica_text(price) if price else "-",
        )
    out.print(pools)
    if not status.runs:
        out.print("runs on it: none", markup=False, highlight=False)
        return
    runs = FitTable(title="runs on it", title_justify="left")
    for column in ("run", "job", "state", "replicas"):
        runs.add_column(column, overflow="fold")
    for run in status.runs:
        runs.add_row(run.run_id or "-", run.job, run.state, str(run.replicas))
    out.print(runs)
