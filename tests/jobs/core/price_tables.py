"""Price tables and jobs to price, for the price tests and the CLI's tables."""

from __future__ import annotations

from jobs.core.catalog import Catalog, PriceTable, load_catalog
from jobs.spec.template import JobTemplate
from jobs.training.facts import JobFacts, template_facts


def priced_job(pools: dict, region: str | None = None, strategy: str | None = None) -> JobFacts:
    doc: dict = {"name": "priced", "image": "t", "pools": pools}
    if region:
        doc["region"] = region
    if strategy:
        doc["scheduling"] = {"strategy": strategy}
    return template_facts(JobTemplate.model_validate(doc))


def with_table(table: dict) -> Catalog:
    """The real catalog with its table for ``table['region']`` replaced by ``table``."""
    cat = load_catalog()
    others = tuple(t for t in cat.price_tables if t.region != table["region"])
    priced = PriceTable.model_validate({"name": "test", "currency": "USD", **table})
    return cat.model_copy(update={"price_tables": (*others, priced)})


SPOT_TABLE = {
    "region": "europe-west4",
    "as_of": "2026-11-23",
    "source": "https://example.invalid/pricing",
    "spot_source": "https://example.invalid/spot",
    "machines": {
        "g2-standard-8": {
            "usd_per_h": 1.0,
            "basis": "verified",
            "spot_usd_per_h": 0.3,
            "spot_basis": "verified",
        },
        "n1-standard-4": {"usd_per_h": 0.25, "basis": "verified"},
    },
    "accelerators": {
        "NVIDIA_L4": {
            "usd_per_h": 0.5,
            "basis": "verified",
            "spot_usd_per_h": 0.2,
            "spot_basis": "verified",
        }
    },
}
