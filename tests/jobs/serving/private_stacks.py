"""Stacks with private serving (peering or PSC), for the private endpoint tests and the CLI's."""

from __future__ import annotations

from jobs.core.stack import StackOutputs
from tests.jobs.serving.fakes import (
    make_stack,
)

NETWORK = "projects/123/global/networks/acme-vtx-vpc"


def private_stack(kind: str, consumers: dict[str, str] | None = None) -> StackOutputs:
    serving = (
        {"kind": "peering", "network": NETWORK}
        if kind == "peering"
        else {"kind": "psc", "project_allowlist": ["acme-ml-dev"], "psc_consumers": consumers or {}}
    )
    return StackOutputs.model_validate(make_stack().model_dump() | {"private_serving": serving})
