"""Long-running operations as the local platform answers them: deletes are immediate here, so
their operations are born done."""

from __future__ import annotations

import secrets

EMPTY_TYPE = "type.googleapis.com/google.protobuf.Empty"


def deleted(name: str) -> dict:
    """A delete's long-running operation, already done: deletion is immediate here."""
    return {
        "name": f"{name}/operations/{secrets.randbelow(10**18)}",
        "done": True,
        "response": {"@type": EMPTY_TYPE},
    }
