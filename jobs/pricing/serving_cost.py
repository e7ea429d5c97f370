"""The price of a deployed model: serving (online prediction) $/h per replica, and what its
replica range costs per hour at the floor (min replicas: what it costs idle, since Vertex bills
every running node whether or not it serves) and at the ceiling (max replicas: autoscaled out).

Prices come from the region's dated serving table in `jobs/core/catalog/prices/` (``kind:
serving``),
never from a training table nor another region's: Vertex lists prediction rates apart from
training rates. A figure the table lacks is unknown (None), and so is every product that needs
it; ``reason`` says which figure and which table.

A replica's boot disk is in no figure: no real SKU wording is known for a serving boot disk, nor
which disk type and size Vertex gives a deployed model's nodes (docs/vertex-facts.md, "Disks").
Its line says so (`SERVING_DISK_UNKNOWN`) and the prices exclude it rather than turn unknown:
every serving price would otherwise be unknown for want of a figure no source gives."""

from __future__ import annotations

from dataclasses import dataclass

from jobs.core.catalog import HOURS_PER_MONTH, Catalog, Price, PriceTable

SERVING_DISK_UNKNOWN = (
    "no real SKU wording is known for a deployed model's boot disk, nor which disk type and size "
    "its nodes get (the billing report of an a3-highgpu-1g deployment lists no disk SKU)"
)


@dataclass(frozen=True)
class ServingCost:
    """What one deployment costs per hour, or why that is unknown."""

    region: str
    table: PriceTable | None
    replica_usd_per_h: float | None
    """One replica: the machine plus its accelerators; None when a figure is missing."""
    min_replicas: int
    max_replicas: int
    missing: tuple[str, ...] = ()
    """The machine or accelerator names the table has no figure for."""
    parts: tuple[tuple[str, int, Price], ...] = ()
    """(name, count, price) of what one replica is billed for: the machine, its accelerators."""

    disk_usd_per_h: None = None
    """A replica's boot disk: unknown (`SERVING_DISK_UNKNOWN`); the prices exclude it."""
    disk_unknown_because: str = SERVING_DISK_UNKNOWN

    @property
    def floor_usd_per_h(self) -> float | None:
        """At ``min_replicas``: what the deployment costs while it stands idle."""
        return _times(self.replica_usd_per_h, self.min_replicas)

    @property
    def ceiling_usd_per_h(self) -> float | None:
        """At ``max_replicas``: the most autoscaling can run up."""
        return _times(self.replica_usd_per_h, self.max_replicas)

    @property
    def floor_usd_per_month(self) -> float | None:
        return _times(self.floor_usd_per_h, HOURS_PER_MONTH)

    @property
    def ceiling_usd_per_month(self) -> float | None:
        return _times(self.ceiling_usd_per_h, HOURS_PER_MONTH)

    @property
    def skus(self) -> list[tuple[str, str, str | None, str | None]]:
        """(name, SKU id, its description, when it was fetched) behind each figure of a
        replica's price, for figures a refreshed table names a SKU for."""
        return [
            (name, price.sku, price.sku_description, price.fetched_at)
            for name, _, price in self.parts
            if price.sku is not None
        ]

    @property
    def reason(self) -> str | None:
        """Why the price is unknown; None when it is known."""
        if self.table is None:
            return f"no serving price table for {self.region} in jobs/core/catalog/prices/"
        if self.missing:
            return (
                f"no serving price for {', '.join(self.missing)} in {self.table.name} "
                f"(as of {self.table.as_of})"
            )
        return None


def _times(usd_per_h: float | None, replicas: int) -> float | None:
    return None if usd_per_h is None else usd_per_h * replicas


def serving_cost(
    cat: Catalog,
    region: str,
    machine: str,
    accelerator: str | None,
    accelerator_count: int,
    min_replicas: int,
    max_replicas: int,
) -> ServingCost:
    """Price a deployment from ``region``'s serving table: a replica is its machine plus, per
    accelerator, the accelerator's figure (Vertex bills the two apart, as for training)."""
    table = cat.serving_price_table(region)
    empty = Price()
    parts = [(machine, 1, (table.machines if table else {}).get(machine, empty))]
    if accelerator is not None and accelerator_count:
        accelerators = table.accelerators if table else {}
        parts.append((accelerator, accelerator_count, accelerators.get(accelerator, empty)))
    missing = tuple(name for name, _, price in parts if price.usd_per_h is None)
    replica = None if missing else sum(n * (p.usd_per_h or 0.0) for _, n, p in parts)
    return ServingCost(region, table, replica, min_replicas, max_replicas, missing, tuple(parts))
