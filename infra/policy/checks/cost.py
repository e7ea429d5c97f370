"""Checks that keep cost visible: a billing budget (prod) and the labels cost reports group by.

Labels count the provider's default labels too, since GCP merges them into every resource's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from infra.policy.labels import takes_labels
from infra.policy.rule_types import RuleContext, StackResource
from infra.policy.values import UNKNOWN

BUDGET = "gcp:billing/budget:Budget"


def budget_present(
    resources: Sequence[StackResource], _: RuleContext
) -> list[tuple[str, str | None]]:
    if any(resource.type == BUDGET for resource in resources):
        return []
    return [("the stack declares no billing budget", None)]


def labels_present(resource_type: str, props: Mapping[str, Any], ctx: RuleContext) -> list[str]:
    if not takes_labels(resource_type):
        return []
    labels = props.get("labels")
    if labels == UNKNOWN:
        return []
    effective = {**ctx.default_labels, **(labels if isinstance(labels, Mapping) else {})}
    if not effective:
        return ["no labels: cost reports cannot attribute this resource"]
    missing = [key for key in ctx.required_labels if key not in effective]
    return [f"labels lack {', '.join(missing)}"] if missing else []
