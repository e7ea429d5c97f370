"""The rows of a review report's tables: plain records the builder fills and the diagram and
the renderers read."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TypeCount:
    component: str
    type: str
    count: int


@dataclass(frozen=True)
class IamRow:
    principal: str
    role: str
    resource_kind: str
    resource: str
    project_wide: bool
    declared_by: str


@dataclass(frozen=True)
class PolicyRow:
    policy: str
    status: str
    mandatory: bool
    description: str
    violations: list[str]
    note: str = ""
