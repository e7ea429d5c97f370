"""The rows of a review report's tables: plain records the builder fills and the diagram and
the renderers read, and ``shown``, how a value reads in them."""

from __future__ import annotations

from dataclasses import dataclass

from infra.policy.values import UNKNOWN

COMPUTED = "(computed)"


def shown(value: object) -> str:
    """A value as a reviewer should read it; engine unknowns become ``(computed)``."""
    if value is None:
        return "-"
    if value == UNKNOWN:
        return COMPUTED
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


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
