"""The plan stage: a checked, compiled job with its cost and the quota it needs, computed once.
What `vtx launch` shows before it asks, and what it submits."""

from __future__ import annotations

from dataclasses import dataclass

from jobs.core.catalog import load_catalog
from jobs.custom_jobs.compile import CompiledJob
from jobs.pricing.estimates import CostEstimate, estimate


@dataclass(frozen=True)
class Plan:
    job: CompiledJob
    cost: CostEstimate

    @property
    def quota(self) -> dict[str, int]:
        """Quota metric -> units the job needs in its region (checked before submitting)."""
        return self.cost.quota


def plan_job(job: CompiledJob) -> Plan:
    """Price a compiled job in its stack's region (a template's own region wins)."""
    region = job.template.region or job.stack.region
    return Plan(job, estimate(job.facts, region, load_catalog().for_stack(job.stack)))
