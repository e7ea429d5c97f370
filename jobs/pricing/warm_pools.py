"""What a persistent resource costs, and what a job on it adds (nothing).

Google's overview of persistent resources (docs/vertex-facts.md, "Persistent resources"): a
resource is billed for as long as it is RUNNING, "regardless of whether there is a job running",
and "all jobs running on a persistent resource are not separately charged"; with autoscaling
only the provisioned VMs are billed, the minimum always. So the figure is the same busy or idle:
each pool's VMs at the on-demand training price (that this is the SKU a resource is billed at is
UNCONFIRMED), its always-up VMs as the floor and its autoscaling maximum as the ceiling.
"""

from __future__ import annotations

from dataclasses import dataclass

from jobs.core.catalog import HOURS_PER_MONTH, Catalog
from jobs.core.stack import PersistentResourceOutputs, WarmPool
from jobs.custom_jobs.facts import JobFacts, PoolFacts
from jobs.pricing.estimates import estimate


@dataclass(frozen=True)
class PoolPrice:
    pool: WarmPool
    replica_usd_per_h: float | None
    """One VM of the pool (machine + accelerators), on-demand; None when unknown."""


@dataclass(frozen=True)
class WarmCost:
    resource: PersistentResourceOutputs
    pools: list[PoolPrice]
    unknown_because: str | None
    """Why a figure is unknown (the price table's words), None when every pool is priced."""

    @property
    def usd_per_h(self) -> float | None:
        """The floor: every pool's always-up VMs, billed busy or idle."""
        return _total([(p.replica_usd_per_h, p.pool.replica_count) for p in self.pools])

    @property
    def usd_per_month(self) -> float | None:
        """A month of the floor: what the resource costs if no job ever runs on it (a team's
        budget counts it, through its ``vtx-team`` label)."""
        return None if self.usd_per_h is None else self.usd_per_h * HOURS_PER_MONTH

    @property
    def max_usd_per_h(self) -> float | None:
        """The ceiling: every pool at its autoscaling maximum."""
        return _total([(p.replica_usd_per_h, p.pool.replicas_max) for p in self.pools])


def _total(pairs: list[tuple[float | None, int]]) -> float | None:
    """The sum of price x count, or None when any price is unknown (a partial sum would read
    as the whole cost)."""
    if any(price is None for price, _ in pairs):
        return None
    return sum(price * count for price, count in pairs if price is not None)


def warm_cost(resource: PersistentResourceOutputs, catalog: Catalog) -> WarmCost:
    prices = []
    reasons = []
    for pool in resource.pools:
        one = PoolFacts(
            role="chief",
            paths={"pool": pool.id},
            machine=pool.machine_type,
            accelerator=pool.accelerator_type,
            accelerator_count=pool.accelerator_count if pool.accelerator_type else None,
            replicas=1,
        )
        priced = estimate(JobFacts(paths={}, region=resource.region, pools=[one]), None, catalog)
        prices.append(PoolPrice(pool, priced.on_demand_usd_per_h))
        if priced.on_demand_usd_per_h is None and priced.unknown_because:
            reasons.append(f"pool {pool.id!r}: {priced.unknown_because}")
    return WarmCost(resource, prices, "; ".join(reasons) or None)
