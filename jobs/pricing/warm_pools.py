"""What a persistent resource costs, and what a job on it is charged: its share.

Google's overview of persistent resources (docs/vertex-facts.md, "Persistent resources"): a
resource is billed for as long as it is RUNNING, "regardless of whether there is a job running",
and "all jobs running on a persistent resource are not separately charged"; with autoscaling
only the provisioned VMs are billed, the minimum always. So the figure is the same busy or idle:
each pool's VMs at the on-demand training price (that this is the SKU a resource is billed at is
UNCONFIRMED) plus their boot disks (the pool's disk type and size, priced as a job's boot disks
are: `jobs.pricing.estimates`), its always-up VMs as the floor and its autoscaling maximum as the
ceiling.

A job on the resource adds nothing to the bill, but a run's meter (its budget, the controller's,
goodput's dollars) charges it its share (`share_of`): the replicas it holds of each pool x that
pool's per-replica price, so that a run's ``budget:`` still means something on a warm pool. A
share whose pool price is unknown is unknown, never $0.
"""

from __future__ import annotations

from dataclasses import dataclass

from jobs.core.catalog import HOURS_PER_MONTH, Catalog
from jobs.core.formats import fine_money, money
from jobs.core.stack import PersistentResourceOutputs, WarmPool
from jobs.custom_jobs.facts import JobFacts, PoolFacts
from jobs.custom_jobs.pool_fit import Placement, place
from jobs.pricing.estimates import estimate, meter_budget_warning


@dataclass(frozen=True)
class PoolPrice:
    pool: WarmPool
    vm_usd_per_h: float | None
    """One VM of the pool (machine + accelerators), on-demand; None when unknown."""
    disk_usd_per_h: float | None = None
    """One replica's boot disk(s) (a multi-host slice has one per host); None when unknown."""
    disk_unknown: str | None = None
    """Why ``disk_usd_per_h`` is unknown (the price table's words)."""

    @property
    def replica_usd_per_h(self) -> float | None:
        """One replica: its VM and its boot disk (the VM alone when the disk's figure is
        unknown: the price then says it excludes the disks); None when the VM's is unknown."""
        if self.vm_usd_per_h is None:
            return None
        return self.vm_usd_per_h + (self.disk_usd_per_h or 0.0)


@dataclass(frozen=True)
class WarmCost:
    resource: PersistentResourceOutputs
    pools: list[PoolPrice]
    unknown_because: str | None
    """Why a figure is unknown (the price table's words), None when every pool is priced."""

    @property
    def usd_per_h(self) -> float | None:
        """The floor: every pool's always-up VMs and their disks, billed busy or idle."""
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

    @property
    def disks_unknown_because(self) -> str | None:
        """Why some pool's boot disk figure is unknown (then the known price excludes it)."""
        return _disk_reasons(self.pools)

    @property
    def excludes_disks(self) -> bool:
        return self.usd_per_h is not None and self.disks_unknown_because is not None

    def pool(self, pool_id: str) -> PoolPrice | None:
        return next((p for p in self.pools if p.pool.id == pool_id), None)


def _disk_reasons(pools: list[PoolPrice]) -> str | None:
    reasons = [
        f"pool {p.pool.id!r} {p.pool.boot_disk_type}: {p.disk_unknown}"
        for p in pools
        if p.disk_usd_per_h is None and p.disk_unknown
    ]
    return "; ".join(reasons) or None


def _total(pairs: list[tuple[float | None, int]]) -> float | None:
    """The sum of price x count, or None when any price is unknown (a partial sum would read
    as the whole cost)."""
    if any(price is None for price, _ in pairs):
        return None
    return sum(price * count for price, count in pairs if price is not None)


def _pool_price(pool: WarmPool, region: str, catalog: Catalog) -> tuple[PoolPrice, str | None]:
    """One replica of ``pool`` priced as a one-replica on-demand job with the pool's machine
    and boot disk would be; and why its VM's figure is unknown."""
    one = PoolFacts(
        role="chief",
        paths={"pool": pool.id},
        machine=pool.machine_type,
        accelerator=pool.accelerator_type,
        accelerator_count=pool.accelerator_count if pool.accelerator_type else None,
        replicas=1,
        boot_disk_type=pool.boot_disk_type,
        boot_disk_size_gb=pool.boot_disk_size_gb,
    )
    priced = estimate(JobFacts(paths={}, region=region, pools=[one]), None, catalog)
    (cost,) = priced.pools
    price = PoolPrice(pool, priced.on_demand_usd_per_h, cost.disk_usd_per_h, cost.disk_unknown)
    unknown = priced.unknown_because if priced.on_demand_usd_per_h is None else None
    return price, unknown


def warm_cost(resource: PersistentResourceOutputs, catalog: Catalog) -> WarmCost:
    prices = []
    reasons = []
    for pool in resource.pools:
        price, unknown = _pool_price(pool, resource.region, catalog)
        prices.append(price)
        if unknown:
            reasons.append(f"pool {pool.id!r}: {unknown}")
    return WarmCost(resource, prices, "; ".join(reasons) or None)


# ---- a job's share ---------------------------------------------------------------------------


@dataclass(frozen=True)
class PoolShare:
    price: PoolPrice
    held: int
    """The replicas the job holds of the pool (all its worker pools placed on it)."""

    @property
    def usd_per_h(self) -> float | None:
        per = self.price.replica_usd_per_h
        return None if per is None else per * self.held


@dataclass(frozen=True)
class WarmShare:
    """What a run's meter charges a job on a persistent resource per hour: its share of the
    resource's pools (the bill itself is the resource's, busy or idle)."""

    resource_id: str
    pools: list[PoolShare]
    unknown_because: str | None = None
    """Why the share is unknown: the resource or its pools' prices are (never read as $0)."""
    undeclared: bool = False
    """The stack does not declare the resource: unknown before the job runs (a plan), read from
    Vertex by the run's meter after (`jobs.runs.warm_pools.metering_catalog`)."""

    def budget_warning(self, timeout_s: float, budget_usd: float | None) -> str | None:
        """What the run's budget means against this share over a job of ``timeout_s``
        (`jobs.pricing.estimates.budget_warning`'s words), or, for a resource the stack does not
        declare, that the meter prices it once the job runs."""
        if self.undeclared and budget_usd is not None:
            return (
                f"budget.max_cost_usd {fine_money(budget_usd)} is not checked here: persistent "
                f"resource {self.resource_id!r} is not among the stack's, so its price is read "
                "from Vertex once the job runs, and the run's meter holds the budget then"
            )
        return meter_budget_warning(
            self.usd_per_h, timeout_s, self.unknown_because, budget_usd, self.disks_unknown_because
        )

    @property
    def usd_per_h(self) -> float | None:
        if self.unknown_because is not None:
            return None
        return _total([(s.price.replica_usd_per_h, s.held) for s in self.pools])

    @property
    def disks_unknown_because(self) -> str | None:
        return _disk_reasons([s.price for s in self.pools])

    @property
    def text(self) -> str:
        """``share of warm pool warm-l4: 2 of 4 replicas, $3.00/h`` (each pool named when the
        job holds several), or why it is unknown."""
        head = f"share of warm pool {self.resource_id}"
        if self.unknown_because is not None:
            return f"{head}: unknown ({self.unknown_because})"
        held = [
            f"{s.held} of {s.price.pool.replica_count} replica"
            f"{'s' if s.price.pool.replica_count != 1 else ''}"
            for s in self.pools
        ]
        if len(self.pools) > 1:
            held = [f"pool {s.price.pool.id} {h}" for s, h in zip(self.pools, held, strict=True)]
        disks = self.disks_unknown_because
        figure = "unknown" if self.usd_per_h is None else f"{money(self.usd_per_h)}/h"
        known = disks and self.usd_per_h is not None
        excluding = f" excluding boot disks ({disks})" if known else ""
        return f"{head}: {', '.join(held)}, {figure}{excluding}"


def share_of(
    facts: JobFacts, resource_id: str, resource: PersistentResourceOutputs | None, catalog: Catalog
) -> WarmShare:
    """The share a job (its facts, as submitted) holds of ``resource`` and its price per hour;
    unknown when the resource is not known (not among the stack's), the job fits none of its
    pools, or a pool it holds has no price."""
    if resource is None:
        return WarmShare(
            resource_id,
            [],
            f"persistent resource {resource_id!r} is not among the stack's "
            "(vtx:platform.persistent_resources) and could not be read",
            undeclared=True,
        )
    placed = place(facts, resource_id, resource.pools, catalog)
    if not isinstance(placed, Placement):
        return WarmShare(resource_id, [], "; ".join(str(m) for m in placed))
    cost = warm_cost(resource, catalog)
    shares = [
        PoolShare(price, placed.replicas[price.pool.id])
        for price in cost.pools
        if placed.replicas.get(price.pool.id)
    ]
    unknown = [s for s in shares if s.price.replica_usd_per_h is None]
    return WarmShare(resource_id, shares, (cost.unknown_because or "no price") if unknown else None)


def warm_share(facts: JobFacts, catalog: Catalog) -> WarmShare | None:
    """The share a job on a persistent resource holds of it, priced from the stack's resources
    (`Catalog.for_stack`); None for a job on its own VMs."""
    rid = facts.persistent_resource
    if rid is None:
        return None
    return share_of(facts, rid, catalog.persistent_resources.get(rid), catalog)
