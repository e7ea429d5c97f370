"""A strict matcher from Cloud Billing Catalog SKUs to the catalog's price figures (pure).

A SKU (``services.skus.list``: ``skuId``, ``description``, ``category.usageType``,
``serviceRegions``, ``pricingInfo[].pricingExpression.{usageUnit, tieredRates[].unitPrice}``)
becomes, for each region it lists, one claim on one figure: (region, training or serving,
machine or accelerator, name, on-demand, Spot or FLEX_START). A figure claimed by exactly one
SKU with one hourly rate in the table's currency is known; claimed by none, by several, or by
one that cannot be read as such a rate, it stays unknown and says why. Nothing is borrowed: a
region's figure comes only from a SKU whose ``serviceRegions`` lists that region, a Spot figure
only from a ``Preemptible`` SKU, a serving figure only from a prediction SKU, a FLEX_START figure
only from a DWS SKU and a management fee SKU.

FLEX_START (Dynamic Workload Scheduler) is billed in two services: Compute Engine's "DWS Defined
Duration" SKU for the VM (the same for training and serving) and Vertex AI's "management fee"
SKU; the figure is their sum and names both. Compute Engine's other SKUs price nothing here
(Vertex bills its own VMs), reservations included (docs/vertex-facts.md).

What the descriptions look like, and what of it is confirmed, is in docs/vertex-facts.md
("Billing catalog"). The matcher reads words, not a fixed sentence: the kind ("Training" or
"Prediction"), one catalog machine name (``n1-standard-4``), one GPU named as the SKUs name it
("Nvidia Tesla T4 GPU", "NVIDIA H100 80GB", "H200 141GB GPU") or one machine family's vCPU or
RAM ("N1 Predefined Instance Core"/"Ram", added up per machine), and nothing that marks another
price (a commitment, a sole-tenant node, a workstation licence, a reservation)."""

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
Usage = Literal["on-demand", "spot", "flex-start"]
Source = Literal["on-demand", "spot", "dws", "fee"]
"""What one SKU prices: an on-demand or Spot figure whole, or one of FLEX_START's two halves
(Compute Engine's DWS VM hour, Vertex's management fee)."""
USAGE_TYPES: dict[str, Source] = {"OnDemand": "on-demand", "Preemptible": "spot"}
"""``category.usageType`` -> the figure it prices; others (Commit1Yr, Commit3Yr, ...) price
commitments, which no table holds."""
FLEX_START_WORDS = "dws defined duration"
"""Compute Engine's words for a flex-start VM hour ("Nvidia H100 80GB GPU attached to DWS Defined
Duration VMs", "DWS Defined Duration A3 Core"); its SKUs are ``OnDemand``."""
FEE_WORDS = "management fee"
"""Vertex's words for its fee on a VM Compute Engine bills ("Vertex AI: Training/Pipelines
management fee on NVIDIA H100 80GB")."""
HOURLY_UNIT = "h"
UNITS: dict[str, str] = {"machine": "h", "accelerator": "h", "vcpu": "h", "ram": "GiBy.h"}
"""The ``usageUnit`` each part is priced in."""
GPU_WORDS: dict[str, tuple[str, ...]] = {
    "NVIDIA_TESLA_T4": ("tesla t4",),
    "NVIDIA_TESLA_V100": ("tesla v100",),
    "NVIDIA_L4": ("l4",),
    "NVIDIA_TESLA_A100": ("tesla a100",),
    "NVIDIA_A100_80GB": ("tesla a100 80gb",),
    "NVIDIA_H100_80GB": ("h100 80gb",),
    "NVIDIA_H100_MEGA_80GB": ("h100 80gb mega", "h100 mega 80gb", "h100 80gb plus"),
    "NVIDIA_H200_141GB": ("h200 141gb",),
    "NVIDIA_B200": ("b200 1",),
}
"""The GPU's words in a SKU description, per catalog accelerator: after "Nvidia" (where the
description has it) and before "GPU" (or the end of the description's head: Vertex's training
SKUs say "on NVIDIA H100 80GB in Iowa"). The B200 is sold by "(1 gpu slice)", one GPU.
Each form is one public sources show (docs/vertex-facts.md, "Billing catalog"); a catalog that
words a GPU otherwise leaves it unknown, never matched to another GPU. TPUs have no entry: their
figures stay unknown."""
_MODEL_WORD = re.compile(r".*\d.*|tesla|mega|plus")
"""Words of a GPU's name where no "Nvidia" marks where the name starts ("H200 141GB GPU")."""
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
    kind: Kind | None
    """None: both (a Compute Engine VM hour is the same for training and serving)."""
    item: Part
    name: str
    """The machine or GPU; for a vCPU or RAM SKU, the machine family (n1, g2, ...)."""
    usage: Source


@dataclass
class Matched:
    """Every figure the catalog expects in the regions asked for: known or unknown (why)."""

    figures: dict[Key, Figure] = field(default_factory=dict)
    unknown: dict[Key, str] = field(default_factory=dict)
    ignored: int = 0
    """SKUs that price nothing a table holds (other products, commitments, ...)."""


def _words(description: str) -> list[str]:
    """The description's words before "in <place>" ("running in Americas", "in Iowa"): the
    location words are not read, regions come from ``serviceRegions``."""
    head = re.split(r"\b(?:running )?in\b", description.lower(), maxsplit=1)[0]
    return _WORD.findall(head)


def _gpu(words: list[str]) -> str | Literal[False] | None:
    """The catalog accelerator a GPU SKU names; None when the SKU names no GPU (neither
    "Nvidia" nor "GPU"); False when it names one this catalog does not (or words it otherwise).
    The name runs from after the last "Nvidia" before "GPU" (or the end) to "GPU"; without an
    "Nvidia", over the model words just before "GPU"."""
    if "nvidia" not in words and "gpu" not in words:
        return None
    end = words.index("gpu") if "gpu" in words else len(words)
    head = words[:end]
    if "nvidia" in head:
        start = end - head[::-1].index("nvidia")
    else:
        start = end
        while start > 0 and _MODEL_WORD.fullmatch(head[start - 1]):
            start -= 1
    named = " ".join(words[start:end])
    found = [name for name, forms in GPU_WORDS.items() if named in forms]
    return found[0] if found else False


def _without(text: str, words: str) -> tuple[str, bool]:
    """``text`` without the phrase ``words`` (whole words), and whether it was there."""
    stripped, count = re.subn(rf"\b{words}\b", " ", text)
    return " ".join(stripped.split()), bool(count)


def _source(text: str, usage_type: str, compute_engine: bool) -> tuple[str, Source] | str:
    """What kind of figure the SKU prices (its text without the words that said so), or why
    none: Compute Engine's SKUs price only FLEX_START's VM hour, Vertex's management fee only
    FLEX_START's fee, the rest by ``category.usageType``."""
    if compute_engine:
        text, dws = _without(text, FLEX_START_WORDS)
        if not dws:
            return "a Compute Engine SKU but not DWS Defined Duration: Vertex bills its own VMs"
        source: Source = "dws"
    else:
        text, fee = _without(text, FEE_WORDS)
        source = "fee" if fee else USAGE_TYPES.get(usage_type, "")  # type: ignore[assignment]
        if not source:
            return f"usageType {usage_type or 'missing'}: no table holds it"
    if source in ("dws", "fee") and usage_type != "OnDemand":
        return f"a {source} SKU with usageType {usage_type or 'missing'}, not OnDemand"
    return text, source


def classify(sku: dict, catalog: Catalog, compute_engine: bool = False) -> _Claim | str:
    """The figure a SKU prices, or why it prices none of the tables' figures.
    ``compute_engine``: the SKU is Compute Engine's (service 6F81-5844-456A), not Vertex's."""
    description = str(sku.get("description", ""))
    usage_type = str((sku.get("category") or {}).get("usageType", ""))
    text = " ".join(_words(description))
    plain = _without(text, FLEX_START_WORDS if compute_engine else FEE_WORDS)[0]
    other = [w for w in OTHER_PRICES if re.search(rf"\b{w}\b", plain)]
    if other:
        return f"a {other[0]} SKU, not an on-demand, Spot or FLEX_START VM hour"
    found = _source(text, usage_type, compute_engine)
    if isinstance(found, str):
        return found
    text, usage = found
    words = text.split()
    if usage != "spot" and ({"spot", "preemptible"} & set(words)):
        return f"the description says Spot/Preemptible but usageType is {usage_type}"
    kind = _kind(words, compute_engine)
    if kind is False:
        return "names neither training nor prediction (or both)"
    machines = catalog.machines if kind != "serving" else catalog.serving_machines
    if kind is None:
        machines = {**catalog.serving_machines, **catalog.machines}
    named = [w for w in words if w in machines]
    gpu = _gpu(words)
    if gpu is False:
        return "a GPU this catalog does not name (or words it otherwise)"
    if not named and gpu is None and ({"instance", "core", "ram"} & set(words)):
        return _per_unit(words, kind, {m.family for m in machines.values()}, usage)
    if len(named) + (gpu is not None) != 1:
        return "names no single machine or accelerator of the catalog"
    if gpu is not None:
        return _Claim(kind, "accelerator", gpu, usage)
    return _Claim(kind, "machine", named[0], usage)


def _kind(words: list[str], compute_engine: bool) -> Kind | Literal[False] | None:
    """Training or serving from the words; None for a Compute Engine SKU (both); False when
    a Vertex SKU names neither or both."""
    if compute_engine:
        return None
    training, serving = "training" in words, "prediction" in words
    if training == serving:
        return False
    return "training" if training else "serving"


def _per_unit(
    words: list[str], kind: Kind | None, families: set[str], usage: Source
) -> _Claim | str:
    """A vCPU ("Core") or memory ("Ram") SKU of one machine family: "N1 Predefined Instance
    Core", "G2 Instance Ram", "DWS Defined Duration A3 Core"."""
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
    offers, for training and serving, on-demand and Spot, and FLEX_START for the GPUs it takes
    (``flex_start`` in accelerators.yaml) and the machines they come with or attach to."""
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
                usages = ["on-demand", "spot"]
                if takes_flex_start(catalog, item, name):  # type: ignore[arg-type]
                    usages.append("flex-start")
                for usage in usages:
                    keys.append(Key(region, kind, item, name, usage))  # type: ignore[arg-type]
    return keys


def takes_flex_start(catalog: Catalog, item: Item, name: str) -> bool:
    """Whether FLEX_START runs ``name``: a GPU accelerators.yaml marks ``flex_start``, or a
    machine (training's or serving's) that comes with or takes one."""
    flex = {a for a, acc in catalog.accelerators.items() if acc.flex_start}
    if item == "accelerator":
        return name in flex
    machine = catalog.machines.get(name) or catalog.serving_machines.get(name)
    return machine is not None and bool(flex & set(machine.accelerators))


def match(
    skus: Iterable[dict],
    catalog: Catalog,
    regions: list[str],
    currency: str,
    compute_skus: Iterable[dict] = (),
) -> Matched:
    """Each expected figure of ``regions`` from Vertex AI's ``skus`` and Compute Engine's
    ``compute_skus`` (see the module's docstring). A machine with no SKU of its own is priced
    from its family's vCPU and RAM SKUs (vCPUs x the Core rate + GiB x the Ram rate) when each
    is one readable SKU; a machine with both forms is ambiguous."""
    claims: dict[tuple, list[tuple[dict, float | str]]] = defaultdict(list)
    result = Matched()
    read = [(sku, False) for sku in skus] + [(sku, True) for sku in compute_skus]
    for sku, compute_engine in read:
        claim = classify(sku, catalog, compute_engine)
        if isinstance(claim, str):
            result.ignored += 1
            continue
        rate = hourly_rate(sku, currency, UNITS[claim.item])
        kinds = (claim.kind,) if claim.kind else ("training", "serving")
        for region in sku.get("serviceRegions") or []:
            for kind in kinds:
                claims[(region, kind, claim.item, claim.name, claim.usage)].append((sku, rate))
    for key in expected(catalog, regions):
        if key.usage == "flex-start":
            _record(result, key, _flex_start(key, claims, catalog))
        else:
            _record(result, key, _figure(key, key.usage, claims, catalog))
    return result


def _figure(key: Key, source: Source, claims: dict, catalog: Catalog) -> Figure | str:
    """The figure ``source``'s SKUs give ``key``: its own SKU, or its family's vCPU and RAM."""
    found = claims.get((key.region, key.kind, key.item, key.name, source), [])
    composed = _composed(key, source, claims, catalog) if key.item == "machine" else None
    if found and composed is not None:
        return "ambiguous: its own SKU and its family's vCPU and RAM SKUs"
    return composed if composed is not None else _one(key, found)


def _flex_start(key: Key, claims: dict, catalog: Catalog) -> Figure | str:
    """Compute Engine's DWS VM hour plus Vertex's management fee: both, or unknown."""
    vm = _figure(key, "dws", claims, catalog)
    if isinstance(vm, str):
        return f"Compute Engine DWS Defined Duration SKU: {vm}"
    fee = _figure(key, "fee", claims, catalog)
    if isinstance(fee, str):
        return f"Vertex management fee SKU: {fee}"
    return Figure(
        vm.usd_per_h + fee.usd_per_h, f"{vm.sku}+{fee.sku}", f"{vm.description} + {fee.description}"
    )


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


def _composed(key: Key, source: Source, claims: dict, catalog: Catalog) -> Figure | str | None:
    """A machine's price from its family's vCPU and RAM SKUs; None when the family has
    neither in this region (for this kind and source)."""
    machines = catalog.machines if key.kind == "training" else catalog.serving_machines
    machine = machines[key.name]
    if machine.vcpus is None or machine.memory_gb is None:
        return "Google gives no vCPU and memory figures for this machine"
    parts = {
        part: claims.get((key.region, key.kind, part, machine.family, source), [])
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
    flex_start_source: str | None = None,
) -> list[PriceTable]:
    """One PriceTable per region and kind, each figure with its SKU and fetch time (a figure
    with no price is left out: unknown, as in a shipped table). ``flex_start_source``: where
    the FLEX_START figures come from (``source`` when None)."""
    found = []
    for region in regions:
        for kind in ("training", "serving"):
            entries: dict[Item, dict[str, Price]] = {"machine": {}, "accelerator": {}}
            names = {
                (k.item, k.name) for k in matched.figures if (k.region, k.kind) == (region, kind)
            }
            for item, name in sorted(names):
                entries[item][name] = _price(matched, region, kind, item, name, fetched_at)
            prices = [p for e in entries.values() for p in e.values()]
            has_spot = any(p.spot_usd_per_h is not None for p in prices)
            has_flex_start = any(p.flex_start_usd_per_h is not None for p in prices)
            found.append(
                PriceTable(
                    name=f"{name_prefix}-{kind}-{region}-{as_of}",
                    kind=kind,  # type: ignore[arg-type]
                    region=region,
                    currency=currency,
                    as_of=as_of,
                    source=source,
                    spot_source=source if has_spot else None,
                    flex_start_source=(flex_start_source or source) if has_flex_start else None,
                    machines=entries["machine"],
                    accelerators=entries["accelerator"],
                    stand_in=stand_in,
                )
            )
    return found


def _price(matched: Matched, region: str, kind: str, item: str, name: str, at: str) -> Price:
    on_demand = matched.figures.get(Key(region, kind, item, name, "on-demand"))  # type: ignore[arg-type]
    spot = matched.figures.get(Key(region, kind, item, name, "spot"))  # type: ignore[arg-type]
    flex = matched.figures.get(Key(region, kind, item, name, "flex-start"))  # type: ignore[arg-type]
    return Price(
        usd_per_h=on_demand.usd_per_h if on_demand else None,
        basis="catalog" if on_demand else None,
        sku=on_demand.sku if on_demand else None,
        sku_description=on_demand.description if on_demand else None,
        spot_usd_per_h=spot.usd_per_h if spot else None,
        spot_basis="catalog" if spot else None,
        spot_sku=spot.sku if spot else None,
        spot_sku_description=spot.description if spot else None,
        flex_start_usd_per_h=flex.usd_per_h if flex else None,
        flex_start_basis="catalog" if flex else None,
        flex_start_sku=flex.sku if flex else None,
        flex_start_sku_description=flex.description if flex else None,
        fetched_at=at,
    )
