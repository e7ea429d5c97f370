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
price (a commitment, a sole-tenant node, a workstation licence, a reservation).

Disks: a training boot disk is priced per GiB and month by a Vertex SKU naming its type in words
`DISK_WORDS` knows ("Vertex AI: Training/Pipelines on SSD backed PD Capacity", pd-ssd, the one
real wording known); its figure stays per GiB-month as the SKU states it (the estimate converts,
`jobs.core.catalog.HOURS_PER_MONTH`). A disk type with no known wording stays unknown saying so;
a disk SKU the matcher cannot place (another type's words, a prediction disk, a local SSD, a
Compute Engine or Spot disk) is refused with why (``Matched.disks_refused``), never guessed."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, ValidationError

from jobs.core.catalog import Catalog, DiskPrice, Machine, Price, PriceTable, rate_problem

Kind = Literal["training", "serving"]
Item = Literal["machine", "accelerator", "disk"]
Part = Literal["machine", "accelerator", "vcpu", "ram", "disk"]
"""What a SKU prices: a whole machine or GPU hour, or (Compute Engine's form) a vCPU hour or a
GiB-of-memory hour of a machine family, which add up to a machine's price; or a GiB-month of a
boot disk type."""
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
DISK_UNIT = "GiBy.mo"
UNITS: dict[str, str] = {
    "machine": "h",
    "accelerator": "h",
    "vcpu": "h",
    "ram": "GiBy.h",
    "disk": DISK_UNIT,
}
"""The ``usageUnit`` each part is priced in."""
DISK_WORDS: dict[str, str] = {"pd-ssd": "ssd backed pd capacity"}
"""A boot disk type (``bootDiskType``) -> the words of its Vertex training SKU, lower case. Only
pd-ssd's are known: "Vertex AI: Training/Pipelines on SSD backed PD Capacity" (A005-98FE-36CC,
in the billing report of docs/vertex-facts.md, "Disks"). pd-standard's and hyperdisk-balanced's
wordings are not known: their figures stay unknown, saying so, and no wording is guessed."""
DISK_MARKS = ("pd", "hyperdisk", "persistent disk", "capacity", "local ssd", "local storage")
"""Words that mark a disk SKU, read or not: one of no `DISK_WORDS` form is refused with why."""
LOCAL_SSD_WORDS = ("local ssd", "local storage")
"""A local SSD's words (Compute Engine's "DWS Defined Duration SSD backed Local Storage")."""
GPU_WORDS: dict[str, tuple[str, ...]] = {
    "NVIDIA_TESLA_T4": ("t4",),
    "NVIDIA_TESLA_V100": ("v100",),
    "NVIDIA_L4": ("l4",),
    "NVIDIA_TESLA_A100": ("a100",),
    "NVIDIA_A100_80GB": ("a100 80gb",),
    "NVIDIA_H100_80GB": ("h100 80gb",),
    "NVIDIA_H100_MEGA_80GB": ("h100 80gb mega", "h100 mega 80gb", "h100 80gb plus"),
    "NVIDIA_H200_141GB": ("h200 141gb",),
    "NVIDIA_B200": ("b200 1",),
}
"""The GPU's words in a SKU description, per catalog accelerator, lower case and without
"Tesla": after "Nvidia" (where the description has it) and before "GPU" (or the end of the
description's head: Vertex's training SKUs say "on NVIDIA H100 80GB in Iowa"). "Tesla" is not
read: Compute Engine writes "Nvidia Tesla A100 80GB GPU" where Vertex's prediction SKUs write
"Nvidia A100 80gb GPU", and case differs the same way ("80GB", "80gb"). The B200 is sold by
"(1 gpu slice)", one GPU. Each form is one public sources show (docs/vertex-facts.md, "Billing
catalog"); a catalog that words a GPU otherwise leaves it unknown, never matched to another GPU.
TPUs have no entry: their figures stay unknown."""
IGNORED_GPU_WORDS = frozenset({"tesla"})
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
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9.-]*")
VARIANT_WORDS = ("high", "mega", "ultra", "edge")
"""The words that tell one GPU machine series from another within a family (A3 High, A3 Mega,
A3 Ultra, A3 Edge: the machine names' ``a3-highgpu``, ``a3-megagpu``, ...). A family's vCPU
or RAM SKU prices only the machines of the variant its words name."""
PLAIN_SERIES: dict[str, str] = {"a3": "high", "a2": "ultra"}
"""The variant a family's vCPU/RAM SKU prices when its words name none: the billing report of
an a3-highgpu-8g job lists "A3 Instance Core"/"A3 Instance RAM"; public code pricing an
a2-ultragpu prediction node reads "A2 Instance Core"/"A2 Instance Ram" (docs/vertex-facts.md).
The family's other variants are priced only from SKUs that name them."""


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
    """$/h; for a disk, $ per GiB-month (the SKU's own unit: `DISK_UNIT`)."""
    sku: str
    description: str


@dataclass(frozen=True)
class _Claim:
    kind: Kind | None
    """None: both (a Compute Engine VM hour is the same for training and serving)."""
    item: Part
    name: str
    """The machine or GPU; for a vCPU or RAM SKU, the machine family (n1, g2, ...) and the
    variant its words name ("a3 mega")."""
    usage: Source
    wording: str = ""
    """A GPU SKU's words for the GPU, as written."""


@dataclass
class Matched:
    """Every figure the catalog expects in the regions asked for: known or unknown (why)."""

    figures: dict[Key, Figure] = field(default_factory=dict)
    unknown: dict[Key, str] = field(default_factory=dict)
    ignored: int = 0
    """SKUs that price nothing a table holds (other products, commitments, ...)."""
    refused: list[str] = field(default_factory=list)
    """SKUs that could not be read at all (a field of the wrong type), each with why; they
    count in ``ignored`` too."""
    disks_refused: list[str] = field(default_factory=list)
    """Disk SKUs read but placed on no figure, each "<id> (<description>): why" (another
    type's words, a prediction disk, a local SSD, ...); they count in ``ignored`` too."""
    gpu_wordings: dict[str, set[str]] = field(default_factory=dict)
    """Catalog accelerator -> the words its SKUs named it with, as written ("Nvidia Tesla T4
    GPU", "Nvidia A100 80gb GPU"): how this catalog words each GPU."""


class _Read(BaseModel):
    """A part of a SKU as the API answers it: the fields read must have their type; others
    are not read."""

    model_config = ConfigDict(extra="ignore", frozen=True, defer_build=True)


class _Category(_Read):
    usageType: StrictStr = ""


class SkuHead(_Read):
    """What a SKU says it prices: its words, its usage type and its regions."""

    skuId: StrictStr = ""
    description: StrictStr = ""
    category: _Category = Field(default_factory=_Category)
    serviceRegions: list[StrictStr] = Field(default_factory=list)


class _Money(_Read):
    currencyCode: StrictStr = ""
    units: StrictStr | StrictInt = "0"
    """An int64, which the API's JSON writes as a string."""
    nanos: StrictInt = 0


class _Tier(_Read):
    unitPrice: _Money = Field(default_factory=_Money)


class _Expression(_Read):
    usageUnit: StrictStr = ""
    tieredRates: list[_Tier] = Field(default_factory=list)


class _Info(_Read):
    effectiveTime: StrictStr = ""
    pricingExpression: _Expression = Field(default_factory=_Expression)


class SkuPricing(_Read):
    pricingInfo: list[_Info] = Field(default_factory=list)


def _problem(exc: ValidationError) -> str:
    """The first field of a SKU that is not what the API answers, and why, in one line."""
    error = exc.errors()[0]
    where = ".".join(str(part) for part in error["loc"]) or "the SKU"
    return f"{where}: {error['msg']}"


def read_head(sku: object) -> SkuHead | str:
    """The SKU's words, usage type and regions, or why it cannot be read (a SKU that is not
    an object, a ``category`` that is a string, ``serviceRegions`` holding lists, ...)."""
    if not isinstance(sku, dict):
        return f"a {type(sku).__name__}, not a SKU object"
    try:
        return SkuHead.model_validate(sku)
    except ValidationError as exc:
        return f"SKU {str(sku.get('skuId'))[:40]}: {_problem(exc)}"


def _original_words(description: str) -> list[re.Match[str]]:
    """The description's words before "in <place>" ("running in Americas", "in Iowa"), as
    written: the location words are not read, regions come from ``serviceRegions``."""
    head = re.split(r"\b(?:running )?in\b", description, maxsplit=1, flags=re.IGNORECASE)[0]
    return list(_WORD.finditer(head))


def _gpu(written: list[re.Match[str]]) -> tuple[str, str] | Literal[False] | None:
    """The catalog accelerator a GPU SKU names and the words it names it with (as written);
    None when the SKU names no GPU (neither "Nvidia" nor "GPU"); False when it names one this
    catalog does not (or words it otherwise). The name runs from after the last "Nvidia" before
    "GPU" (or the end) to "GPU"; without an "Nvidia", over the model words just before "GPU".
    Case and "Tesla" do not count (`GPU_WORDS`)."""
    words = [w.group().lower() for w in written]
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
    named = " ".join(w for w in words[start:end] if w not in IGNORED_GPU_WORDS)
    found = [name for name, forms in GPU_WORDS.items() if named in forms]
    if not found:
        return False
    first = start - 1 if start > 0 and words[start - 1] == "nvidia" else start
    last = written[min(end, len(written) - 1)]
    return found[0], written[first].string[written[first].start() : last.end()]


def _without(text: str, words: str) -> tuple[str, bool]:
    """``text`` without the phrase ``words`` (whole words), and whether it was there."""
    stripped, count = re.subn(rf"\b{words}\b", " ", text)
    return " ".join(stripped.split()), bool(count)


def _source(text: str, usage_type: str, compute_engine: bool) -> tuple[str, Source] | str:
    """What kind of figure the SKU prices (its text without the words that said so), or why
    none: Compute Engine's SKUs price only FLEX_START's VM hour, Vertex's management fee only
    FLEX_START's fee, the rest on-demand or Spot. Spot is what the description says ("Spot",
    "Preemptible") or, where it says nothing, ``usageType`` ``Preemptible``: Compute Engine has
    been seen to list a Spot GPU as ``OnDemand`` with "Spot" in its words, and the words name
    the VM the price is for (docs/vertex-facts.md, "Billing catalog")."""
    said_spot = bool({"spot", "preemptible"} & set(text.split()))
    if compute_engine:
        text, dws = _without(text, FLEX_START_WORDS)
        if not dws:
            return "a Compute Engine SKU but not DWS Defined Duration: Vertex bills its own VMs"
        source: Source = "dws"
    else:
        text, fee = _without(text, FEE_WORDS)
        if fee:
            source = "fee"
        elif usage_type not in USAGE_TYPES:
            return f"usageType {usage_type or 'missing'}: no table holds it"
        else:
            source = "spot" if said_spot else USAGE_TYPES[usage_type]
    if source in ("dws", "fee"):
        if usage_type != "OnDemand":
            return f"a {source} SKU with usageType {usage_type or 'missing'}, not OnDemand"
        if said_spot:
            return f"a {source} SKU whose description says Spot/Preemptible"
    return text, source


def classify(sku: object, catalog: Catalog, compute_engine: bool = False) -> _Claim | str:
    """The figure a SKU prices, or why it prices none of the tables' figures.
    ``compute_engine``: the SKU is Compute Engine's (service 6F81-5844-456A), not Vertex's."""
    head = sku if isinstance(sku, SkuHead) else read_head(sku)
    if isinstance(head, str):
        return head
    written = _original_words(head.description)
    text = " ".join(w.group().lower() for w in written)
    plain = _without(text, FLEX_START_WORDS if compute_engine else FEE_WORDS)[0]
    other = [w for w in OTHER_PRICES if re.search(rf"\b{w}\b", plain)]
    if other:
        return f"a {other[0]} SKU, not an on-demand, Spot or FLEX_START VM hour"
    found = _source(text, head.category.usageType, compute_engine)
    if isinstance(found, str):
        return found
    text, usage = found
    words = text.split()
    kind = _kind(words, compute_engine)
    if kind is False:
        return "names neither training nor prediction (or both)"
    disk = _disk(text)
    if disk is not None:
        return _disk_claim(disk, kind, usage)
    machines = catalog.machines if kind != "serving" else catalog.serving_machines
    if kind is None:
        machines = {**catalog.serving_machines, **catalog.machines}
    named = [w for w in words if w in machines]
    gpu = _gpu(written)
    if gpu is False:
        return "a GPU this catalog does not name (or words it otherwise)"
    if not named and gpu is None and ({"instance", "core", "ram"} & set(words)):
        return _per_unit(words, kind, {m.family for m in machines.values()}, usage)
    if len(named) + (gpu is not None) != 1:
        return "names no single machine or accelerator of the catalog"
    if gpu is not None:
        return _Claim(kind, "accelerator", gpu[0], usage, gpu[1])
    return _Claim(kind, "machine", named[0], usage)


class DiskRefusal(str):
    """Why a SKU recognised as a disk's prices no figure (`classify` answers it as any other
    reason; `match` lists it in ``Matched.disks_refused``)."""


def _disk(text: str) -> tuple[str] | DiskRefusal | None:
    """The boot disk type a disk SKU's words name (as a 1-tuple); why it names none this
    matcher knows; None when the words are not a disk's (`DISK_MARKS`)."""
    if not any(re.search(rf"\b{mark}\b", text) for mark in DISK_MARKS):
        return None
    local = [w for w in LOCAL_SSD_WORDS if re.search(rf"\b{w}\b", text)]
    if local:
        return DiskRefusal(
            "a local SSD SKU: no Vertex SKU wording is known for local SSDs, and the catalog "
            "does not say which machines carry them"
        )
    named = [t for t, words in DISK_WORDS.items() if re.search(rf"\b{words}\b", text)]
    if len(named) != 1:
        known = ", ".join(f'"{w}" ({t})' for t, w in DISK_WORDS.items())
        return DiskRefusal(f"a disk SKU in words of no known form (known: {known})")
    return (named[0],)


def _disk_claim(disk: tuple[str] | DiskRefusal, kind: Kind | None, usage: Source) -> _Claim | str:
    """A training boot disk's on-demand figure, or why the disk SKU prices none."""
    if isinstance(disk, DiskRefusal):
        return disk
    if kind is None:
        return DiskRefusal(
            "a Compute Engine disk SKU: Vertex bills a job's boot disk at its own disk SKU, "
            "FLEX_START's too"
        )
    if kind == "serving":
        return DiskRefusal(
            "a prediction disk SKU: no real SKU wording is known for serving boot disks, nor "
            "which disk a deployed model's nodes get"
        )
    if usage != "on-demand":
        return DiskRefusal(
            f"a {usage} disk SKU: only an on-demand training disk SKU is known to price a boot disk"
        )
    return _Claim(kind, "disk", disk[0], usage)


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
    """A vCPU ("Core") or memory ("Ram") SKU of one machine family, and the variant its words
    name if any: "N1 Predefined Instance Core", "G2 Instance Ram", "DWS Defined Duration A3
    Core", "A3 Mega Instance Core" (claimed as "a3 mega")."""
    named = [w for w in words if w in families]
    parts = [p for p, w in (("vcpu", "core"), ("ram", "ram")) if w in words]
    variants = [w for w in words if w in VARIANT_WORDS]
    if len(named) != 1 or len(parts) != 1:
        return "an instance SKU of no single machine family, or neither Core nor Ram"
    if len(variants) > 1:
        return f"an instance SKU naming several variants ({', '.join(variants)})"
    series = " ".join([named[0], *variants])
    return _Claim(kind, parts[0], series, usage)  # type: ignore[arg-type]


def machine_variant(machine: Machine) -> str | None:
    """The series variant a GPU machine's name says ("a3-megagpu-8g" -> "mega"); None for a
    machine named by shape only (n1-standard-4)."""
    found = re.match(r"^[a-z0-9]+-([a-z]+)gpu-", machine.name)
    return found.group(1) if found and found.group(1) in VARIANT_WORDS else None


def _series_for(machine: Machine, catalog: Catalog) -> tuple[list[str], str | None]:
    """The claim names whose vCPU/RAM SKUs may price ``machine`` ("a3 mega"; the bare family
    too when its SKUs price this variant), and why the bare family's do not (None when they
    do): a family of one variant in the catalog, or the one `PLAIN_SERIES` names."""
    variant = machine_variant(machine)
    if variant is None:
        return [machine.family], None
    own = f"{machine.family} {variant}"
    variants = {
        machine_variant(m)
        for m in {**catalog.machines, **catalog.serving_machines}.values()
        if m.family == machine.family
    }
    only = variant if len(variants) == 1 else None
    if PLAIN_SERIES.get(machine.family, only) == variant:
        return [own, machine.family], None
    plain = PLAIN_SERIES.get(machine.family)
    prices = f"they price {machine.family}-{plain}gpu machines" if plain else "which is unknown"
    family = machine.family.upper()
    return [own], (
        f"its family's {family} vCPU/RAM SKUs name no variant ({prices}); only SKUs naming "
        f"{family} {variant.title()} price {machine.name}"
    )


def hourly_rate(sku: object, currency: str, unit_wanted: str = HOURLY_UNIT) -> float | str:
    """The SKU's current rate per hour in ``currency``, or why there is none: a field of the
    wrong type, another currency (never converted: a rate of exchange would be another
    source), another unit or several tiers, or a figure that is no rate (`rate_problem`)."""
    try:
        pricing = SkuPricing.model_validate(sku)
    except ValidationError as exc:
        return _problem(exc)
    if not pricing.pricingInfo:
        return "no pricingInfo"
    info = max(pricing.pricingInfo, key=lambda i: i.effectiveTime)
    expression = info.pricingExpression
    if expression.usageUnit != unit_wanted:
        return f"usageUnit {expression.usageUnit!r}, not {unit_wanted!r}"
    rates = expression.tieredRates
    if len(rates) != 1:
        return f"{len(rates)} tiered rates: not one list price"
    price = rates[0].unitPrice
    if price.currencyCode != currency:
        return (
            f"priced in {price.currencyCode[:10] or 'no currency'}, the tables are in {currency} "
            "(refused, not converted)"
        )
    return _money(price)


def _money(price: _Money) -> float | str:
    """``units`` + ``nanos``/10^9 as google.type.Money defines them (nanos within
    +-999,999,999 and of the units' sign), a finite rate from 0 to MAX_USD_PER_H."""
    if not re.fullmatch(r"-?\d{1,18}", str(price.units)):
        return f"unitPrice.units {str(price.units)[:40]!r} is not an int64"
    units = int(price.units)
    if abs(price.nanos) > 999_999_999 or (
        units and price.nanos and (units > 0) != (price.nanos > 0)
    ):
        return f"unitPrice.nanos {price.nanos} is not 0 to 999,999,999 of the units' sign"
    usd = units + price.nanos / 1e9
    problem = rate_problem(usd)
    return f"unitPrice {problem}" if problem else usd


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
        keys += disk_keys(catalog, region)
    return keys


def disk_keys(catalog: Catalog, region: str) -> list[Key]:
    """The boot disk figures a region's training table holds: every type a job may ask for
    (limits.yaml's ``boot_disk_types``), on-demand only (the only disk SKU known is on-demand;
    the report bills FLEX_START's boot disk at it too: docs/vertex-facts.md, "Disks")."""
    return [
        Key(region, "training", "disk", disk, "on-demand")
        for disk in catalog.limits.boot_disk_types
    ]


def takes_flex_start(catalog: Catalog, item: Item, name: str) -> bool:
    """Whether FLEX_START runs ``name``: a GPU accelerators.yaml marks ``flex_start``, or a
    machine (training's or serving's) that comes with or takes one."""
    flex = {a for a, acc in catalog.accelerators.items() if acc.flex_start}
    if item == "accelerator":
        return name in flex
    machine = catalog.machines.get(name) or catalog.serving_machines.get(name)
    return machine is not None and bool(flex & set(machine.accelerators))


def match(
    skus: Iterable[object],
    catalog: Catalog,
    regions: list[str],
    currency: str,
    compute_skus: Iterable[object] = (),
) -> Matched:
    """Each expected figure of ``regions`` from Vertex AI's ``skus`` and Compute Engine's
    ``compute_skus`` (see the module's docstring). A machine with no SKU of its own is priced
    from its family's vCPU and RAM SKUs of its own variant (vCPUs x the Core rate + GiB x the
    Ram rate) when each is one readable SKU; a machine with both forms is ambiguous. A SKU
    that cannot be read is refused with why (``Matched.refused``), never a traceback."""
    claims: dict[tuple, list[tuple[SkuHead, float | str]]] = defaultdict(list)
    result = Matched()
    read = [(sku, False) for sku in skus] + [(sku, True) for sku in compute_skus]
    for sku, compute_engine in read:
        head = read_head(sku)
        claim = head if isinstance(head, str) else classify(head, catalog, compute_engine)
        if isinstance(head, str):
            result.refused.append(head)
        elif isinstance(claim, DiskRefusal):
            result.disks_refused.append(f"{head.skuId} ({head.description}): {claim}")
        if isinstance(claim, str) or isinstance(head, str):
            result.ignored += 1
            continue
        if claim.wording:
            result.gpu_wordings.setdefault(claim.name, set()).add(claim.wording)
        rate = hourly_rate(sku, currency, UNITS[claim.item])
        kinds = (claim.kind,) if claim.kind else ("training", "serving")
        for region in head.serviceRegions:
            for kind in kinds:
                claims[(region, kind, claim.item, claim.name, claim.usage)].append((head, rate))
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
    # Each SKU's rate is bounded; a sum of them (vCPUs x Core + GiB x Ram) is checked again.
    problem = rate_problem(outcome.usd_per_h) if isinstance(outcome, Figure) else None
    if isinstance(outcome, Figure) and problem is None:
        result.figures[key] = outcome
    else:
        result.unknown[key] = f"the SKUs add up to {problem}" if problem else str(outcome)


def _one(key: Key, found: list[tuple[SkuHead, float | str]]) -> Figure | str:
    """The figure of exactly one readable SKU, or why there is none."""
    if not found and key.item == "accelerator" and key.name not in GPU_WORDS:
        return "no SKU description form is known for it (TPUs)"
    if not found and key.item == "disk" and key.name not in DISK_WORDS:
        return (
            f"no real SKU wording is known for {key.name} boot disks in training: none is guessed"
        )
    if not found:
        return "no SKU lists this region for it"
    if len(found) > 1:
        named = ", ".join(f"{s.skuId} ({s.description})" for s, _ in found)
        return f"ambiguous: {named}"
    sku, rate = found[0]
    if isinstance(rate, str):
        return f"SKU {sku.skuId}: {rate}"
    return Figure(float(rate), sku.skuId, sku.description)


def _composed(key: Key, source: Source, claims: dict, catalog: Catalog) -> Figure | str | None:
    """A machine's price from its family's vCPU and RAM SKUs that name its variant
    (`_series_for`); None when the family has neither in this region (for this kind and
    source)."""
    machines = catalog.machines if key.kind == "training" else catalog.serving_machines
    machine = machines[key.name]
    if machine.vcpus is None or machine.memory_gb is None:
        return "Google gives no vCPU and memory figures for this machine"
    series, not_plain = _series_for(machine, catalog)
    parts = {
        part: [
            c for name in series for c in claims.get((key.region, key.kind, part, name, source), [])
        ]
        for part in ("vcpu", "ram")
    }
    if not parts["vcpu"] and not parts["ram"]:
        plain = [(key.region, key.kind, part, machine.family, source) for part in ("vcpu", "ram")]
        return not_plain if not_plain and any(claims.get(k) for k in plain) else None
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
            entries: dict[str, dict[str, Price]] = {"machine": {}, "accelerator": {}}
            disks: dict[str, DiskPrice] = {}
            names = {
                (k.item, k.name) for k in matched.figures if (k.region, k.kind) == (region, kind)
            }
            for item, name in sorted(names):
                if item == "disk":
                    disks[name] = _disk_price(matched, region, kind, name, fetched_at)
                else:
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
                    disks=disks,
                    stand_in=stand_in,
                )
            )
    return found


def _disk_price(matched: Matched, region: str, kind: str, name: str, at: str) -> DiskPrice:
    figure = matched.figures[Key(region, kind, "disk", name, "on-demand")]  # type: ignore[arg-type]
    return DiskPrice(
        usd_per_gib_month=figure.usd_per_h,
        basis="catalog",
        sku=figure.sku,
        sku_description=figure.description,
        fetched_at=at,
    )


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
