"""Cost and quota of a job: $/h per pool and in total, on-demand vs Spot, the cost at the timeout
cap, and the Vertex quota the job needs per metric and region. Read from the job's facts, so a
template (``vtx cost``) and a compiled job (the launch plan) are priced by the same code.

Prices come from a dated table in `jobs/catalog/prices/`; every estimate names the table and
says which figures are verified, derived, recalled or missing. Spot is an estimate unless the
table has a Spot price (see the table's header)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from jobs.catalog import Catalog, PriceTable, load_catalog, vertex_default_timeout_s
from jobs.facts import JobFacts, PoolFacts

PREEMPTIBLE_STRATEGIES = ("SPOT", "FLEX_START")


@dataclass
class PoolCost:
    role: str
    machine: str
    accelerator: str | None
    accelerator_count: int
    replicas: int
    on_demand_usd_per_h: float
    """All replicas of the pool; missing prices count as 0 and are listed in ``missing``."""
    spot_usd_per_h: float
    bases: set[str] = field(default_factory=set)


@dataclass
class CostEstimate:
    table: PriceTable
    table_matches_region: bool
    region: str
    strategy: str
    timeout_s: float
    pools: list[PoolCost]
    quota: dict[str, int]
    """Quota metric -> units needed (GPUs, TPU chips or vCPUs), all in ``region``."""
    missing: list[str]
    """Machine or accelerator names the table has no price for."""

    @property
    def on_demand_usd_per_h(self) -> float:
        return sum(p.on_demand_usd_per_h for p in self.pools)

    @property
    def spot_usd_per_h(self) -> float:
        return sum(p.spot_usd_per_h for p in self.pools)

    @property
    def usd_per_h(self) -> float:
        """What this job pays per hour with its strategy (Spot is an estimate)."""
        return self.spot_usd_per_h if self.strategy == "SPOT" else self.on_demand_usd_per_h

    @property
    def usd_at_timeout(self) -> float:
        return self.usd_per_h * self.timeout_s / 3600

    @property
    def bases(self) -> set[str]:
        return set().union(*(p.bases for p in self.pools)) if self.pools else set()


def _accelerator(pool: PoolFacts, cat: Catalog) -> tuple[str | None, int]:
    builtin = cat.builtin_accelerator(pool.machine)
    if pool.accelerator is None and builtin is not None:
        return builtin
    if pool.accelerator is None:
        return None, 0
    return pool.accelerator, pool.accelerator_count or (builtin[1] if builtin else 1)


def _pool_cost(pool: PoolFacts, table: PriceTable, cat: Catalog, missing: list[str]) -> PoolCost:
    machine = pool.machine or ""
    accelerator, count = _accelerator(pool, cat)
    bases: set[str] = set()
    vm_usd = 0.0
    machine_price = table.machines.get(machine)
    if machine_price is None or machine_price.usd_per_h is None:
        missing.append(machine)
    else:
        vm_usd += machine_price.usd_per_h
        bases.add(machine_price.basis)
    if accelerator is not None:
        acc_price = table.accelerators.get(accelerator)
        if acc_price is None or acc_price.usd_per_h is None:
            missing.append(accelerator)
        else:
            vm_usd += acc_price.usd_per_h * count
            bases.add(acc_price.basis)
    replicas = pool.replicas or 0
    on_demand = vm_usd * replicas
    return PoolCost(
        role=pool.role,
        machine=machine,
        accelerator=accelerator,
        accelerator_count=count,
        replicas=replicas,
        on_demand_usd_per_h=on_demand,
        spot_usd_per_h=on_demand * table.spot_estimate_factor,
        bases=bases,
    )


def quota_needed(job: JobFacts, cat: Catalog) -> dict[str, int]:
    """Quota metric -> units, for every pool at full size (Vertex checks it when the job starts)."""
    preemptible = job.strategy in PREEMPTIBLE_STRATEGIES
    needed: dict[str, int] = defaultdict(int)
    for pool in job.pools:
        machine = cat.machines.get(pool.machine or "")
        if machine is None:
            continue
        replicas = pool.replicas or 0
        needed[machine.cpu_quota_metric] += machine.vcpus * replicas
        accelerator, count = _accelerator(pool, cat)
        acc = cat.accelerators.get(accelerator or "")
        if acc is not None:
            needed[acc.metric(preemptible)] += count * replicas
    return dict(needed)


def estimate(job: JobFacts, region: str | None = None) -> CostEstimate:
    """Cost of a checked job in ``region`` (the job's, else the given stack region)."""
    cat = load_catalog()
    region = job.region or region or cat.price_tables[0].region
    table, matches = cat.price_table(region)
    missing: list[str] = []
    return CostEstimate(
        table=table,
        table_matches_region=matches,
        region=region,
        strategy=job.strategy or "STANDARD",
        timeout_s=job.timeout_s or vertex_default_timeout_s(),
        pools=[_pool_cost(pool, table, cat, missing) for pool in job.pools],
        quota=quota_needed(job, cat),
        missing=sorted(set(missing)),
    )
