"""What a rule is: its context, the resources a stack check sees and the two kinds of check.

A resource check takes a resource's Pulumi type token and its input properties, with Pulumi's wire
names (camelCase: ``uniformBucketLevelAccess``, as CrossGuard and the unit-test mocks see them),
and returns violation messages. A stack check takes every resource of the stack and returns
(message, urn) pairs. No Pulumi import in the rules: the same checks run inside CrossGuard
(``policies.py``), offline under mocks and over a ``pulumi preview --json`` file (``evaluate.py``).

Environment-specific rules are marked ``prod_only``, rules of closed-egress stacks
``egress_none_only``; the caller decides the environment and the egress mode, so the checks
themselves stay oblivious of where they run.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class RuleContext:
    """What a rule may need besides the resource itself."""

    environment: str | None = None
    required_labels: tuple[str, ...] = ("environment",)
    default_labels: Mapping[str, str] = field(default_factory=dict)
    """Provider-level default labels, which GCP merges into every resource's labels."""
    egress: str | None = None
    """The stack's ``network.egress`` (``nat`` or ``none``); None when not known."""


@dataclass(frozen=True)
class StackResource:
    type: str
    name: str
    urn: str
    props: Mapping[str, Any]


ResourceCheck = Callable[[str, Mapping[str, Any], RuleContext], list[str]]
StackCheck = Callable[[Sequence[StackResource], RuleContext], list[tuple[str, str | None]]]


@dataclass(frozen=True)
class Rule:
    name: str
    description: str
    remediation: str
    mandatory: bool = True
    prod_only: bool = False
    egress_none_only: bool = False
    """Applies to stacks whose training has no route to the internet (``egress: none``)."""
    resource_check: ResourceCheck | None = None
    stack_check: StackCheck | None = None

    def __post_init__(self) -> None:
        # CrossGuard has one policy class per kind; a rule is exactly one of them.
        if (self.resource_check is None) == (self.stack_check is None):
            raise ValueError(f"rule {self.name} needs exactly one of resource_check, stack_check")
