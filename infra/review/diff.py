"""What differs between two stacks (``vtx review --stack dev --against prod``).

Resources are matched by type and by name with the environment name blanked out
(``acme-vtx-dev-data`` and ``acme-vtx-prod-data`` are the same bucket in two stacks), and their
inputs compared key by key after the same blanking, so only real differences remain.

A reviewer must see what differs, so no differing value is ever shortened: the comparison goes
down into objects (and lists of objects of the same length) to the keys that differ
(``labels.cost-center``, ``lifecycleRules[0].condition.age``) and shows those values whole.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from infra.review.builder import Report
from infra.review.sources import ReviewSource


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


def _integral(value: Any) -> Any:
    """Whole floats as ints: engine numbers are protobuf doubles, so a 3-day rule reads 3.0."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, Mapping):
        return {key: _integral(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_integral(item) for item in value]
    return value


def _normalised(value: Any, blanks: Blanks) -> str:
    return _blank(json.dumps(_integral(value), sort_keys=True, default=str), blanks)


def _keyed(source: ReviewSource) -> dict[str, Mapping[str, Any]]:
    return {
        f"{r.type} {_blank(r.name, _blanks(source))}": r.inputs
        for r in source.resources
        if r.custom and not r.type.startswith("pulumi:")
    }


def _objects(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, Mapping) for item in value)


def _differences(
    path: str, left: Any, right: Any, blanks: tuple[Blanks, Blanks]
) -> Iterator[tuple[str, str, str]]:
    """(key path, left, right) for each smallest part that differs, each value in full.

    Lists of plain values (``sourceRanges``) are compared whole: an element-wise diff of a
    reordered list would say less than the two lists side by side."""
    if isinstance(left, Mapping) and isinstance(right, Mapping):
        for key in sorted(set(left) | set(right)):
            sub = f"{path}.{key}" if path else str(key)
            yield from _differences(sub, left.get(key), right.get(key), blanks)
        return
    if _objects(left) and _objects(right) and len(left) == len(right):
        for index, (a, b) in enumerate(zip(left, right, strict=True)):
            yield from _differences(f"{path}[{index}]", a, b, blanks)
        return
    a, b = _normalised(left, blanks[0]), _normalised(right, blanks[1])
    if a != b:
        yield path, a, b


def _changes(
    resource: str, left: Mapping, right: Mapping, blanks: tuple[Blanks, Blanks]
) -> Iterator[Change]:
    for key, a, b in _differences("", left, right, blanks):
        yield Change(resource, key, a, b)


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
