"""Long-running operations as the local platform answers them: deletes are immediate here, so
their operations are born done."""

from __future__ import annotations

import secrets

from jobs.core.formats import now_rfc3339

EMPTY_TYPE = "type.googleapis.com/google.protobuf.Empty"
TYPE_PREFIX = "type.googleapis.com/google.cloud.aiplatform.v1."
"""The ``@type`` of an operation's aiplatform payloads (metadata, response)."""


def delete_operation(name: str, created: str) -> dict:
    """A delete's operation named ``name``: done at once, with Empty as its response and
    ``DeleteOperationMetadata{genericMetadata}`` as its metadata, as every Vertex delete has."""
    return {
        "name": name,
        "metadata": {
            "@type": f"{TYPE_PREFIX}DeleteOperationMetadata",
            "genericMetadata": {"createTime": created, "updateTime": created},
        },
        "done": True,
        "response": {"@type": EMPTY_TYPE},
    }


def deleted(name: str) -> dict:
    """The operation of deleting the resource ``name``, named under it as Vertex names its
    operations (``NAME/operations/ID``), already done: deletion is immediate here."""
    return delete_operation(f"{name}/operations/{secrets.randbelow(10**18)}", now_rfc3339())
