"""The structural check of a REST document (a CustomJob, or gcloud's CustomJobSpec): unknown
fields, snake_case keys, wrong shapes, integers outside their proto type and invalid enum values,
walking the schema generated from the installed protos (`jobs.spec.rest_schema`), with the camelCase
path the API would use. What the API would refuse on parsing, refused before it is sent."""

from __future__ import annotations

import difflib
import re
from typing import Any

from jobs.core.durations import format_duration_s, parse_duration_s
from jobs.core.problems import Problem, join_path
from jobs.core.safe_yaml import short_repr
from jobs.spec.field_hints import field_hint
from jobs.spec.rest_schema import ROOT, integer_range, message_fields

SPEC_MESSAGE = "google.cloud.aiplatform.v1.CustomJobSpec"


def camel_case(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


_KIND_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "bool": (bool,),
    "number": (int, float, str),
    "duration": (str,),
    "timestamp": (str,),
    "map": (dict,),
    "message": (dict,),
    "enum": (str,),
    "bytes": (str,),
}
_KIND_EXAMPLES = {
    "string": "a string",
    "bool": "true or false",
    "number": "a number",
    "duration": 'a duration in seconds such as "86400s"',
    "timestamp": "an RFC 3339 time",
    "map": "a mapping",
    "message": "a mapping",
    "enum": "a value name",
    "bytes": "base64 text",
}
# Protobuf JSON durations are seconds with an 's' suffix; int64 may travel as a string.
_PROTO_DURATION = re.compile(r"^-?\d+(\.\d{1,9})?s$")
_INT_STRING = re.compile(r"^-?\d+$")
_INT_MAX_CHARS = 21  # "-" and 20 digits: longer digit strings are beyond any 64-bit integer


def _unknown_field(key: str, fields: dict[str, dict], path: str) -> Problem:
    camel = camel_case(key)
    if camel != key and camel in fields:
        return Problem(
            path,
            f"snake_case key {key!r}: gcloud's --config YAML and the REST API are camelCase",
            f"write {camel}",
        )
    hint = field_hint(key, rest=True)
    if hint is None:
        guess = difflib.get_close_matches(key, list(fields), n=1, cutoff=0.6)
        hint = (
            f"did you mean {guess[0]}?" if guess else f"known fields: {', '.join(sorted(fields))}"
        )
    return Problem(path, f"unknown field {key!r}", hint)


def _check_number(value: Any, scalar: str, path: str) -> list[Problem]:
    """What protobuf's JSON parser would refuse in an integer field: fractions, and values
    outside the proto type (replicaCount is int64, acceleratorCount and bootDiskSizeGb int32)."""
    if integer_range(scalar) is None:
        return []
    if isinstance(value, float):
        if not value.is_integer():
            return [Problem(path, f"expected a whole number, got {value!r}")]
        value = int(value)
    elif isinstance(value, str):
        # int() refuses 4,300 digits or more; 21 characters already exceed any 64-bit integer.
        value = int(value) if len(value) <= _INT_MAX_CHARS else value
    return integer_range_problems(value, scalar, path)


def integer_range_problems(value: int | str, scalar: str, path: str) -> list[Problem]:
    """``value`` (an int, or the text of one too long to convert) outside the proto type."""
    low, high = integer_range(scalar) or (0, 0)
    if isinstance(value, int) and low <= value <= high:
        return []
    field = re.sub(r"\[\d+\]$", "", path).rsplit(".", 1)[-1]
    return [
        Problem(
            path,
            f"{short_repr(value) if isinstance(value, str) else value} is out of range: the API "
            f"stores {field} as {scalar} ({low:,} to {high:,})",
            f"a whole number up to {high:,}",
        )
    ]


def _check_value(value: Any, spec: dict, path: str) -> list[Problem]:
    kind = spec["kind"]
    if kind in ("struct", "value"):
        return []
    expected = _KIND_TYPES[kind]
    ok = isinstance(value, expected) and not (kind == "number" and isinstance(value, bool))
    if kind == "string" and isinstance(value, int | float) and not isinstance(value, bool):
        ok = False
    if kind == "number" and isinstance(value, str) and not _INT_STRING.match(value):
        ok = False
    if not ok:
        # Environment entries may hold credentials (`- "HF_TOKEN=hf_..."`): name the type only.
        got = type(value).__name__ if ".env[" in path else short_repr(value)
        return [Problem(path, f"expected {_KIND_EXAMPLES[kind]}, got {got}")]
    if kind == "number":
        return _check_number(value, spec.get("scalar", "double"), path)
    if kind == "duration" and not _PROTO_DURATION.match(value):
        seconds = parse_duration_s(value)
        hint = f"write {format_duration_s(seconds)}" if seconds is not None else 'e.g. "86400s"'
        return [Problem(path, f"invalid duration {short_repr(value)}: the API takes seconds", hint)]
    if kind == "enum" and value not in spec["values"]:
        values = [v for v in spec["values"] if not v.endswith("_UNSPECIFIED")]
        upper = str(value).upper()
        hint = f"write {upper}" if upper in values else f"one of {', '.join(values)}"
        return [Problem(path, f"invalid value {short_repr(value)}", hint)]
    if kind == "message":
        return check_rest_fields(value, spec["type"], path)
    return []


def check_rest_fields(doc: Any, message: str = ROOT, path: str = "") -> list[Problem]:
    """Unknown fields, snake_case keys, wrong shapes and invalid enum values in a REST document,
    walking the schema generated from the installed protos."""
    if not isinstance(doc, dict):
        return [Problem(path or "(top)", f"expected a mapping, got {type(doc).__name__}")]
    fields = message_fields(message)
    problems: list[Problem] = []
    for key, value in doc.items():
        where = join_path(path, str(key))
        spec = fields.get(key) if isinstance(key, str) else None
        if spec is None:
            problems.append(_unknown_field(str(key), fields, where))
        elif value is None:
            continue
        elif spec["repeated"]:
            if not isinstance(value, list):
                problems.append(Problem(where, f"expected a list, got {type(value).__name__}"))
                continue
            # An empty pool `{}` is how a position is skipped; it has no fields to check.
            for i, item in enumerate(value):
                problems.extend(_check_value(item, spec, join_path(where, i)))
        else:
            problems.extend(_check_value(value, spec, where))
    return problems
