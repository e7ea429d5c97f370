"""Run the rules offline: over resources recorded under mocks or read from `pulumi preview --json`.

Mirrors what CrossGuard does with the same rules: resource rules see each resource's inputs, stack
rules see every resource's outputs (the root ``pulumi:pulumi:Stack`` carries the stack outputs).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from infra.policy.rule_types import Rule, RuleContext, StackResource
from infra.policy.rules import RULES
from jobs.core.stack import is_production


@dataclass(frozen=True)
class PolicySubject:
    """One resource as the policies see it."""

    type: str
    name: str
    urn: str
    inputs: Mapping[str, Any]
    outputs: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Violation:
    policy: str
    mandatory: bool
    message: str
    urn: str | None = None
    resource: str | None = None
    """``type name`` of the offending resource, None for a stack-level violation."""


@dataclass(frozen=True)
class Verdict:
    rule: Rule
    status: Literal["pass", "fail", "skipped"]
    violations: tuple[Violation, ...] = ()
    note: str = ""


def skip_reason(rule: Rule, ctx: RuleContext) -> str | None:
    """None when the rule applies, else why it was skipped."""
    if rule.egress_none_only and ctx.egress != "none":
        known = f"this stack's is {ctx.egress}" if ctx.egress else "this stack's is unknown"
        return f"network.egress none only; {known}"
    if not rule.prod_only:
        return None
    if ctx.environment is None:
        return "environment unknown"
    if is_production(ctx.environment):
        return None
    return f"prod only; this stack is {ctx.environment}"


def _violations(rule: Rule, subjects: Sequence[PolicySubject], ctx: RuleContext) -> list[Violation]:
    found: list[Violation] = []
    if rule.resource_check is not None:
        for subject in subjects:
            for message in rule.resource_check(subject.type, subject.inputs, ctx):
                found.append(
                    Violation(
                        rule.name,
                        rule.mandatory,
                        message,
                        subject.urn,
                        f"{subject.type} {subject.name}",
                    )
                )
    if rule.stack_check is not None:
        stack = [StackResource(s.type, s.name, s.urn, s.outputs or s.inputs) for s in subjects]
        by_urn = {s.urn: s for s in subjects}
        for message, urn in rule.stack_check(stack, ctx):
            subject = by_urn.get(urn) if urn else None
            resource = f"{subject.type} {subject.name}" if subject else None
            found.append(Violation(rule.name, rule.mandatory, message, urn, resource))
    return found


def evaluate(
    subjects: Sequence[PolicySubject], ctx: RuleContext, rules: Iterable[Rule] = RULES
) -> list[Verdict]:
    """One verdict per rule, in rule order."""
    verdicts = []
    for rule in rules:
        skipped = skip_reason(rule, ctx)
        if skipped is not None:
            verdicts.append(Verdict(rule, "skipped", note=skipped))
            continue
        violations = tuple(_violations(rule, subjects, ctx))
        verdicts.append(Verdict(rule, "fail" if violations else "pass", violations))
    return verdicts


def mandatory_violations(verdicts: Iterable[Verdict]) -> list[Violation]:
    return [v for verdict in verdicts for v in verdict.violations if v.mandatory]
