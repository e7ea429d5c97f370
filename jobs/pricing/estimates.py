"""Cost and quota of a job: $/h per pool and in total, on-demand vs Spot, the cost at the timeout
cap, and the Vertex quota the job needs per metric and region. Read from the job's facts, so a
template (``vtx cost``) and a compiled job (the launch plan) are priced by the same code.

Prices come from the region's dated table in `jobs/core/catalog/prices/` (or the newer one `vtx
prices refresh` wrote); every estimate names the table and says which figures are verified, derived
or read from the billing catalog. A figure the table lacks is unknown (None), and so is every sum
that needs it: no other region's table, no flat Spot discount and no partial total stand in for
it.

Boot disks are a line of their own: each pool's boot disks (one per VM: replicas x hosts) x the
size x the table's GiB-hour rate of its type. A job's price includes them when every pool's
disk figure is known; when one is not, the price is the machines' and accelerators' alone and
says it excludes the disks (``excludes_disks``, ``disks_unknown_because``). Not unknown: most
disk types have no known SKU wording (docs/vertex-facts.md, "Disks"), so an unknown disk line
would make nearly every known price unknown; a price marked "excluding disks" keeps what is
known and says what is not."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

from jobs.core.catalog import (
    Catalog,
    DiskPrice,
    Price,
    PriceTable,
    load_catalog,
    vertex_default_timeout_s,
)
from jobs.core.durations import exact_duration
from jobs.core.formats import fine_money, money, usd_per_h
from jobs.custom_jobs.facts import JobFacts, PoolFacts, hosts, replica_accelerators
from jobs.pricing.billing_skus import DISK_WORDS
from jobs.quota.needed import quota_needed

CONSUMES_RESERVATION = ("ANY_RESERVATION", "SPECIFIC_RESERVATION")
"""Affinities under which a VM may run on a reservation: it is then billed the reservation's
Compute Engine price (committed-use discounts included) plus Vertex's training fee, in no table
here (https://cloud.google.com/vertex-ai/docs/training/use-reservations, "Billing")."""
DISK_PRICE_KINDS = ("on-demand", "FLEX_START")
"""The prices whose boot disks the table's disk figure prices: the billing report bills an
on-demand and a FLEX_START job's pd-ssd boot disk at the same Vertex SKU (docs/vertex-facts.md,
"Disks"). No source shows which SKU bills a Spot or reservation job's boot disk."""
DISK_UNKNOWN_FOR_KIND = (
    "no source shows which SKU bills a {kind} job's boot disk (the one disk SKU known bills "
    "on-demand and FLEX_START jobs')"
)
DEFAULT_REGION = "us-central1"
"""Where a job with no region (no template region, no stack) is priced: Vertex's SDK sends jobs
there when no location is given. The estimate says it assumed it (``region_assumed``)."""


@dataclass(frozen=True)
class _Sum:
    """A sum of priced parts: None as soon as one part has no price."""

    usd_per_h: float | None
    bases: frozenset[str]
    missing: tuple[str, ...]


def _add(parts: list[tuple[str, int, float | None, str | None]]) -> _Sum:
    """(name, units, $/h per unit or None, basis) -> the total, its bases and the unpriced names."""
    missing = tuple(name for name, _, usd, _ in parts if usd is None)
    total = None if missing else sum(units * (usd or 0.0) for _, units, usd, _ in parts)
    return _Sum(total, frozenset(b for *_, b in parts if b), missing)


@dataclass
class PoolCost:
    role: str
    machine: str
    accelerator: str | None
    accelerator_count: int
    replicas: int
    on_demand_usd_per_h: float | None
    """All replicas of the pool; None when the machine's or accelerator's price is unknown."""
    spot_usd_per_h: float | None
    """As published per SKU; None when unknown (never on-demand times a discount)."""
    flex_start_usd_per_h: float | None = None
    """FLEX_START's (Compute Engine's DWS hour plus Vertex's fee, from refreshed tables); None
    when unknown (never the on-demand or Spot figure)."""
    bases: set[str] = field(default_factory=set)
    spot_bases: set[str] = field(default_factory=set)
    reservation: str | None = None
    """ANY_RESERVATION or SPECIFIC_RESERVATION when the pool may run on a reservation."""
    disk_type: str = ""
    disk_size_gb: int = 0
    """Vertex's ``bootDiskSizeGb``, billed as that many GiB (`disk_usd_per_h`)."""
    disks: int = 0
    """Boot disks: one per VM, replicas x hosts."""
    disk_usd_per_h: float | None = None
    """All ``disks`` at the table's figure for ``disk_type`` (on-demand and FLEX_START jobs);
    None when the table has none (``disk_unknown``)."""
    disk_unknown: str | None = None
    disk_price: DiskPrice | None = None
    local_ssd_gib: int = 0
    """The Local SSD each VM comes with (machines.yaml `local_ssd_gib`); 0: none recorded.
    Its price is a line of its own, unknown (`CostEstimate.local_ssd_unknown_because`)."""


@dataclass(frozen=True)
class PricedSku:
    """A billing catalog SKU behind a figure an estimate's price uses (refreshed tables)."""

    name: str
    """The machine or accelerator it prices."""
    kind: str
    """The price kind: on-demand, Spot or FLEX_START."""
    sku: str
    """Its id; FLEX_START's and composed figures name several, joined by "+"."""
    description: str | None
    fetched_at: str | None


PERSISTENT_RESOURCE = "persistent resource"
"""The price kind of a job on a persistent resource: nothing of its own (see CostEstimate)."""
SKU_FIELDS: dict[str, tuple[str, str]] = {
    "on-demand": ("sku", "sku_description"),
    "Spot": ("spot_sku", "spot_sku_description"),
    "FLEX_START": ("flex_start_sku", "flex_start_sku_description"),
}
"""A price kind -> the `Price` fields naming its SKU and description."""


@dataclass
class CostEstimate:
    table: PriceTable | None
    """The region's price table; None when the catalog has none for it (every price unknown)."""
    region: str
    strategy: str
    timeout_s: float
    pools: list[PoolCost]
    quota: dict[str, int]
    """Quota metric -> units needed (GPUs, TPU chips or vCPUs), all in ``region``."""
    missing: list[str]
    """Machine or accelerator names with no on-demand price in ``region``."""
    spot_missing: list[str] = field(default_factory=list)
    """Machine or accelerator names with no Spot price in ``region``."""
    flex_start_missing: list[str] = field(default_factory=list)
    """Machine or accelerator names with no FLEX_START price in ``region``."""
    region_assumed: bool = False
    """True when neither the job nor the caller named a region (priced in DEFAULT_REGION)."""
    persistent_resource: str | None = None
    """The persistent resource the job runs on: Google bills the resource, busy or idle, and
    "all jobs running on a persistent resource are not separately charged"
    (docs/vertex-facts.md, "Persistent resources"), so the job pays nothing of its own."""

    @property
    def on_demand_usd_per_h(self) -> float | None:
        return _total(p.on_demand_usd_per_h for p in self.pools)

    @property
    def spot_usd_per_h(self) -> float | None:
        return _total(p.spot_usd_per_h for p in self.pools)

    @property
    def flex_start_usd_per_h(self) -> float | None:
        return _total(p.flex_start_usd_per_h for p in self.pools)

    def disk_usd_per_h_for(self, kind: str) -> float | None:
        """Every pool's boot disks at ``kind``'s price; None when a pool's is unknown. On a
        persistent resource the disks are the resource's, billed with it: none of the job's."""
        if kind == PERSISTENT_RESOURCE:
            return 0.0
        if kind not in DISK_PRICE_KINDS:
            return None
        return _total(p.disk_usd_per_h for p in self.pools)

    def disks_unknown_for(self, kind: str) -> str | None:
        """Why ``kind``'s boot disk figure is unknown; None when it is known."""
        if kind == PERSISTENT_RESOURCE:
            return None
        if kind not in DISK_PRICE_KINDS:
            return DISK_UNKNOWN_FOR_KIND.format(kind=kind)
        reasons = {f"{p.disk_type}: {p.disk_unknown}" for p in self.pools if p.disk_unknown}
        return "; ".join(sorted(reasons)) or None

    def total_for(self, kind: str) -> tuple[float | None, bool]:
        """``kind``'s price of the whole job, and whether it excludes the boot disks (their
        figure unknown): None when a machine's or accelerator's figure is unknown. A job on a
        persistent resource pays nothing of its own."""
        if kind == PERSISTENT_RESOURCE:
            return 0.0, False
        compute = {
            "Spot": self.spot_usd_per_h,
            "on-demand": self.on_demand_usd_per_h,
            "FLEX_START": self.flex_start_usd_per_h,
        }.get(kind)
        disks = self.disk_usd_per_h_for(kind)
        if compute is None:
            return None, disks is None
        return (compute if disks is None else compute + disks), disks is None

    @property
    def disk_usd_per_h(self) -> float | None:
        """The boot disks at this job's price; None when unknown (`disks_unknown_because`)."""
        return self.disk_usd_per_h_for(self.price_kind)

    @property
    def disks_unknown_because(self) -> str | None:
        return self.disks_unknown_for(self.price_kind)

    @property
    def local_ssd_pools(self) -> list[PoolCost]:
        """The pools whose machines come with Local SSD (machines.yaml `local_ssd_gib`)."""
        return [p for p in self.pools if p.local_ssd_gib]

    @property
    def local_ssd_unknown_because(self) -> str | None:
        """Why the Local SSD's price is unknown (no figure of it is known for any strategy, so
        it is never in the price); None when no pool has Local SSD."""
        if not self.local_ssd_pools:
            return None
        return LOCAL_SSD_FLEX_START_UNKNOWN if self.strategy == "FLEX_START" else LOCAL_SSD_UNKNOWN

    @property
    def excludes_disks(self) -> bool:
        """The known price leaves the boot disks out: their figure is unknown."""
        return self.usd_per_h is not None and self.disk_usd_per_h is None

    @property
    def reservation_pools(self) -> list[PoolCost]:
        return [p for p in self.pools if p.reservation is not None]

    @property
    def price_kind(self) -> str:
        """Which price this job pays: "Spot", "on-demand", "FLEX_START" (Dynamic Workload
        Scheduler: Compute Engine's DWS hour plus Vertex's fee, in refreshed tables), or one in
        no table: "reservation" (a pool may run on a reservation: its Compute Engine price plus
        Vertex's fee, or on-demand for ANY_RESERVATION when no reservation matches), or
        "persistent resource" (nothing of its own: the resource is billed, jobs/pricing/
        warm_pools.py)."""
        if self.persistent_resource is not None:
            return PERSISTENT_RESOURCE
        if self.strategy == "FLEX_START":
            return "FLEX_START"
        if self.reservation_pools:
            return "reservation"
        return "Spot" if self.strategy == "SPOT" else "on-demand"

    @property
    def usd_per_h(self) -> float | None:
        """What this job pays per hour with its strategy, boot disks included when their
        figures are known (else `excludes_disks`); None when unknown (a machine's or
        accelerator's figure the table lacks; reservations' prices are in no table)."""
        return self.total_for(self.price_kind)[0]

    @property
    def usd_at_timeout(self) -> float | None:
        per_h = self.usd_per_h
        return None if per_h is None else per_h * self.timeout_s / 3600

    @property
    def unpriced(self) -> list[str]:
        """The names whose missing price makes ``usd_per_h`` unknown (empty for reservations,
        whose prices no table has)."""
        return {
            "Spot": self.spot_missing,
            "on-demand": self.missing,
            "FLEX_START": self.flex_start_missing,
        }.get(self.price_kind, [])

    @property
    def unknown_because(self) -> str | None:
        """Why ``usd_per_h`` is unknown, in words; None when it is known."""
        if self.usd_per_h is not None:
            return None
        if self.table is None:
            return f"no price table for {self.region} (run `vtx prices refresh`)"
        if self.unpriced:
            return f"no {self.price_kind} price for {', '.join(self.unpriced)} in {self.table.name}"
        return (
            "reservation prices are in no table: Vertex bills a reservation's VMs at the Compute "
            "Engine price the project pays for it (committed-use discounts included), no list "
            "price"
        )

    @property
    def skus(self) -> list[PricedSku]:
        """The SKU behind each figure this job's price uses, once each, pools in order (the
        on-demand ones for a reservation's price, which no SKU gives); none from a shipped
        table; none on a persistent resource (the job pays none)."""
        if self.price_kind == PERSISTENT_RESOURCE:
            return []
        kind = self.price_kind if self.price_kind in SKU_FIELDS else "on-demand"
        sku_field, description_field = SKU_FIELDS[kind]
        found: dict[tuple[str, str], PricedSku] = {}
        for pool in self.pools:
            for name, prices in (
                (pool.machine, self.table.machines if self.table else {}),
                (pool.accelerator, self.table.accelerators if self.table else {}),
            ):
                price = prices.get(name or "")
                sku = getattr(price, sku_field) if price else None
                if price is None or sku is None or name is None:
                    continue
                description = getattr(price, description_field)
                found[(name, sku)] = PricedSku(name, kind, sku, description, price.fetched_at)
        for pool in self.pools if self.disk_usd_per_h is not None else ():
            disk = pool.disk_price
            if disk is not None and disk.sku is not None:
                name = f"{pool.disk_type} boot disk"
                found[(name, disk.sku)] = PricedSku(
                    name, kind, disk.sku, disk.sku_description, disk.fetched_at
                )
        return list(found.values())

    @property
    def bases(self) -> set[str]:
        return set().union(*(p.bases for p in self.pools)) if self.pools else set()

    @property
    def spot_bases(self) -> set[str]:
        return set().union(*(p.spot_bases for p in self.pools)) if self.pools else set()


def _total(values: Iterable[float | None]) -> float | None:
    """The sum, or None when any value is None: a partial sum would read as the whole cost."""
    figures = list(values)
    return None if any(v is None for v in figures) else sum(v or 0.0 for v in figures)


Figure = Literal["on-demand", "spot", "flex-start"]
_FIGURES: dict[Figure, tuple[str, str]] = {
    "on-demand": ("usd_per_h", "basis"),
    "spot": ("spot_usd_per_h", "spot_basis"),
    "flex-start": ("flex_start_usd_per_h", "flex_start_basis"),
}
"""Each figure's (price, basis) fields on a table's `Price`."""


def _parts(
    pool: PoolFacts, table: PriceTable | None, cat: Catalog, figure: Figure
) -> list[tuple[str, int, float | None, str | None]]:
    """One replica's priced parts: its machines (a multi-host TPU slice's every host), then its
    accelerators (Vertex bills them apart)."""
    machine = pool.machine or ""
    accelerator, count = replica_accelerators(pool, cat)
    empty = Price()
    vms = hosts(pool, cat)
    prices = [(machine, vms, (table.machines if table else {}).get(machine, empty))]
    if accelerator is not None:
        prices.append(
            (accelerator, count, (table.accelerators if table else {}).get(accelerator, empty))
        )
    usd, basis = _FIGURES[figure]
    return [(name, n, getattr(p, usd), getattr(p, basis)) for name, n, p in prices]


def _disk(
    pool: PoolFacts, table: PriceTable | None, cat: Catalog
) -> tuple[str, int, DiskPrice | None, str | None]:
    """The pool's boot disk type and size (Vertex's defaults where the job gives none: the
    machine's first boot disk type, limits.yaml's size), its table figure, and why there is
    none."""
    disk_type = pool.boot_disk_type or cat.boot_disk_types(pool.machine)[0]
    size = pool.boot_disk_size_gb or cat.limits.boot_disk_size_gb.default or 0
    if table is None:
        return disk_type, size, None, "no price table"
    price = table.disks.get(disk_type)
    if price is None or price.usd_per_gib_h is None:
        known = (
            "`vtx prices refresh` reads it from Vertex's disk SKU"
            if disk_type in DISK_WORDS
            else f"no real SKU wording is known for {disk_type} boot disks"
        )
        return disk_type, size, None, f"no figure in {table.name} ({known})"
    return disk_type, size, price, None


def _pool_cost(pool: PoolFacts, table: PriceTable | None, cat: Catalog) -> PoolCost:
    accelerator, count = replica_accelerators(pool, cat)
    replicas = pool.replicas or 0
    disk_type, disk_size, disk_price, disk_unknown = _disk(pool, table, cat)
    disks = replicas * hosts(pool, cat)
    # bootDiskSizeGb is billed as that many GiB: the billing report in docs/vertex-facts.md
    # ("Disks") bills a 2,000 boot disk as 2,000 GiB at the disk SKU's GiB-month rate / 730.
    per_disk = disk_price.usd_per_gib_h if disk_price else None
    on_demand = _add(_parts(pool, table, cat, "on-demand"))
    spot = _add(_parts(pool, table, cat, "spot"))
    flex_start = _add(_parts(pool, table, cat, "flex-start"))
    return PoolCost(
        role=pool.role,
        machine=pool.machine or "",
        accelerator=accelerator,
        accelerator_count=count,
        replicas=replicas,
        on_demand_usd_per_h=_times(on_demand.usd_per_h, replicas),
        spot_usd_per_h=_times(spot.usd_per_h, replicas),
        flex_start_usd_per_h=_times(flex_start.usd_per_h, replicas),
        bases=set(on_demand.bases),
        spot_bases=set(spot.bases),
        reservation=pool.reservation_affinity
        if pool.reservation_affinity in CONSUMES_RESERVATION
        else None,
        disk_type=disk_type,
        disk_size_gb=disk_size,
        disks=disks,
        disk_usd_per_h=None if per_disk is None else per_disk * disk_size * disks,
        disk_unknown=disk_unknown,
        disk_price=disk_price,
        local_ssd_gib=_local_ssd_gib(pool, cat),
    )


def _local_ssd_gib(pool: PoolFacts, cat: Catalog) -> int:
    machine = cat.machines.get(pool.machine or "")
    return (machine.local_ssd_gib or 0) if machine is not None else 0


LOCAL_SSD_UNKNOWN = (
    "no Vertex Local SSD SKU wording is known: the one billing report read lists no Local SSD "
    "line for an on-demand job (whether the machine's price covers it is UNCONFIRMED)"
)
"""Why an on-demand, Spot or reservation pool's Local SSD is unknown (docs/vertex-facts.md,
"Disks")."""
LOCAL_SSD_FLEX_START_UNKNOWN = (
    "FLEX_START bills it on Compute Engine's DWS Local SSD SKU ('DWS Defined Duration SSD "
    "backed Local Storage'), which no table holds (`vtx prices refresh` does not read it)"
)


def _times(usd_per_h: float | None, replicas: int) -> float | None:
    return None if usd_per_h is None else usd_per_h * replicas


def _unpriced(job: JobFacts, table: PriceTable | None, cat: Catalog, figure: Figure) -> list[str]:
    names = {n for pool in job.pools for n in _add(_parts(pool, table, cat, figure)).missing}
    return sorted(names)


def estimate(
    job: JobFacts, region: str | None = None, catalog: Catalog | None = None
) -> CostEstimate:
    """Cost of a checked job in ``region`` (the job's, else the given stack region, else
    DEFAULT_REGION), priced from that region's own table only."""
    cat = catalog or load_catalog()
    priced_in = job.region or region
    table = cat.price_table(priced_in or DEFAULT_REGION)
    return CostEstimate(
        table=table,
        region=priced_in or DEFAULT_REGION,
        strategy=job.strategy or "STANDARD",
        timeout_s=job.timeout_s or vertex_default_timeout_s(),
        pools=[_pool_cost(pool, table, cat) for pool in job.pools],
        quota=quota_needed(job, cat),
        missing=_unpriced(job, table, cat, "on-demand"),
        spot_missing=_unpriced(job, table, cat, "spot"),
        flex_start_missing=_unpriced(job, table, cat, "flex-start"),
        region_assumed=priced_in is None,
        persistent_resource=job.persistent_resource,
    )


EXCLUDES_DISKS = "excl. boot disks"
"""What a known figure that leaves the boot disks out (their price unknown) says after it."""


def disks_note(excludes_disks: bool) -> str:
    """`EXCLUDES_DISKS` after a figure that leaves the boot disks out, else nothing: one
    wording for `vtx cost`, the ladder, the run meter and goodput's dollars."""
    return f" {EXCLUDES_DISKS}" if excludes_disks else ""


def budget_warning(cost: CostEstimate, budget_usd: float | None) -> str | None:
    """What `vtx cost` and the launch plan say of a run's budget (``budget.max_cost_usd``):
    nothing when the cost at the timeout cap fits it; else that cost and the timeout that would
    fit; and, with no price, that no one enforces it (never on a made-up figure)."""
    return meter_budget_warning(
        cost.usd_per_h,
        cost.timeout_s,
        cost.unknown_because,
        budget_usd,
        cost.disks_unknown_because if cost.excludes_disks else None,
    )


def meter_budget_warning(
    per_h: float | None,
    timeout_s: float,
    unknown_because: str | None,
    budget_usd: float | None,
    disks_unknown_because: str | None = None,
) -> str | None:
    """`budget_warning` for a meter of ``per_h`` (a job's price, or its share of a persistent
    resource: `jobs.pricing.warm_pools.WarmShare`) over a job of ``timeout_s``;
    ``disks_unknown_because`` when ``per_h`` leaves out boot disks whose price is unknown."""
    if budget_usd is None:
        return None
    budget = f"budget.max_cost_usd {fine_money(budget_usd)}"
    capped = None if per_h is None else per_h * timeout_s / 3600
    if per_h is None or capped is None:
        return (
            f"{budget} is not enforced: {unknown_because}; neither the local platform nor "
            "`vtx launch --follow` stops a run on a made-up price"
        )
    if capped <= budget_usd:
        return None
    fit_s = budget_usd / per_h * 3600
    fit_s = fit_s // 60 * 60 if fit_s >= 60 else float(int(fit_s))
    fits = (
        f"scheduling.timeout: {exact_duration(fit_s)} fits it"
        if fit_s >= 1
        else "no timeout fits it: raise the budget"
    )
    undercount = (
        f"; that figure undercounts by the boot disks (their price is unknown: "
        f"{disks_unknown_because}), and so does the meter"
        if disks_unknown_because is not None
        else ""
    )
    return (
        f"{budget} is under the cost at the timeout cap ({exact_duration(timeout_s)}): "
        f"{money(capped)} at {usd_per_h(per_h)}{disks_note(disks_unknown_because is not None)}"
        f"{undercount}; the run is cancelled once its meter crosses the budget; {fits}"
    )


@dataclass(frozen=True)
class StudyCost:
    """A hyperparameter tuning study: ``max_trials`` runs of one trial job, ``parallel_trials``
    at a time. Every trial is the same job, so it costs the trial's price times the trials; a
    figure the trial lacks is unknown for the study too."""

    trial: CostEstimate
    max_trials: int
    parallel_trials: int

    @property
    def waves(self) -> int:
        """Rounds of parallel trials: the study's wall time is about this many trial times."""
        return math.ceil(self.max_trials / self.parallel_trials)

    @property
    def usd_per_h(self) -> float | None:
        """While ``parallel_trials`` trials run at once."""
        per_h = self.trial.usd_per_h
        return None if per_h is None else per_h * self.parallel_trials

    @property
    def usd_at_timeout(self) -> float | None:
        """Every trial running to its timeout cap."""
        cap = self.trial.usd_at_timeout
        return None if cap is None else cap * self.max_trials

    def usd_for(self, trial_hours: float) -> float | None:
        """Every trial running ``trial_hours``."""
        per_h = self.trial.usd_per_h
        return None if per_h is None else per_h * trial_hours * self.max_trials

    def wall_hours(self, trial_hours: float) -> float:
        return self.waves * trial_hours

    @property
    def quota(self) -> dict[str, int]:
        """What the trials running at once need together."""
        return {m: n * self.parallel_trials for m, n in self.trial.quota.items()}
