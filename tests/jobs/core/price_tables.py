"""Price tables and jobs to price, for the price tests and the CLI's tables."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import yaml

from jobs.core.catalog import Catalog, PriceTable, load_catalog
from jobs.custom_jobs.facts import JobFacts, template_facts
from jobs.spec.template import JobTemplate


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


US_CENTRAL1_TABLE = {
    "region": "us-central1",
    "as_of": "2026-11-27",
    "source": "https://example.invalid/pricing",
    "machines": {
        "g2-standard-8": {"usd_per_h": 0.75, "basis": "verified"},
        "a2-ultragpu-8g": {"usd_per_h": 10.0, "basis": "verified"},
        "n1-highcpu-16": {"usd_per_h": 0.5, "basis": "derived", "note": "a test figure"},
    },
    "accelerators": {
        "NVIDIA_L4": {"usd_per_h": 0.5, "basis": "verified"},
        "NVIDIA_A100_80GB": {"usd_per_h": 4.0, "basis": "verified"},
    },
}
"""Test figures, on-demand only (no Spot figures), for the machines and GPUs of the example
templates that the shipped us-central1 table leaves unknown."""


DISK_TABLE = {
    **US_CENTRAL1_TABLE,
    "machines": {"n1-standard-4": {"usd_per_h": 0.25, "basis": "verified"}},
    "disks": {"pd-ssd": {"usd_per_gib_month": 0.1825, "basis": "verified"}},
}
"""0.1825 $/GiB-month is 0.00025 $/GiB-hour over 730 hours: a test figure."""


def disk_job(worker_disk: dict, strategy: str | None = None) -> JobFacts:
    pools = {
        "chief": {"machine": "n1-standard-4"},
        "workers": {"machine": "n1-standard-4", "replicas": 3, "boot_disk": worker_disk},
    }
    """A chief on its default boot disk, three workers on ``worker_disk``."""
    return priced_job(pools, "us-central1", strategy)


def write_table(directory: Path, table: dict) -> Path:
    """``table`` where `vtx prices refresh` leaves its tables (``directory``: the user's prices
    folder), so that the CLI prices with it; its ``as_of`` must be newer than the shipped one's."""
    name = f"test-{table['region']}-{table['as_of']}"
    path = directory / f"{name}.yaml"
    path.write_text(yaml.safe_dump({"name": name, "currency": "USD", **table}))
    return path


def write_stand_in(
    directory: Path, figures: dict[str, tuple[float, ...]], as_of: str = "2026-11-27"
) -> list[Path]:
    """What `vtx prices refresh --stack local` writes, for n1-standard-4 only: a stand-in table
    per region of ``figures`` (region -> (on-demand, Spot[, FLEX_START]) $/h)."""
    written = []
    for region, (on_demand, spot, *flex_start) in figures.items():
        name = f"billing-local-training-{region}-{as_of}"
        table = {
            "name": name,
            "region": region,
            "currency": "USD",
            "as_of": as_of,
            "source": "the local platform's billing catalog stand-in (not Google's prices)",
            "spot_source": "the same",
            "stand_in": True,
            "machines": {
                "n1-standard-4": {
                    "usd_per_h": on_demand,
                    "basis": "catalog",
                    "spot_usd_per_h": spot,
                    "spot_basis": "catalog",
                }
            },
        }
        for usd in flex_start:
            table["flex_start_source"] = "the same"
            table["machines"]["n1-standard-4"].update(  # type: ignore[index]
                flex_start_usd_per_h=usd, flex_start_basis="catalog"
            )
        path = directory / f"{name}.yaml"
        path.write_text(yaml.safe_dump(table))
        written.append(path)
    return written


@contextmanager
def stand_in_for_the_platform(
    figures: dict[str, tuple[float, float]], as_of: str
) -> Iterator[list[Path]]:
    """Stand-in tables where the running local platform reads them too (the session's prices
    folder, which it inherited), removed after so that other tests see none."""
    written = write_stand_in(Path(os.environ["VTX_PRICES_DIR"]), figures, as_of)
    try:
        yield written
    finally:
        for path in written:
            path.unlink(missing_ok=True)
