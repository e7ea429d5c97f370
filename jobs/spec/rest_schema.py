"""The field schema of a REST-form CustomJob, as data, so validation never imports aiplatform.

`jobs/core/catalog/custom_job_schema.json` is generated from the installed `aiplatform_v1` protos by
``python -m jobs.spec.rest_schema`` and a test checks that it still matches them. Validation walks a
document against it: unknown fields, wrong shapes and invalid enum values are reported with the
camelCase path the API would use."""

from __future__ import annotations

import json
from functools import cache
from typing import Any

from jobs.core.catalog import CATALOG_DIR

SCHEMA_PATH = CATALOG_DIR / "custom_job_schema.json"
ROOT = "google.cloud.aiplatform.v1.CustomJob"
# Well-known types whose JSON form is a scalar (a string such as "3600s" or an RFC 3339 time).
_SCALAR_MESSAGES = {
    "google.protobuf.Duration": "duration",
    "google.protobuf.Timestamp": "timestamp",
    "google.protobuf.Struct": "struct",
    "google.protobuf.Value": "value",
}


def integer_range(scalar: str) -> tuple[int, int] | None:
    """The values a protobuf integer type holds (``int64``, ``uint32``...); None for floats."""
    bits = {"int32": 32, "int64": 64, "uint32": 32, "uint64": 64}.get(scalar)
    if bits is None:
        return None
    if scalar.startswith("u"):
        return 0, 2**bits - 1
    return -(2 ** (bits - 1)), 2 ** (bits - 1) - 1


def _scalar_types() -> dict[int, str]:
    from google.protobuf.descriptor import FieldDescriptor as F

    return {
        F.TYPE_INT32: "int32",
        F.TYPE_SINT32: "int32",
        F.TYPE_SFIXED32: "int32",
        F.TYPE_INT64: "int64",
        F.TYPE_SINT64: "int64",
        F.TYPE_SFIXED64: "int64",
        F.TYPE_UINT32: "uint32",
        F.TYPE_FIXED32: "uint32",
        F.TYPE_UINT64: "uint64",
        F.TYPE_FIXED64: "uint64",
        F.TYPE_FLOAT: "float",
        F.TYPE_DOUBLE: "double",
    }


def _describe_field(field: Any, messages: dict[str, dict], todo: list[Any]) -> dict[str, Any]:
    from google.protobuf.descriptor import FieldDescriptor

    entry: dict[str, Any] = {"proto": field.name, "repeated": False}
    if field.message_type is not None and field.message_type.GetOptions().map_entry:
        entry["kind"] = "map"
        return entry
    entry["repeated"] = field.label == FieldDescriptor.LABEL_REPEATED
    if field.enum_type is not None:
        entry["kind"] = "enum"
        entry["values"] = [v.name for v in field.enum_type.values]
    elif field.message_type is not None:
        full = field.message_type.full_name
        if full in _SCALAR_MESSAGES:
            entry["kind"] = _SCALAR_MESSAGES[full]
        else:
            entry["kind"] = "message"
            entry["type"] = full
            if full not in messages:
                todo.append(field.message_type)
    elif field.type == FieldDescriptor.TYPE_BOOL:
        entry["kind"] = "bool"
    elif field.type == FieldDescriptor.TYPE_STRING:
        entry["kind"] = "string"
    elif field.type == FieldDescriptor.TYPE_BYTES:
        entry["kind"] = "bytes"  # base64 text in JSON
    else:
        # int64 travels as a JSON string or number; both are accepted by the API. The proto
        # type bounds the value: the API (and the client's own conversion) refuse the rest.
        entry["kind"] = "number"
        entry["scalar"] = _scalar_types()[field.type]
    return entry


def generate_schema() -> dict[str, Any]:
    """Walk the installed CustomJob proto descriptor (imports aiplatform: generation only)."""
    from google.cloud import aiplatform_v1

    messages: dict[str, dict] = {}
    todo = [aiplatform_v1.CustomJob.pb().DESCRIPTOR]
    while todo:
        descriptor = todo.pop()
        if descriptor.full_name in messages:
            continue
        fields: dict[str, Any] = {}
        messages[descriptor.full_name] = fields
        for field in descriptor.fields:
            fields[field.json_name] = _describe_field(field, messages, todo)
    return {"root": ROOT, "messages": dict(sorted(messages.items()))}


@cache
def load_schema() -> dict[str, dict]:
    """Message full name -> {json field name -> field description}."""
    return json.loads(SCHEMA_PATH.read_text())["messages"]


def message_fields(message: str) -> dict[str, dict]:
    return load_schema()[message]


if __name__ == "__main__":
    SCHEMA_PATH.write_text(json.dumps(generate_schema(), indent=1, sort_keys=True) + "\n")
    print(f"wrote {SCHEMA_PATH}")
