"""The rules of ``rules.py`` as CrossGuard policies: ``POLICIES`` is what ``__main__`` packs.

Which environment a stack is comes, in order, from the policy config (``environment``, set with
``pulumi preview --policy-pack-config``), from the stack's own ``vtx:platform`` config (the engine
hands stack config to the pack in ``PULUMI_CONFIG``) or from the stack name (``PULUMI_STACK``).
A prod-only rule that cannot tell reports itself not applicable rather than guessing.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    PolicyConfigSchema,
    PolicyProviderResource,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)
from pulumi_policy.proxy import UnknownValueError

from infra.policy.evaluate import skip_reason
from infra.policy.rule_types import Rule, RuleContext, StackResource
from infra.policy.rules import RULES
from infra.policy.values import UNKNOWN

CONFIG_SCHEMA = PolicyConfigSchema(
    properties={
        "environment": {"type": "string", "description": "dev, prod...; overrides the stack's"},
        "egress": {"type": "string", "description": "nat or none; overrides the stack's"},
        "required_labels": {"type": "array", "items": {"type": "string"}},
    }
)


def plain(value: Any) -> Any:
    """A plain copy of CrossGuard's property proxy, unknown values replaced by ``UNKNOWN``.

    The proxy raises as soon as an unknown value is touched, which would stop a rule that scans
    every property; the rules treat ``UNKNOWN`` like ``pulumi preview --json`` shows it instead."""
    if isinstance(value, Mapping):
        items: dict[str, Any] = {}
        for key in value:
            try:
                items[key] = plain(value[key])
            except UnknownValueError:
                items[key] = UNKNOWN
        return items
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        elements: list[Any] = []
        for index in range(len(value)):
            try:
                elements.append(plain(value[index]))
            except UnknownValueError:
                elements.append(UNKNOWN)
        return elements
    return value


def _stack_platform(environ: Mapping[str, str]) -> Mapping[str, Any] | None:
    """The stack's ``vtx:platform`` config, as the engine hands it over in ``PULUMI_CONFIG``."""
    try:
        config = json.loads(environ.get("PULUMI_CONFIG", "{}"))
        platform = config.get("vtx:platform")
        platform = json.loads(platform) if isinstance(platform, str) else platform
    except json.JSONDecodeError:
        return None
    return platform if isinstance(platform, Mapping) else None


def stack_config_environment(environ: Mapping[str, str]) -> str | None:
    """``environment`` from the stack's ``vtx:platform`` config, or the stack's name."""
    platform = _stack_platform(environ)
    if platform is not None and platform.get("environment"):
        return str(platform["environment"])
    stack = environ.get("PULUMI_STACK")
    return stack.rsplit("/", 1)[-1] if stack else None


def stack_config_egress(environ: Mapping[str, str]) -> str | None:
    """``network.egress`` from the stack's ``vtx:platform`` config (``nat`` when unset, as the
    program reads it), None without a ``vtx:platform`` config."""
    platform = _stack_platform(environ)
    if platform is None:
        return None
    network = platform.get("network")
    egress = network.get("egress") if isinstance(network, Mapping) else None
    return str(egress) if egress else "nat"


def context(
    config: Mapping[str, Any],
    provider: PolicyProviderResource | None = None,
    environ: Mapping[str, str] = os.environ,
) -> RuleContext:
    environment = config.get("environment") or stack_config_environment(environ)
    egress = config.get("egress") or stack_config_egress(environ)
    default_labels: Mapping[str, str] = {}
    if provider is not None:
        labels = plain(provider.props).get("defaultLabels")
        default_labels = labels if isinstance(labels, Mapping) else {}
    required = config.get("required_labels")
    return RuleContext(
        environment=environment,
        required_labels=tuple(required) if required is not None else RuleContext.required_labels,
        default_labels=default_labels,
        egress=egress,
    )


def _message(rule: Rule, name: str | None, message: str) -> str:
    where = f"{name}: " if name else ""
    return f"{where}{message}. Fix: {rule.remediation}."


def resource_validation(rule: Rule):
    """The CrossGuard validate callback for a resource rule."""
    check = rule.resource_check
    assert check is not None

    def validate(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
        ctx = context(args.get_config(), args.provider)
        skipped = skip_reason(rule, ctx)
        if skipped is not None:
            args.not_applicable(skipped)
        for message in check(args.resource_type, plain(args.props), ctx):
            report_violation(_message(rule, args.name, message), None)

    return validate


def stack_validation(rule: Rule):
    """The CrossGuard validate callback for a stack rule."""
    check = rule.stack_check
    assert check is not None

    def validate(args: StackValidationArgs, report_violation: ReportViolation) -> None:
        ctx = context(args.get_config())
        skipped = skip_reason(rule, ctx)
        if skipped is not None:
            args.not_applicable(skipped)
        resources = [
            StackResource(r.resource_type, r.name, r.urn, plain(r.props)) for r in args.resources
        ]
        for message, urn in check(resources, ctx):
            report_violation(_message(rule, None, message), urn)

    return validate


def to_policy(rule: Rule) -> ResourceValidationPolicy | StackValidationPolicy:
    level = EnforcementLevel.MANDATORY if rule.mandatory else EnforcementLevel.ADVISORY
    common = {
        "name": rule.name,
        "description": rule.description,
        "enforcement_level": level,
        "config_schema": CONFIG_SCHEMA,
        "remediation_steps": rule.remediation,
    }
    if rule.resource_check is not None:
        return ResourceValidationPolicy(validate=resource_validation(rule), **common)
    return StackValidationPolicy(validate=stack_validation(rule), **common)


POLICIES: list[ResourceValidationPolicy | StackValidationPolicy] = [to_policy(r) for r in RULES]
