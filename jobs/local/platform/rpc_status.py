"""google.rpc.Status as Vertex puts it into a resource's ``error``: the codes the local platform
uses and the error itself."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum


class Code(IntEnum):
    """google.rpc.Code values Vertex puts into CustomJob.error. CANCELLED (1) is what a
    cancelled job's error carries (docs/vertex-facts.md, "Job states")."""

    CANCELLED = 1
    INVALID_ARGUMENT = 3
    DEADLINE_EXCEEDED = 4
    RESOURCE_EXHAUSTED = 8
    INTERNAL = 13
    UNAVAILABLE = 14


@dataclass(frozen=True)
class JobError:
    """CustomJob.error: a google.rpc.Status."""

    code: Code
    message: str

    def rest(self) -> dict:
        return {"code": int(self.code), "message": self.message}
