"""The ``filter`` of ListCustomJobs: the subset of AIP-160 that Vertex documents for jobs.

ListCustomJobsRequest.filter's doc: ``display_name`` supports ``=``, ``!=`` and the ``:``
wildcard (``display_name:"my_job_*"``); ``state`` ``=`` and ``!=``; ``create_time`` ``=``,
``!=``, ``<``, ``<=``, ``>``, ``>=`` against an RFC 3339 time
(``create_time>"2021-05-18T00:00:00Z"``); ``labels.KEY=VALUE`` and ``labels.KEY:*``
(presence). Each term may be negated by ``NOT`` or ``-``; terms are joined by ``AND`` / ``OR``
(AND binds tighter; no parentheses). ``displayName`` and ``createTime`` are accepted for the
snake_case names. Hand-written because the grammar is this small and no maintained AIP-160
evaluator exists for Python; anything else is rejected with a message rather than silently
ignored.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

_TERM = re.compile(
    r"""\s*(?P<neg>NOT\s+|-)?
    (?P<field>[A-Za-z_][\w.\-]*(?:"(?:[^"\\]|\\.)*")?)\s*(?P<op>!=|<=|>=|=|<|>|:)\s*
    (?P<value>"(?:[^"\\]|\\.)*"|[^\s"()]+)\s*""",
    re.VERBOSE,
)
_JOINER = re.compile(r"\s*(AND|OR)\b\s*")
_TIME_FIELDS = ("create_time", "createTime")
_ORDERINGS = ("<", "<=", ">", ">=")


class FilterError(ValueError):
    """The filter uses something outside the supported subset."""


@dataclass(frozen=True)
class Term:
    """One ``[NOT ]field op value`` of a filter, the value unquoted."""

    negate: bool
    field: str
    op: str
    value: str


def _job_hit(term: Term, job: dict) -> bool:
    actual = _field_value(job, term.field)
    if term.field in _TIME_FIELDS:
        return actual is not None and _compare_times(_time(actual), term.op, _time(term.value))
    if term.op == ":":
        return _has(actual, term.value)
    return actual == term.value if term.op == "=" else actual != term.value


def _has(actual: str | None, value: str) -> bool:
    """AIP-160's ``:``: ``*`` alone tests presence, ``*`` inside a value is a wildcard (the
    docs' ``display_name:"my_job_*"``), else the value is looked for inside the field."""
    if value == "*":
        return actual is not None
    if "*" in value:
        return glob_match(value, actual or "")
    return value in (actual or "")


def glob_match(pattern: str, text: str) -> bool:
    """Whether ``text`` is ``pattern`` with each ``*`` standing for any run of characters.

    Not fnmatch or re: both turn each ``*`` into a backtracking ``.*``, and a client's
    ``"*a*a*a*a*a*a*a*a*a*a*a*a*b"`` against a long name of ``a``s then tries every way to
    place a dozen stars (time exponential in their number). Stars only ever stand for "any
    run", so the pieces between them can be matched greedily: the first piece must start the
    text, the last must end it, each one between is taken at its leftmost place after the one
    before (leftmost leaves the most room to the rest, so no other place can succeed where it
    fails). One pass from left to right: each piece is searched for once, never again."""
    if "*" not in pattern:
        return text == pattern
    first, *middle, last = pattern.split("*")
    if len(text) < len(first) + len(last) or not text.startswith(first):
        return False
    position, end = len(first), len(text) - len(last)
    for piece in middle:
        found = text.find(piece, position, end)
        if found < 0:
            return False
        position = found + len(piece)
    return text.endswith(last)


def _time(text: str) -> datetime:
    """An RFC 3339 time (``Z`` or an offset; fractions of a second allowed)."""
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError as exc:
        raise FilterError(
            f"create_time must be compared with an RFC 3339 time such as "
            f'"2026-01-01T00:00:00Z", not {text!r}'
        ) from exc
    if parsed.tzinfo is None:
        raise FilterError(f"create_time {text!r} needs a time zone: end it with Z or +HH:MM")
    return parsed


def _compare_times(actual: datetime, op: str, wanted: datetime) -> bool:
    return {
        "=": actual == wanted,
        "!=": actual != wanted,
        "<": actual < wanted,
        "<=": actual <= wanted,
        ">": actual > wanted,
        ">=": actual >= wanted,
    }[op]


def _check_term(field: str, op: str, value: str) -> None:
    """Refuse now, not per job, what the documented grammar does not allow."""
    _field_value({}, field)
    if field in _TIME_FIELDS:
        if op == ":":
            raise FilterError("create_time supports =, !=, <, <=, > and >=, not ':'")
        _time(value)
    elif op in _ORDERINGS:
        raise FilterError(f"{field} supports =, != and ':'; {op} is for create_time only")


def _field_value(job: dict, field: str) -> str | None:
    if field in _TIME_FIELDS:
        return job.get("createTime")
    if field == "state":
        return job.get("state")
    if field in ("display_name", "displayName"):
        return job.get("displayName")
    if field.startswith("labels."):
        return job.get("labels", {}).get(field[len("labels.") :])
    raise FilterError(
        f"cannot filter on {field!r}: the local platform supports state, display_name, "
        f"create_time and labels.KEY"
    )


def parse_filter(text: str) -> Callable[[dict], bool]:
    """A predicate over REST-form jobs; FilterError names what could not be parsed."""
    alternatives = parse_terms(text, FilterError)
    for terms in alternatives:
        for term in terms:
            _check_term(term.field, term.op, term.value)
    return matcher(alternatives, _job_hit)


def parse_terms(text: str, error: type[ValueError]) -> list[list[Term]]:
    """The grammar every local list filter shares: terms, each maybe negated, joined by AND and
    OR; the OR-alternatives, each a list of AND-ed terms (none for an empty filter)."""
    if not text.strip():
        return []
    alternatives: list[list[Term]] = [[]]
    pos = 0
    while pos < len(text):
        match = _TERM.match(text, pos)
        if match is None:
            raise error(f"cannot parse filter {text!r} at position {pos}: {text[pos:]!r}")
        field, value = _unquoted_key(match["field"]), _unquoted(match["value"])
        alternatives[-1].append(Term(bool(match["neg"]), field, match["op"], value))
        pos = match.end()
        if pos >= len(text):
            break
        joiner = _JOINER.match(text, pos)
        if joiner is None:
            raise error(f"expected AND or OR in filter {text!r} at position {pos}")
        if joiner[1] == "OR":
            alternatives.append([])
        pos = joiner.end()
    return alternatives


def _unquoted(value: str) -> str:
    return value[1:-1].replace('\\"', '"') if value.startswith('"') else value


def _unquoted_key(field: str) -> str:
    """``labels."a key"`` -> ``labels.a key``: a map key with a space is quoted (the Model
    Registry's and endpoints' filter docs)."""
    head, quote, rest = field.partition('"')
    return head + _unquoted(quote + rest) if quote else field


def matcher(
    alternatives: list[list[Term]], hit: Callable[[Term, dict], bool]
) -> Callable[[dict], bool]:
    """A predicate: any alternative whose terms all hit (a negated term: all miss)."""
    if not alternatives:
        return lambda _item: True
    return lambda item: any(all(hit(t, item) != t.negate for t in terms) for terms in alternatives)
