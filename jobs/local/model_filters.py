"""The ``filter`` of ListModels and ListModelVersions, as model_service.proto documents it.

ListModels: ``model`` (the model id, the last segment of its name) with ``=`` and ``!=``,
``display_name`` (or ``displayName``) with ``=`` and ``!=``, ``labels.KEY`` with ``=``, ``!=``
and ``:`` (``labels.KEY:*`` tests presence). ListModelVersions: ``labels.KEY`` only. Terms may
be negated by ``NOT`` or ``-`` and joined by ``AND`` / ``OR`` (AND binds tighter; no
parentheses), as jobs/local/filters.py reads the jobs' filter. ``base_model_name`` (Model
Garden models) is not served: it is refused with a message, like anything else outside this.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection
from dataclasses import dataclass

MODEL_FIELDS = ("model", "display_name", "displayName", "labels")
VERSION_FIELDS = ("labels",)

_TERM = re.compile(
    r"""\s*(?P<neg>NOT\s+|-)?
    (?P<field>[A-Za-z_][\w.\-]*)\s*(?P<op>!=|=|:)\s*
    (?P<value>"(?:[^"\\]|\\.)*"|[^\s"()]+)\s*""",
    re.VERBOSE,
)
_JOINER = re.compile(r"\s*(AND|OR)\b\s*")


class ModelFilterError(ValueError):
    """The filter uses something outside the supported subset."""


@dataclass(frozen=True)
class _Term:
    negate: bool
    field: str
    op: str
    value: str

    def matches(self, model: dict) -> bool:
        actual = _value(model, self.field)
        if self.op == ":":
            hit = actual is not None if self.value == "*" else self.value in (actual or "")
        elif self.op == "=":
            hit = actual == self.value
        else:
            hit = actual != self.value
        return hit != self.negate


def _value(model: dict, field: str) -> str | None:
    if field == "model":
        return str(model.get("name", "")).rsplit("/", 1)[-1]
    if field in ("display_name", "displayName"):
        return model.get("displayName")
    return (model.get("labels") or {}).get(field.removeprefix("labels."))


def _check_field(field: str, op: str, allowed: Collection[str]) -> None:
    base = "labels" if field.startswith("labels.") else field
    if base not in allowed or field == "labels":
        raise ModelFilterError(
            f"cannot filter on {field!r}: supported here are "
            f"{', '.join(f for f in allowed if f != 'displayName')}"
            f"{'.KEY' if allowed == VERSION_FIELDS else ' (labels.KEY)'}"
        )
    if op == ":" and base != "labels":
        raise ModelFilterError(f"{field!r} supports = and != only")


def parse_model_filter(
    text: str, allowed: Collection[str] = MODEL_FIELDS
) -> Callable[[dict], bool]:
    """A predicate over REST-form models; ModelFilterError names what could not be parsed."""
    if not text.strip():
        return lambda _model: True
    alternatives: list[list[_Term]] = [[]]
    pos = 0
    while pos < len(text):
        match = _TERM.match(text, pos)
        if match is None:
            raise ModelFilterError(
                f"cannot parse filter {text!r} at position {pos}: {text[pos:]!r}"
            )
        value = match["value"]
        if value.startswith('"'):
            value = value[1:-1].replace('\\"', '"')
        _check_field(match["field"], match["op"], allowed)
        alternatives[-1].append(_Term(bool(match["neg"]), match["field"], match["op"], value))
        pos = match.end()
        if pos >= len(text):
            break
        joiner = _JOINER.match(text, pos)
        if joiner is None:
            raise ModelFilterError(f"expected AND or OR in filter {text!r} at position {pos}")
        if joiner[1] == "OR":
            alternatives.append([])
        pos = joiner.end()
    return lambda model: any(all(t.matches(model) for t in terms) for terms in alternatives)
