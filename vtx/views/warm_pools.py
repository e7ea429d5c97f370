"""What `vtx cost` says of a job on a persistent resource: it adds nothing to the bill, and
what the resource itself costs per hour, busy or idle (jobs/training/warm_cost.py); the same
figure as `vtx review` and `vtx pool` show it."""

from __future__ import annotations

from rich.console import Console

from infra.review.rows import HourlyCost
from jobs.core.catalog import load_catalog
from jobs.core.formats import money
from jobs.core.stack import PersistentResourceOutputs
from jobs.training.warm_cost import WarmCost, warm_cost


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
    return HourlyCost(cost.usd_per_h, cost.max_usd_per_h, per_hour_text(cost))


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
