"""Fields of Vertex's v1 API that its newest discovery document has and the installed protos do
not: the control plane parses every body through those protos, so it cannot store or answer
them, and says so instead of the parser's bare "no field named".

No release of google-cloud-aiplatform up to 2.7.0 (the newest on PyPI when checked) defines
them, so no SDK sends or reads them; a client built from the discovery document can. Each is
refused with its reason (docs/vertex-facts.md, "Fields newer than the SDK")."""

from __future__ import annotations

import re
from importlib import metadata

_NO_FIELD = re.compile(
    r'Message type "google\.cloud\.aiplatform\.v1\.(\w+)" has no field named "(\w+)"'
)
_GDC = "Google Distributed Cloud (GDC) is not served by the local platform"
NEWER_FIELDS: dict[tuple[str, str], str] = {
    ("Endpoint", "gdcConfig"): f"{_GDC}: create the endpoint without it",
    ("DeployedModel", "gdcConnectedModel"): (
        "a GDC pretrained or Gemini model cannot be deployed here (no Google Distributed Cloud): "
        "deploy a Model, deployedModel.model, instead"
    ),
    ("DeployedModelRef", "checkpointId"): "it is output only: leave it out of the request",
}
"""(message, JSON field name) -> why the local platform refuses it and what to write instead."""


def newer_field_problem(parse_error: str) -> str | None:
    """The message for a parse error about one of NEWER_FIELDS; None for any other error."""
    found = _NO_FIELD.search(parse_error)
    if found is None or (found[1], found[2]) not in NEWER_FIELDS:
        return None
    message, field = found[1], found[2]
    return (
        f"{message}.{field} is a field of Vertex's v1 API that the installed "
        f"google-cloud-aiplatform {metadata.version('google-cloud-aiplatform')} does not define "
        f"(no release up to 2.7.0 does); {NEWER_FIELDS[(message, field)]}"
    )
