"""The plan stage: a checked, compiled job with its cost and the quota it needs, computed once.
What `vtx launch` shows before it asks, and what it submits."""

from __future__ import annotations

from dataclasses import dataclass

from jobs.core.catalog import load_catalog
from jobs.custom_jobs.compile import CompiledJob
from jobs.pricing.estimates import CostEstimate, budget_warning, estimate
from jobs.pricing.warm_pools import WarmShare, warm_share


@dataclass(frozen=True)
class Plan:
    job: CompiledJob
    cost: CostEstimate
    share: WarmShare | None = None
    """On a persistent resource: the job's share of it, what the run's meter charges (the
    job itself adds nothing to the bill: ``cost`` says $0/h)."""

    @property
    def quota(self) -> dict[str, int]:
        """Quota metric -> units the job needs in its region (checked before submitting)."""
        return self.cost.quota

    def budget_warning(self, budget_usd: float | None) -> str | None:
        """What the run's budget means at what its meter charges: the job's price, or on a
        persistent resource its share (`jobs.pricing.estimates.budget_warning`)."""
        if self.share is None:
            return budget_warning(self.cost, budget_usd)
        return self.share.budget_warning(self.cost.timeout_s, budget_usd)


def plan_job(job: CompiledJob) -> Plan:
    """Price a compiled job in its stack's region (a template's own region wins)."""
    region = job.template.region or job.stack.region
    catalog = load_catalog().for_stack(job.stack)
    return Plan(job, estimate(job.facts, region, catalog), warm_share(job.facts, catalog))
