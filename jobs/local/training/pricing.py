"""What a local job costs per hour, for its budget: priced as vtx prices it (`jobs.training.cost`
on the job's REST form, in its own region, from the catalog with the local stand-in's tables,
which is what `Catalog.for_stack` gives vtx for the local stack), so the platform cancels a job
at the figure `vtx status` shows. Reads the catalog's files: kept out of the pure lifecycle."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime

from jobs.core.catalog import load_catalog
from jobs.core.contract import region_of
from jobs.local.training.lifecycle import JobPrice
from jobs.training.cost import estimate
from jobs.training.facts import facts_from_rest_job


def job_price(resource: dict) -> JobPrice:
    """The $/h ``resource`` (a CustomJob in REST form) pays with its strategy; unknown with the
    reason when the tables lack a figure (then no budget is enforced on a guess)."""
    catalog = load_catalog().with_stand_in_prices()
    cost = estimate(facts_from_rest_job(resource), region_of(resource["name"]) or None, catalog)
    table = cost.table.name if cost.table is not None else None
    return JobPrice(cost.usd_per_h, cost.price_kind, table, cost.unknown_because)


def spent(
    jobs: Iterable[dict],
    now: datetime | None = None,
    price: Callable[[dict], JobPrice] = job_price,
) -> tuple[float | None, str | None]:
    """What ``jobs`` (a run's other jobs, REST form) cost together, each at its own ``price``
    for the time it ran: to its end, or to ``now`` for one still running (none without
    ``now``); (None, why) once one that ran has no price."""
    total = 0.0
    for resource in jobs:
        ran_s = _ran_s(resource, now)
        if not ran_s:
            continue
        paid = price(resource)
        if paid.usd_per_h is None:
            return None, f"{resource['name']}: {paid.unknown_because}"
        total += paid.usd_per_h * ran_s / 3600
    return total, None


def _ran_s(resource: dict, now: datetime | None = None) -> float:
    """From ``startTime`` to ``endTime`` (or ``now``) as the platform stamps them
    (`jobs.core.formats`)."""
    start, end = resource.get("startTime"), resource.get("endTime")
    if not start:
        return 0.0
    until = datetime.fromisoformat(end) if end else now
    if until is None:
        return 0.0
    return max((until - datetime.fromisoformat(start)).total_seconds(), 0)
