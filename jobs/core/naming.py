"""What names a Google Cloud resource, each rule checked in this one place: a resource id or name
in RFC 1035's grammar, a Vertex display name, a label's key and value (the limits are the
catalog's, jobs/core/catalog/limits.yaml). The template rules, the serving and tuning checks,
the local platform and infra's config all call these, so that each says the same thing.
"""

from __future__ import annotations

import re

from jobs.core.catalog import vertex_limits

RFC1035_MAX = 63
_NOT_NAME_CHARACTERS = re.compile(r"[^a-z0-9-]+")


def rfc1035_pattern(most: int = RFC1035_MAX) -> str:
    """An RFC 1035 name of 1 to ``most`` characters, unanchored: a lower case letter, then lower
    case letters, digits and '-', not ending in '-'. Compute Engine's resource names
    (reservations, networks) and Vertex's endpoint, deployed model and persistent resource ids."""
    return rf"[a-z](?:[a-z0-9-]{{0,{most - 2}}}[a-z0-9])?"


def rfc1035_name(text: str, most: int, prefix: str) -> str:
    """``text`` as an RFC 1035 name of at most ``most`` characters (``My Job_v2`` ->
    ``my-job-v2``): lower case, each run of other characters one '-', ``PREFIX-`` before a text
    that does not start with a letter (``prefix`` alone for one with nothing to keep)."""
    slug = _NOT_NAME_CHARACTERS.sub("-", text.lower()).strip("-")
    slug = slug if slug[:1].isalpha() else f"{prefix}-{slug}"
    return slug[:most].rstrip("-")


RFC1035_PATTERN = rfc1035_pattern()
"""The rule of 1 to 63 characters, to place in a longer pattern."""
RFC1035_NAME = re.compile(RFC1035_PATTERN)
"""Match with ``fullmatch``."""


# The limits are read when a name is checked, not at import: every command imports this module,
# and reading them builds their validator (the CLI's `--help` would pay it for nothing).
_NOT_LABEL_CHARACTER = re.compile(r"[^a-z0-9_-]")


def display_name_max() -> int:
    """The most characters a Vertex display name may have."""
    return vertex_limits().display_name_max_chars


def display_name_problem(name: str) -> str | None:
    """Why Vertex refuses ``name`` as a resource's display name, or None."""
    most = display_name_max()
    if 0 < len(name) <= most:
        return None
    length = f"{len(name)} characters" if name else "empty"
    return f"{length}; a display name has 1 to {most} characters"


def label_key_problem(key: str) -> str | None:
    """Why Vertex refuses ``key`` as a label's key, or None."""
    limits = vertex_limits()
    if re.fullmatch(limits.label_key_pattern, key) and len(key) <= limits.label_max_chars:
        return None
    return (
        f"invalid label key {key!r}: lower case letters, digits, '_' and '-', starting with a "
        f"letter, at most {limits.label_max_chars} characters"
    )


def label_value_problem(value: str) -> str | None:
    """Why Vertex refuses ``value`` as a label's value, or None."""
    limits = vertex_limits()
    if re.fullmatch(limits.label_value_pattern, value) and len(value) <= limits.label_max_chars:
        return None
    return (
        f"invalid label value {value!r}: lower case letters, digits, '_' and '-', at most "
        f"{limits.label_max_chars} characters"
    )


def labels_count_problem(labels: dict[str, str]) -> str | None:
    """Why Vertex refuses a resource's ``labels`` for their number, or None."""
    most = vertex_limits().labels_max
    return f"more than {most} labels" if len(labels) > most else None


def label_problems(labels: dict[str, str]) -> list[str]:
    """Every reason Vertex refuses a resource's ``labels`` map, each with its path
    (``labels.KEY: ...``)."""
    too_many = labels_count_problem(labels)
    problems = [] if too_many is None else [f"labels: {too_many}"]
    for key, value in labels.items():
        for problem in (label_key_problem(key), label_value_problem(value)):
            if problem is not None:
                problems.append(f"labels.{key}: {problem}")
    return problems


def label_value(text: str) -> str:
    """``text`` as a label may hold it: lower case, every other character '-', cut to the
    longest a label value may be."""
    return _NOT_LABEL_CHARACTER.sub("-", text.lower())[: vertex_limits().label_max_chars]
