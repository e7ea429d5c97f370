"""What an offline run recorded: each resource as the mock engine saw it, and the run.

The offline runner (``infra.offline.program``) fills these; the preview (``infra.offline.preview``),
the review and the tests read them.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class RecordedResource:
    """One resource as the engine saw it. ``inputs``/``outputs`` use the provider's camelCase
    property names (``uniformBucketLevelAccess``), exactly as ``pulumi preview`` would show."""

    type: str
    """Pulumi type token, e.g. ``gcp:storage/bucket:Bucket``."""
    name: str
    """Logical (Pulumi) name."""
    inputs: dict[str, Any]
    outputs: dict[str, Any]
    parent: str | None
    """URN of the parent component (None for the root stack's children)."""
    component: str
    """The logical component it belongs to: ``network``, ``storage``... (``platform`` for
    resources declared by the Platform itself)."""
    urn: str
    id: str | None = None
    custom: bool = True
    dependencies: tuple[str, ...] = ()
    """URNs this resource waits for (``depends_on`` and the resources its inputs came from)."""


@dataclass
class OfflineRun:
    stack: str
    config_file: Path
    resources: list[RecordedResource]
    """Custom (cloud) resources, in registration order; providers and components excluded."""
    outputs: dict[str, Any]
    """Resolved stack outputs; ``outputs["platform"]`` is the StackOutputs contract."""
    components: list[RecordedResource] = field(default_factory=list)
    """The ComponentResources (``vtx:platform:*``), for grouping."""

    def of_type(self, type_token: str) -> list[RecordedResource]:
        return [r for r in self.resources if r.type == type_token]

    def by_component(self) -> dict[str, list[RecordedResource]]:
        grouped: dict[str, list[RecordedResource]] = defaultdict(list)
        for resource in self.resources:
            grouped[resource.component].append(resource)
        return dict(grouped)

    def depends_on(self, resource: RecordedResource, target: RecordedResource) -> bool:
        """Whether ``resource`` waits for ``target``, directly or through other resources."""
        by_urn = {r.urn: r for r in (*self.resources, *self.components)}
        seen, todo = set(), list(resource.dependencies)
        while todo:
            urn = todo.pop()
            if urn == target.urn:
                return True
            if urn not in seen and urn in by_urn:
                seen.add(urn)
                todo.extend(by_urn[urn].dependencies)
        return False

    def counts(self) -> dict[str, int]:
        counts: dict[str, int] = defaultdict(int)
        for resource in self.resources:
            counts[resource.type] += 1
        return dict(sorted(counts.items()))
