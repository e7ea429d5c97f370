"""What a local job costs per hour, for its budget: priced as vtx prices it (`jobs.training.cost`
on the job's REST form, in its own region, from the catalog with the local stand-in's tables,
which is what `Catalog.for_stack` gives vtx for the local stack), so the platform cancels a job
at the figure `vtx status` shows. Reads the catalog's files: kept out of the pure lifecycle."""

from __future__ import annotations

from collections.abc import Iterable
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


def spent(attempts: Iterable[dict]) -> tuple[float | None, str | None]:
    """What ``attempts`` (a run's ended jobs, REST form) cost together, each at its own price
    for the time it ran; (None, why) once one that ran has no price."""
    total = 0.0
    for resource in attempts:
        ran_s = _ran_s(resource)
        if not ran_s:
            continue
        price = job_price(resource)
        if price.usd_per_h is None:
            return None, f"{resource['name']}: {price.unknown_because}"
        total += price.usd_per_h * ran_s / 3600
    return total, None


def _ran_s(resource: dict) -> float:
    """From ``startTime`` to ``endTime`` as the platform stamps them (`jobs.core.formats`)."""
    start, end = resource.get("startTime"), resource.get("endTime")
    if not start or not end:
        return 0.0
    return max((datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds(), 0)
