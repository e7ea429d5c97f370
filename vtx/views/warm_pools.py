"""What `vtx cost` says of a job on a persistent resource: it adds nothing to the bill, and
what the resource itself costs per hour, busy or idle (jobs/pricing/warm_pools.py); the same
figure as `vtx review` shows it; and `vtx pool list|status` (a resource's state, pools, replicas
used and idle, $/h and the runs on it)."""

from __future__ import annotations

from typing import Any

from rich.console import Console

from infra.review.rows import HourlyCost
from jobs.core.catalog import load_catalog
from jobs.core.formats import money
from jobs.core.stack import PersistentResourceOutputs
from jobs.pricing.warm_pools import WarmCost, warm_cost
from jobs.runs.warm_pools import ResourceStatus
from vtx.views.fit_table import FitTable


def _per_h(value: float | None) -> str:
    return "unknown" if value is None else f"{money(value)}/h"


def per_hour_text(cost: WarmCost) -> str:
    """``$1.23/h (up to $2.46/h scaled out)``, or ``unknown: why``."""
    if cost.usd_per_h is None:
        return f"unknown: {cost.unknown_because or 'no price'}"
    ceiling = cost.max_usd_per_h
    scaling = f" (up to {_per_h(ceiling)} scaled out)" if ceiling != cost.usd_per_h else ""
    return f"{_per_h(cost.usd_per_h)}{scaling}"


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
        f"The resource costs {_per_h(cost.usd_per_h)}{scaling}, busy or idle, for as long as it "
        f"runs:"
        if cost.usd_per_h is not None
        else "The resource's price per hour is unknown (below); it is billed busy or idle alike:",
    ]
    for price in cost.pools:
        each = _per_h(price.replica_usd_per_h)
        lines.append(f"  pool {price.pool.id}: {price.pool.summary}, {each} per VM")
    if cost.unknown_because:
        lines.append(f"  unknown: {cost.unknown_because}")
    return lines


def print_warm_cost(console: Console, cost: WarmCost | None) -> None:
    for line in warm_cost_lines(cost) if cost else []:
        console.print(line, markup=False, highlight=False)


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
            }
            for usage in status.pools
        ],
        "cost": {
            "usd_per_h": cost.usd_per_h,
            "max_usd_per_h": cost.max_usd_per_h,
            "usd_unknown_because": cost.unknown_because,
            "billed": "busy or idle",
        },
        "runs": [
            {"run_id": run.run_id, "job": run.job, "state": run.state, "replicas": run.replicas}
            for run in status.runs
        ],
    }


def pool_documents(statuses: list[ResourceStatus]) -> list[dict[str, Any]]:
    return [_status_json(s) for s in statuses]


def pool_document(status: ResourceStatus) -> dict[str, Any]:
    return _status_json(status)


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
    for column in ("pool", "machine", "used", "idle"):
        pools.add_column(column, overflow="fold")
    for usage in status.pools:
        pools.add_row(usage.pool.id, usage.pool.summary, str(usage.used), str(usage.idle))
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
