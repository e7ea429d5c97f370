"""How a launch names what a job runs on and each rung of a ladder, on every line it says."""

from __future__ import annotations

from jobs.pricing.estimates import CostEstimate


def resources(estimate: CostEstimate) -> str:
    """What a job runs on, short: ``2xL4``, ``16xH100_80GB+1xn1-highcpu-16``."""
    parts = []
    for pool in estimate.pools:
        if pool.accelerator:
            name = pool.accelerator.removeprefix("NVIDIA_").removeprefix("TESLA_")
            parts.append(f"{pool.accelerator_count * pool.replicas}x{name}")
        else:
            parts.append(f"{pool.replicas}x{pool.machine}")
    return "+".join(parts)


def rung_label(number: int, estimate: CostEstimate, warm_pool: str | None = None) -> str:
    """``rung 2 us-central1 2xL4 STANDARD``: how the walk names a rung on every line; a rung on
    a persistent resource says which (``rung 1 us-central1 1xL4 STANDARD on warm-l4``)."""
    on = f" on {warm_pool}" if warm_pool else ""
    return f"rung {number} {estimate.region} {resources(estimate)} {estimate.strategy}{on}"
