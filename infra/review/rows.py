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


@dataclass(frozen=True)
class HourlyCost:
    """What a persistent resource costs per hour, busy or idle, as the caller priced it (the
    review may not price: prices are jobs/' business; `vtx review` hands them in)."""

    usd_per_h: float | None
    """Every pool's always-up VMs; None when a figure is unknown."""
    max_usd_per_h: float | None
    """Every pool at its autoscaling maximum; None when unknown."""
    usd_per_month: float | None
    """A month of the floor (730 h): what it costs if no job ever runs on it."""
    text: str
    """How the report shows it: ``$1.23/h (up to $2.46/h scaled out)``, or unknown and why."""
