"""A strict matcher from Cloud Billing Catalog SKUs to the catalog's price figures (pure).

A SKU (``services.skus.list``: ``skuId``, ``description``, ``category.usageType``,
``serviceRegions``, ``pricingInfo[].pricingExpression.{usageUnit, tieredRates[].unitPrice}``)
becomes, for each region it lists, one claim on one figure: (region, training or serving,
machine or accelerator, name, on-demand or Spot). A figure claimed by exactly one SKU with one
hourly rate in the table's currency is known; claimed by none, by several, or by one that cannot
be read as such a rate, it stays unknown and says why. Nothing is borrowed: a region's figure
comes only from a SKU whose ``serviceRegions`` lists that region, a Spot figure only from a
``Preemptible`` SKU, a serving figure only from a prediction SKU.

What the descriptions look like, and what of it is confirmed, is in docs/vertex-facts.md
("Billing catalog"). The matcher reads words, not a fixed sentence: the kind ("Training" or
"Prediction"), one catalog machine name (``n1-standard-4``), one GPU named as Compute Engine's
SKUs name it ("Nvidia Tesla T4 GPU") or one machine family's vCPU or RAM ("N1 Predefined
Instance Core"/"Ram", added up per machine), and nothing that marks another price (a
commitment, a sole-tenant node, a workstation licence, a reservation)."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Literal

from jobs.core.catalog import Catalog, Price, PriceTable

Kind = Literal["training", "serving"]
Item = Literal["machine", "accelerator"]
Part = Literal["machine", "accelerator", "vcpu", "ram"]
"""What a SKU prices: a whole machine or GPU hour, or (Compute Engine's form) a vCPU hour or a
GiB-of-memory hour of a machine family, which add up to a machine's price."""
Usage = Literal["on-demand", "spot"]
USAGE_TYPES: dict[str, Usage] = {"OnDemand": "on-demand", "Preemptible": "spot"}
"""``category.usageType`` -> the figure it prices; others (Commit1Yr, Commit3Yr, ...) price
commitments, which no table holds."""
HOURLY_UNIT = "h"
UNITS: dict[str, str] = {"machine": "h", "accelerator": "h", "vcpu": "h", "ram": "GiBy.h"}
"""The ``usageUnit`` each part is priced in."""
GPU_WORDS: dict[str, str] = {
    "NVIDIA_TESLA_T4": "tesla t4",
    "NVIDIA_TESLA_V100": "tesla v100",
    "NVIDIA_L4": "l4",
    "NVIDIA_TESLA_A100": "tesla a100",
    "NVIDIA_A100_80GB": "tesla a100 80gb",
    "NVIDIA_H100_80GB": "h100 80gb",
    "NVIDIA_H100_MEGA_80GB": "h100 80gb mega",
    "NVIDIA_H200_141GB": "h200 141gb",
    "NVIDIA_B200": "b200",
}
"""The words between "Nvidia" and "GPU" in a SKU description, per catalog accelerator. T4, V100,
L4, A100 and A100 80GB are as Compute Engine's SKUs name them (docs/vertex-facts.md); the H100
Mega, H200 and B200 forms are UNCONFIRMED: a catalog that words them otherwise leaves them
unknown, never matched to another GPU. TPUs have no entry: their figures stay unknown."""
OTHER_PRICES = (
    "commitment",
    "sole tenancy",
    "virtual workstation",
    "reserved",
    "reservation",
    "dws",
    "flex start",
    "calendar mode",
    "custom instance",
    "extended memory",
    "premium",
)
"""Words that mark a SKU priced for something else than an on-demand or Spot VM hour."""
_WORD = re.compile(r"[a-z0-9][a-z0-9.-]*")


@dataclass(frozen=True)
class Key:
    region: str
    kind: Kind
    item: Item
    name: str
    usage: Usage

    def __str__(self) -> str:
        return f"{self.region} {self.kind} {self.name} {self.usage}"


@dataclass(frozen=True)
class Figure:
    usd_per_h: float
    sku: str
    description: str


@dataclass(frozen=True)
class _Claim:
    kind: Kind
    item: Part
    name: str
    """The machine or GPU; for a vCPU or RAM SKU, the machine family (n1, g2, ...)."""
    usage: Usage


@dataclass
class Matched:
    """Every figure the catalog expects in the regions asked for: known or unknown (why)."""

    figures: dict[Key, Figure] = field(default_factory=dict)
    unknown: dict[Key, str] = field(default_factory=dict)
    ignored: int = 0
    """SKUs that price nothing a table holds (other products, commitments, ...)."""


def _words(description: str) -> list[str]:
    """The description's words before "running in" (the location words are not read: regions
    come from ``serviceRegions``)."""
    head = re.split(r"\brunning in\b", description.lower(), maxsplit=1)[0]
    return _WORD.findall(head)


def _gpu(words: list[str]) -> str | Literal[False] | None:
    """The catalog accelerator named by "nvidia ... gpu"; None when there is no such span;
    False when the span names no catalog GPU."""
    if "nvidia" not in words or "gpu" not in words:
        return None
    start, end = words.index("nvidia"), words.index("gpu")
    named = " ".join(words[start + 1 : end])
    found = [name for name, gpu_words in GPU_WORDS.items() if gpu_words == named]
    return found[0] if found else False


def classify(sku: dict, catalog: Catalog) -> _Claim | str:
    """The figure a SKU prices, or why it prices none of the tables' figures."""
    description = str(sku.get("description", ""))
    text = " ".join(_words(description))
    other = [w for w in OTHER_PRICES if re.search(rf"\b{w}\b", text)]
    if other:
        return f"a {other[0]} SKU, not an on-demand or Spot VM hour"
    usage_type = str((sku.get("category") or {}).get("usageType", ""))
    usage = USAGE_TYPES.get(usage_type)
    if usage is None:
        return f"usageType {usage_type or 'missing'}: no table holds it"
    words = text.split()
    if usage == "on-demand" and ({"spot", "preemptible"} & set(words)):
        return "the description says Spot/Preemptible but usageType is OnDemand"
    kinds = {"training"} & set(words), {"prediction"} & set(words)
    if bool(kinds[0]) == bool(kinds[1]):
        return "names neither training nor prediction (or both)"
    kind: Kind = "training" if kinds[0] else "serving"
    machines = catalog.machines if kind == "training" else catalog.serving_machines
    named = [w for w in words if w in machines]
    gpu = _gpu(words)
    if gpu is False:
        return "a GPU this catalog does not name (or words it otherwise)"
    if not named and gpu is None and "instance" in words:
        return _per_unit(words, kind, {m.family for m in machines.values()}, usage)
    if len(named) + (gpu is not None) != 1:
        return "names no single machine or accelerator of the catalog"
    if gpu is not None:
        return _Claim(kind, "accelerator", gpu, usage)
    return _Claim(kind, "machine", named[0], usage)


def _per_unit(words: list[str], kind: Kind, families: set[str], usage: Usage) -> _Claim | str:
    """A vCPU ("Core") or memory ("Ram") SKU of one machine family: "N1 Predefined Instance
    Core", "G2 Instance Ram"."""
    named = [w for w in words if w in families]
    parts = [p for p, w in (("vcpu", "core"), ("ram", "ram")) if w in words]
    if len(named) != 1 or len(parts) != 1:
        return "an instance SKU of no single machine family, or neither Core nor Ram"
    return _Claim(kind, parts[0], named[0], usage)  # type: ignore[arg-type]


def hourly_rate(sku: dict, currency: str, unit_wanted: str = HOURLY_UNIT) -> float | str:
    """The SKU's current rate per hour in ``currency``, or why there is none: another
    currency is refused (never converted: a rate of exchange would be another source),
    another unit or several tiers are not an hourly list price."""
    infos = [i for i in sku.get("pricingInfo") or [] if isinstance(i, dict)]
    if not infos:
        return "no pricingInfo"
    info = max(infos, key=lambda i: str(i.get("effectiveTime", "")))
    expression = info.get("pricingExpression") or {}
    unit = expression.get("usageUnit")
    if unit != unit_wanted:
        return f"usageUnit {unit!r}, not {unit_wanted!r}"
    rates = [r for r in expression.get("tieredRates") or [] if isinstance(r, dict)]
    if len(rates) != 1:
        return f"{len(rates)} tiered rates: not one list price"
    price = rates[0].get("unitPrice") or {}
    code = price.get("currencyCode")
    if code != currency:
        return f"priced in {code}, the tables are in {currency} (refused, not converted)"
    try:
        return int(str(price.get("units") or 0)) + int(price.get("nanos") or 0) / 1e9
    except ValueError:
        return f"unitPrice {price!r} is not units and nanos"


def expected(catalog: Catalog, regions: Iterable[str]) -> list[Key]:
    """Every figure the tables of ``regions`` hold: each machine and accelerator the region
    offers, for training and serving, on-demand and Spot."""
    keys = []
    for region in regions:
        offered = catalog.regions.get(region)
        families = offered.families if offered else ()
        accelerators = offered.accelerators if offered else ()
        for kind, machines in (
            ("training", catalog.machines),
            ("serving", catalog.serving_machines),
        ):
            names = [("machine", m.name) for m in machines.values() if m.family in families]
            names += [("accelerator", a) for a in accelerators if a in catalog.accelerators]
            for item, name in names:
                for usage in ("on-demand", "spot"):
                    keys.append(Key(region, kind, item, name, usage))  # type: ignore[arg-type]
    return keys


def match(skus: Iterable[dict], catalog: Catalog, regions: list[str], currency: str) -> Matched:
    """Each expected figure of ``regions`` from the SKUs (see the module's docstring). A
    machine with no SKU of its own is priced from its family's vCPU and RAM SKUs (vCPUs x the
    Core rate + GiB x the Ram rate) when each is one readable SKU; a machine with both forms is
    ambiguous."""
    claims: dict[tuple, list[tuple[dict, float | str]]] = defaultdict(list)
    result = Matched()
    for sku in skus:
        claim = classify(sku, catalog)
        if isinstance(claim, str):
            result.ignored += 1
            continue
        rate = hourly_rate(sku, currency, UNITS[claim.item])
        for region in sku.get("serviceRegions") or []:
            claims[(region, claim.kind, claim.item, claim.name, claim.usage)].append((sku, rate))
    for key in expected(catalog, regions):
        found = claims.get((key.region, key.kind, key.item, key.name, key.usage), [])
        composed = _composed(key, claims, catalog) if key.item == "machine" else None
        if found and composed is not None:
            result.unknown[key] = "ambiguous: its own SKU and its family's vCPU and RAM SKUs"
        elif composed is not None:
            _record(result, key, composed)
        else:
            _record(result, key, _one(key, found))
    return result


def _record(result: Matched, key: Key, outcome: Figure | str) -> None:
    if isinstance(outcome, Figure):
        result.figures[key] = outcome
    else:
        result.unknown[key] = outcome


def _one(key: Key, found: list[tuple[dict, float | str]]) -> Figure | str:
    """The figure of exactly one readable SKU, or why there is none."""
    if not found and key.item == "accelerator" and key.name not in GPU_WORDS:
        return "no SKU description form is known for it (TPUs)"
    if not found:
        return "no SKU lists this region for it"
    if len(found) > 1:
        named = ", ".join(f"{s.get('skuId')} ({s.get('description')})" for s, _ in found)
        return f"ambiguous: {named}"
    sku, rate = found[0]
    if isinstance(rate, str):
        return f"SKU {sku.get('skuId')}: {rate}"
    return Figure(float(rate), str(sku.get("skuId")), str(sku.get("description", "")))


def _composed(key: Key, claims: dict, catalog: Catalog) -> Figure | str | None:
    """A machine's price from its family's vCPU and RAM SKUs; None when the family has
    neither in this region (for this kind and usage)."""
    machines = catalog.machines if key.kind == "training" else catalog.serving_machines
    machine = machines[key.name]
    if machine.vcpus is None or machine.memory_gb is None:
        return "Google gives no vCPU and memory figures for this machine"
    parts = {
        part: claims.get((key.region, key.kind, part, machine.family, key.usage), [])
        for part in ("vcpu", "ram")
    }
    if not parts["vcpu"] and not parts["ram"]:
        return None
    vcpu = _one(replace(key, item="machine"), parts["vcpu"])
    ram = _one(replace(key, item="machine"), parts["ram"])
    for name, outcome in (("vCPU", vcpu), ("RAM", ram)):
        if isinstance(outcome, str):
            return f"{machine.family} {name} SKU: {outcome}"
    assert isinstance(vcpu, Figure) and isinstance(ram, Figure)
    usd = machine.vcpus * vcpu.usd_per_h + machine.memory_gb * ram.usd_per_h
    description = (
        f"{machine.vcpus} x {vcpu.description} + {machine.memory_gb:g} GiB x {ram.description}"
    )
    return Figure(usd, f"{vcpu.sku}+{ram.sku}", description)


def tables(
    matched: Matched,
    regions: list[str],
    *,
    currency: str,
    as_of: str,
    fetched_at: str,
    source: str,
    name_prefix: str,
    stand_in: bool = False,
) -> list[PriceTable]:
    """One PriceTable per region and kind, each figure with its SKU and fetch time (a figure
    with neither price is left out: unknown, as in a shipped table)."""
    found = []
    for region in regions:
        for kind in ("training", "serving"):
            entries: dict[Item, dict[str, Price]] = {"machine": {}, "accelerator": {}}
            names = {
                (k.item, k.name) for k in matched.figures if (k.region, k.kind) == (region, kind)
            }
            for item, name in sorted(names):
                entries[item][name] = _price(matched, region, kind, item, name, fetched_at)
            has_spot = any(
                p.spot_usd_per_h is not None for e in entries.values() for p in e.values()
            )
            found.append(
                PriceTable(
                    name=f"{name_prefix}-{kind}-{region}-{as_of}",
                    kind=kind,  # type: ignore[arg-type]
                    region=region,
                    currency=currency,
                    as_of=as_of,
                    source=source,
                    spot_source=source if has_spot else None,
                    machines=entries["machine"],
                    accelerators=entries["accelerator"],
                    stand_in=stand_in,
                )
            )
    return found


def _price(matched: Matched, region: str, kind: str, item: str, name: str, at: str) -> Price:
    on_demand = matched.figures.get(Key(region, kind, item, name, "on-demand"))  # type: ignore[arg-type]
    spot = matched.figures.get(Key(region, kind, item, name, "spot"))  # type: ignore[arg-type]
    return Price(
        usd_per_h=on_demand.usd_per_h if on_demand else None,
        basis="catalog" if on_demand else None,
        sku=on_demand.sku if on_demand else None,
        sku_description=on_demand.description if on_demand else None,
        spot_usd_per_h=spot.usd_per_h if spot else None,
        spot_basis="catalog" if spot else None,
        spot_sku=spot.sku if spot else None,
        spot_sku_description=spot.description if spot else None,
        fetched_at=at,
    )
