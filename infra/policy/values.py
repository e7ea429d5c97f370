"""Property values as the policies see them before apply."""

from __future__ import annotations

UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"
"""What the Pulumi engine writes for a value not known until apply (``pulumi preview --json``);
``policies.plain`` puts the same marker where CrossGuard's proxy would raise."""


def known(value: object) -> bool:
    """Set, and known at preview: a rule judges only what it can see."""
    return value is not None and value != UNKNOWN
