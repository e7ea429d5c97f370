"""The local platform's billing catalog stand-in: Vertex AI's SKUs in the Cloud Billing Catalog
API's shape (v1 ``Sku``), one per region, machine or accelerator, training or prediction,
on-demand or Spot, for every region, machine and accelerator the catalog knows, so that
`vtx prices refresh --stack local` fills every table offline.

Fields as Google's reference names them
(https://cloud.google.com/billing/docs/reference/rest/v1/services.skus/list): ``name``
(``services/S/skus/ID``), ``skuId``, ``description``, ``category.{serviceDisplayName,
resourceFamily, resourceGroup, usageType}``, ``serviceRegions``, ``pricingInfo[{effectiveTime,
summary, pricingExpression{usageUnit, usageUnitDescription, baseUnit, baseUnitConversionFactor,
displayQuantity, tieredRates[{startUsageAmount, unitPrice{currencyCode, units, nanos}}]},
currencyConversionRate}]``, ``serviceProviderName``. Descriptions follow the form the matcher
reads (docs/vertex-facts.md, "Billing catalog") and each ends by saying it is this stand-in's.

THE FIGURES ARE NOT GOOGLE'S: each is made up from the machine's size (``STAND_IN_RATES``), the
same in every region, Spot at ``SPOT_SHARE`` of it, so that a local run has a cost to show and
test. Only USD is served: another ``currencyCode`` is answered 400, as nothing converts here."""

from __future__ import annotations

import hashlib
from decimal import ROUND_HALF_UP, Decimal

from jobs.core.catalog import Catalog, load_catalog
from jobs.core.catalog.billing_skus import GPU_WORDS

SERVICE_ID = "C7E2-9256-1C43"
CURRENCY = "USD"
EFFECTIVE_TIME = "2026-11-01T00:00:00Z"
STAND_IN = "vtx local stand-in, not a Google price"
STAND_IN_RATES = {"vcpu": Decimal("0.04"), "gb": Decimal("0.005"), "gpu_gb": Decimal("0.03")}
"""$/h per vCPU, per GB of machine memory, per GB of accelerator memory: invented."""
SPOT_SHARE = Decimal("0.4")


def _sku_id(*parts: str) -> str:
    digest = hashlib.sha256("/".join(parts).encode()).hexdigest().upper()
    return f"{digest[0:4]}-{digest[4:8]}-{digest[8:12]}"


def _money(usd: Decimal) -> dict:
    usd = usd.quantize(Decimal("0.000000001"), rounding=ROUND_HALF_UP)
    units = int(usd)
    return {"currencyCode": CURRENCY, "units": str(units), "nanos": int((usd - units) * 10**9)}


def _sku(region: str, kind: str, resource: str, group: str, spot: bool, usd: Decimal) -> dict:
    product = "Custom Training" if kind == "training" else "Custom Prediction"
    spot_words = "Spot Preemptible " if spot else ""
    description = f"{spot_words}{product} {resource} running in {region} ({STAND_IN})"
    sku_id = _sku_id(region, kind, resource, str(spot))
    price = usd * SPOT_SHARE if spot else usd
    return {
        "name": f"services/{SERVICE_ID}/skus/{sku_id}",
        "skuId": sku_id,
        "description": description,
        "category": {
            "serviceDisplayName": "Vertex AI",
            "resourceFamily": "Compute",
            "resourceGroup": group,
            "usageType": "Preemptible" if spot else "OnDemand",
        },
        "serviceRegions": [region],
        "pricingInfo": [
            {
                "effectiveTime": EFFECTIVE_TIME,
                "summary": "",
                "pricingExpression": {
                    "usageUnit": "h",
                    "usageUnitDescription": "hour",
                    "baseUnit": "s",
                    "baseUnitDescription": "second",
                    "baseUnitConversionFactor": 3600,
                    "displayQuantity": 1,
                    "tieredRates": [{"startUsageAmount": 0, "unitPrice": _money(price)}],
                },
                "currencyConversionRate": 1,
            }
        ],
        "serviceProviderName": "Google",
    }


def skus(cat: Catalog | None = None) -> list[dict]:
    """Every SKU of the stand-in, in a stable order (pages are slices of it)."""
    cat = cat or load_catalog()
    found = []
    for region in cat.regions.values():
        for kind, machines in (("training", cat.machines), ("serving", cat.serving_machines)):
            for machine in machines.values():
                if machine.family not in region.families or machine.vcpus is None:
                    continue  # cloud-tpu: no vCPU figure to price
                usd = machine.vcpus * STAND_IN_RATES["vcpu"]
                usd += Decimal(str(machine.memory_gb or 0)) * STAND_IN_RATES["gb"]
                for spot in (False, True):
                    found.append(_sku(region.name, kind, machine.name, "CPU", spot, usd))
            for name in region.accelerators:
                acc = cat.accelerators.get(name)
                if acc is None or name not in GPU_WORDS:
                    continue  # TPUs: no SKU form known (docs/vertex-facts.md)
                usd = Decimal(str(acc.memory_gb)) * STAND_IN_RATES["gpu_gb"]
                resource = f"Nvidia {GPU_WORDS[name].title()} GPU"
                for spot in (False, True):
                    found.append(_sku(region.name, kind, resource, "GPU", spot, usd))
    return found
