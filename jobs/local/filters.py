"""The ``filter`` of ListCustomJobs: the subset of AIP-160 that Vertex documents for jobs.

Supported: ``state``, ``display_name`` (or ``displayName``) and ``labels.KEY`` with ``=``,
``!=`` and ``:`` (``labels.KEY:*`` tests presence), each term optionally negated by ``NOT`` or
``-``, joined by ``AND`` / ``OR`` (AND binds tighter; no parentheses). Hand-written because
the grammar is this small and no maintained AIP-160 evaluator exists for Python; anything
else is rejected with a message rather than silently ignored.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

_TERM = re.compile(
    r"""\s*(?P<neg>NOT\s+|-)?
    (?P<field>[A-Za-z_][\w.\-]*)\s*(?P<op>!=|=|:)\s*
    (?P<value>"(?:[^"\\]|\\.)*"|[^\s"()]+)\s*""",
    re.VERBOSE,
)
_JOINER = re.compile(r"\s*(AND|OR)\b\s*")


class FilterError(ValueError):
    """The filter uses something outside the supported subset."""


@dataclass(frozen=True)
class _Term:
    negate: bool
    field: str
    op: str
    value: str

    def matches(self, job: dict) -> bool:
        actual = _field_value(job, self.field)
        if self.op == ":":
            hit = actual is not None if self.value == "*" else self.value in (actual or "")
        elif self.op == "=":
            hit = actual == self.value
        else:
            hit = actual != self.value
        return hit != self.negate


def _field_value(job: dict, field: str) -> str | None:
    if field == "state":
        return job.get("state")
    if field in ("display_name", "displayName"):
        return job.get("displayName")
    if field.startswith("labels."):
        return job.get("labels", {}).get(field[len("labels.") :])
    raise FilterError(
        f"cannot filter on {field!r}: the local platform supports state, display_name and "
        f"labels.KEY"
    )


def parse_filter(text: str) -> Callable[[dict], bool]:
    """A predicate over REST-form jobs; FilterError names what could not be parsed."""
    if not text.strip():
        return lambda _job: True
    alternatives: list[list[_Term]] = [[]]
    pos = 0
    while pos < len(text):
        match = _TERM.match(text, pos)
        if match is None:
            raise FilterError(f"cannot parse filter {text!r} at position {pos}: {text[pos:]!r}")
        value = match["value"]
        if value.startswith('"'):
            value = value[1:-1].replace('\\"', '"')
        term = _Term(bool(match["neg"]), match["field"], match["op"], value)
        _field_value({}, term.field)  # reject unknown fields now, not per job
        alternatives[-1].append(term)
        pos = match.end()
        if pos >= len(text):
            break
        joiner = _JOINER.match(text, pos)
        if joiner is None:
            raise FilterError(f"expected AND or OR in filter {text!r} at position {pos}")
        if joiner[1] == "OR":
            alternatives.append([])
        pos = joiner.end()
    return lambda job: any(all(t.matches(job) for t in terms) for terms in alternatives)
