"""Where Vertex resources live: a stack's parent path in a region, and the region's endpoint
(the SDK and the REST clients both address them this way)."""

from __future__ import annotations

from jobs.core.stack import StackOutputs


def parent(stack: StackOutputs, region: str | None = None) -> str:
    """Where a job of the stack lives: its own region, or one of its further ones."""
    return f"projects/{stack.project}/locations/{region or stack.region}"


def region_endpoint(region: str) -> str:
    """Vertex's regional endpoint: a job is created and read in its own region only."""
    return f"{region}-aiplatform.googleapis.com"
