"""What differs between two stacks (``vtx review --stack dev --against prod``).

Resources are matched by type and by name with the environment name blanked out
(``acme-vtx-dev-data`` and ``acme-vtx-prod-data`` are the same bucket in two stacks), and their
inputs compared key by key after the same blanking, so only real differences remain.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from infra.review.builder import Report
from infra.review.sources import ReviewSource

_MAX_VALUE_CHARS = 80


@dataclass(frozen=True)
class Change:
    resource: str
    key: str
    left: str
    right: str


@dataclass
class StackDiff:
    left: str
    right: str
    counts: list[tuple[str, int, int]] = field(default_factory=list)
    only_left: list[str] = field(default_factory=list)
    only_right: list[str] = field(default_factory=list)
    changed: list[Change] = field(default_factory=list)
    settings: list[Change] = field(default_factory=list)


Blanks = tuple[tuple[str, str], ...]


def _blanks(source: ReviewSource) -> Blanks:
    """What is expected to differ between stacks: the environment name, the project number."""
    pairs = [(source.environment, "{env}"), (source.platform.get("project_number"), "{number}")]
    return tuple((str(value), placeholder) for value, placeholder in pairs if value)


def _blank(text: str, blanks: Blanks) -> str:
    for value, placeholder in blanks:
        text = re.sub(rf"(?<![A-Za-z0-9]){re.escape(value)}(?![A-Za-z0-9])", placeholder, text)
    return text


def _normalised(value: Any, blanks: Blanks) -> str:
    return _blank(json.dumps(value, sort_keys=True, default=str), blanks)


def _short(text: str) -> str:
    return text if len(text) <= _MAX_VALUE_CHARS else text[: _MAX_VALUE_CHARS - 1] + "…"


def _keyed(source: ReviewSource) -> dict[str, Mapping[str, Any]]:
    return {
        f"{r.type} {_blank(r.name, _blanks(source))}": r.inputs
        for r in source.resources
        if r.custom and not r.type.startswith("pulumi:")
    }


def _changes(resource: str, left: Mapping, right: Mapping, blanks: tuple[Blanks, Blanks]):
    for key in sorted(set(left) | set(right)):
        a, b = _normalised(left.get(key), blanks[0]), _normalised(right.get(key), blanks[1])
        if a != b:
            yield Change(resource, key, _short(a), _short(b))


def _type_totals(report: Report) -> Counter[str]:
    totals: Counter[str] = Counter()
    for count in report.counts:
        totals[count.type] += count.count
    return totals


def diff_stacks(
    left: ReviewSource, right: ReviewSource, left_report: Report, right_report: Report
) -> StackDiff:
    blanks = (_blanks(left), _blanks(right))
    result = StackDiff(left=left.stack, right=right.stack)
    left_counts, right_counts = _type_totals(left_report), _type_totals(right_report)
    result.counts = [
        (t, left_counts.get(t, 0), right_counts.get(t, 0))
        for t in sorted(set(left_counts) | set(right_counts))
        if left_counts.get(t, 0) != right_counts.get(t, 0)
    ]
    a, b = _keyed(left), _keyed(right)
    result.only_left = sorted(set(a) - set(b))
    result.only_right = sorted(set(b) - set(a))
    for key in sorted(set(a) & set(b)):
        result.changed.extend(_changes(key, a[key], b[key], blanks))
    result.settings = [
        Change("network", "mode", left_report.network["mode"], right_report.network["mode"]),
        *(
            Change("policy", lp.policy, lp.status, rp.status)
            for lp, rp in zip(left_report.policy, right_report.policy, strict=True)
        ),
    ]
    result.settings = [s for s in result.settings if s.left != s.right]
    return result
