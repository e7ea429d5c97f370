"""The local platform's billing catalog stand-in: Vertex AI's SKUs in the Cloud Billing Catalog
API's shape (v1 ``Sku``), one per region, machine or accelerator, training or prediction,
on-demand or Spot, for every region, machine and accelerator the catalog knows, and the two
halves of a FLEX_START price where FLEX_START runs the machine or GPU (Vertex's management fee
per kind; Compute Engine's DWS Defined Duration VM hour, served as Compute Engine's service), and
a training pd-ssd boot disk SKU per region in the words of the one real Vertex disk SKU known
(A005-98FE-36CC, "Vertex AI: Training/Pipelines on SSD backed PD Capacity", per GiB-month), so
that `vtx prices refresh --stack local` fills every table offline. No other disk type has one:
no real wording is known for it, and the stand-in writes only forms the matcher reads.

Fields as Google's reference names them
(https://cloud.google.com/billing/docs/reference/rest/v1/services.skus/list): ``name``
(``services/S/skus/ID``), ``skuId``, ``description``, ``category.{serviceDisplayName,
resourceFamily, resourceGroup, usageType}``, ``serviceRegions``, ``pricingInfo[{effectiveTime,
summary, pricingExpression{usageUnit, usageUnitDescription, baseUnit, baseUnitConversionFactor,
displayQuantity, tieredRates[{startUsageAmount, unitPrice{currencyCode, units, nanos}}]},
currencyConversionRate}]``, ``serviceProviderName``. Descriptions follow the form the matcher
reads (docs/vertex-facts.md, "Billing catalog") and each ends by saying it is this stand-in's.

THE FIGURES ARE NOT GOOGLE'S: each is made up from the machine's size (``STAND_IN_RATES``), the
same in every region, Spot at ``SPOT_SHARE`` of it, FLEX_START's VM hour at ``DWS_SHARE`` and its
fee at ``FEE_SHARE``, a GiB-month of pd-ssd at ``STAND_IN_RATES["disk_gib_month"]``, so that a
local run has a cost to show and test.

As the API does (cloudbilling v1 discovery document, ``services.skus.list`` and ``PricingInfo``):
without ``startTime``/``endTime`` each SKU's ``effectiveTime`` is a time within the last 12 hours
(the latest pricing); with them, the pricing in force in that window (the stand-in's never
changes, so its ``effectiveTime`` is the window's start: at or after ``startTime``, before
``endTime``). ``currencyCode`` converts every price from USD at ``currencyConversionRate`` ("USD *
currency_conversion_rate = JPY"); the stand-in's rates (``CONVERSION_RATES``) are made up too."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import ROUND_HALF_UP, Decimal

from jobs.core.catalog import HOURS_PER_MONTH, Catalog, load_catalog
from jobs.pricing.billing_skus import DISK_UNIT, FEE_WORDS, GPU_WORDS, takes_flex_start

SERVICE_ID = "C7E2-9256-1C43"
COMPUTE_SERVICE_ID = "6F81-5844-456A"
CURRENCY = "USD"
CONVERSION_RATES = {
    "USD": Decimal(1),
    "EUR": Decimal("0.92"),
    "GBP": Decimal("0.79"),
    "JPY": Decimal(150),
}
"""USD -> the currency, for the stand-in's conversions: invented, as its prices are."""


@dataclass(frozen=True)
class Pricing:
    """How one answer prices its SKUs: the time its pricing took effect, and the currency."""

    effective_time: datetime
    currency: str = CURRENCY

    @property
    def rate(self) -> Decimal:
        return CONVERSION_RATES[self.currency]


def latest_pricing(currency: str = CURRENCY, now: datetime | None = None) -> Pricing:
    """The latest pricing, as the API answers without a time range: effective within the last
    12 hours (the start of the current hour)."""
    at = (now or datetime.now(UTC)).replace(minute=0, second=0, microsecond=0)
    return Pricing(at, currency)


STAND_IN = "vtx local stand-in, not a Google price"
STAND_IN_RATES = {
    "vcpu": Decimal("0.04"),
    "gb": Decimal("0.005"),
    "gpu_gb": Decimal("0.03"),
    "disk_gib_month": Decimal("0.17"),
}
"""$/h per vCPU, per GB of machine memory, per GB of accelerator memory; $ per GiB-month of a
pd-ssd boot disk: invented."""
DISK_SKU_WORDS = "Vertex AI: Training/Pipelines on SSD backed PD Capacity"
"""The words of Vertex's pd-ssd training disk SKU (A005-98FE-36CC, docs/vertex-facts.md)."""
HOURLY = {
    "usageUnit": "h",
    "usageUnitDescription": "hour",
    "baseUnit": "s",
    "baseUnitDescription": "second",
    "baseUnitConversionFactor": 3600,
}
GIB_MONTHLY = {
    "usageUnit": DISK_UNIT,
    "usageUnitDescription": "gibibyte month",
    "baseUnit": "By.s",
    "baseUnitDescription": "byte second",
    # The stand-in's own factor, from the 730-hour month: Google's for this SKU was not read.
    "baseUnitConversionFactor": 2**30 * HOURS_PER_MONTH * 3600,
}
"""How the stand-in's SKUs state their unit: per hour, or per GiB-month (a disk)."""
SPOT_SHARE = Decimal("0.4")
DWS_SHARE = Decimal("0.45")
FEE_SHARE = Decimal("0.06")
GPU_NAMES = {"NVIDIA_B200": "Nvidia B200 (1 gpu slice)"}
"""A GPU whose SKUs name it otherwise than "Nvidia <words> GPU" (docs/vertex-facts.md)."""


def _sku_id(*parts: str) -> str:
    digest = hashlib.sha256("/".join(parts).encode()).hexdigest().upper()
    return f"{digest[0:4]}-{digest[4:8]}-{digest[8:12]}"


def _money(usd: Decimal, pricing: Pricing) -> dict:
    amount = (usd * pricing.rate).quantize(Decimal("0.000000001"), rounding=ROUND_HALF_UP)
    units = int(amount)
    return {
        "currencyCode": pricing.currency,
        "units": str(units),
        "nanos": int((amount - units) * 10**9),
    }


def _sku(
    region: str,
    description: str,
    group: str,
    usage: str,
    usd: Decimal,
    pricing: Pricing,
    service: str = SERVICE_ID,
    unit: dict | None = None,
) -> dict:
    sku_id = _sku_id(service, region, description, usage)
    return {
        "name": f"services/{service}/skus/{sku_id}",
        "skuId": sku_id,
        "description": f"{description} running in {region} ({STAND_IN})",
        "category": {
            "serviceDisplayName": "Vertex AI" if service == SERVICE_ID else "Compute Engine",
            "resourceFamily": "Storage" if unit is GIB_MONTHLY else "Compute",
            "resourceGroup": group,
            "usageType": "Preemptible" if usage == "spot" else "OnDemand",
        },
        "serviceRegions": [region],
        "pricingInfo": [
            {
                "effectiveTime": pricing.effective_time.isoformat().replace("+00:00", "Z"),
                "summary": "",
                "pricingExpression": {
                    **(unit or HOURLY),
                    "displayQuantity": 1,
                    "tieredRates": [{"startUsageAmount": 0, "unitPrice": _money(usd, pricing)}],
                },
                "currencyConversionRate": float(pricing.rate),
            }
        ],
        "serviceProviderName": "Google",
    }


def _priced(cat: Catalog) -> list[tuple[str, str, str, str, str, Decimal]]:
    """(region, kind, item, resource words, resource group, on-demand $/h) for every machine
    and GPU of every region, training and serving."""
    found = []
    for region in cat.regions.values():
        for kind, machines in (("training", cat.machines), ("serving", cat.serving_machines)):
            for machine in machines.values():
                if machine.family not in region.families or machine.vcpus is None:
                    continue  # cloud-tpu: no vCPU figure to price
                usd = machine.vcpus * STAND_IN_RATES["vcpu"]
                usd += Decimal(str(machine.memory_gb or 0)) * STAND_IN_RATES["gb"]
                found.append((region.name, kind, machine.name, machine.name, "CPU", usd))
            for name in region.accelerators:
                acc = cat.accelerators.get(name)
                if acc is None or name not in GPU_WORDS:
                    continue  # TPUs: no SKU form known (docs/vertex-facts.md)
                usd = Decimal(str(acc.memory_gb)) * STAND_IN_RATES["gpu_gb"]
                tesla = "Tesla " if "TESLA" in name else ""
                words = GPU_NAMES.get(name, f"Nvidia {tesla}{GPU_WORDS[name][0].upper()} GPU")
                found.append((region.name, kind, name, words, "GPU", usd))
    return found


def _item(name: str) -> str:
    return "accelerator" if name.isupper() else "machine"


def skus(cat: Catalog | None = None, pricing: Pricing | None = None) -> list[dict]:
    """Every Vertex AI SKU of the stand-in, in a stable order (pages are slices of it)."""
    cat = cat or load_catalog()
    pricing = pricing or latest_pricing()
    found = []
    for region, kind, name, words, group, usd in _priced(cat):
        product = "Custom Training" if kind == "training" else "Custom Prediction"
        found.append(_sku(region, f"{product} {words}", group, "on-demand", usd, pricing))
        spot = f"Spot Preemptible {product} {words}"
        found.append(_sku(region, spot, group, "spot", usd * SPOT_SHARE, pricing))
        if takes_flex_start(cat, _item(name), name):  # type: ignore[arg-type]
            fee = f"{product} {FEE_WORDS} {words}"
            found.append(_sku(region, fee, group, "on-demand", usd * FEE_SHARE, pricing))
    for region in cat.regions:
        usd = STAND_IN_RATES["disk_gib_month"]
        disk = _sku(region, DISK_SKU_WORDS, "SSD", "on-demand", usd, pricing, unit=GIB_MONTHLY)
        found.append(disk)
    return found


def compute_skus(cat: Catalog | None = None, pricing: Pricing | None = None) -> list[dict]:
    """The stand-in's Compute Engine SKUs: a DWS Defined Duration VM hour for every machine and
    GPU FLEX_START runs, once per region (training and serving share it, as on Google's)."""
    cat = cat or load_catalog()
    pricing = pricing or latest_pricing()
    found, seen = [], set()
    for region, _, name, words, group, usd in _priced(cat):
        if (region, name) in seen or not takes_flex_start(cat, _item(name), name):  # type: ignore[arg-type]
            continue
        seen.add((region, name))
        description = f"{words} attached to DWS Defined Duration VMs"
        dws = usd * DWS_SHARE
        found.append(
            _sku(region, description, group, "on-demand", dws, pricing, COMPUTE_SERVICE_ID)
        )
    return found


SERVICES = {SERVICE_ID: skus, COMPUTE_SERVICE_ID: compute_skus}
"""The services the stand-in answers for: Vertex AI's and Compute Engine's."""
