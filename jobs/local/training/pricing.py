"""What a local job costs per hour, for its budget: priced as vtx prices it (`jobs.training.cost`
on the job's REST form, in its own region, from the catalog with the local stand-in's tables,
which is what `Catalog.for_stack` gives vtx for the local stack), so the platform cancels a job
at the figure `vtx status` shows. Reads the catalog's files: kept out of the pure lifecycle."""

from __future__ import annotations

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
