"""What Vertex's Model Registry and its custom serving containers require, in one place: the
alias grammar the registry checks (the local platform's `jobs/local/serving/models.py`) and `vtx
model
upload` checks before sending, and the serving contract a Model of ours declares.

Sources: model.proto (`Model.version_aliases`: ``[a-z][a-zA-Z0-9-]{0,126}[a-z0-9]``, so an alias
never reads as a version id; "a default version alias will be created for the first version of
the model, and there must be exactly one default version alias") and Google's custom container
requirements (Vertex sets ``AIP_HTTP_PORT`` from ``containerSpec.ports[0]``, 8080 when none,
``AIP_PREDICT_ROUTE`` / ``AIP_HEALTH_ROUTE`` from ``predictRoute`` / ``healthRoute``, and
``AIP_STORAGE_URI`` to a copy of ``artifactUri``)."""

from __future__ import annotations

import re

DEFAULT_ALIAS = "default"
ALIAS = re.compile(r"^[a-z][a-zA-Z0-9-]{0,126}[a-z0-9]$")
SERVING_PORT = 8080
"""The port trainer/serve.py listens on by default, declared in containerSpec.ports."""
PREDICT_ROUTE = "/predict"
HEALTH_ROUTE = "/health"
"""trainer/serve.py's default routes; Vertex passes them as AIP_PREDICT_ROUTE/AIP_HEALTH_ROUTE."""
SERVING_IMAGE = "serve"
"""The project's serving image in the stack's registry (trainer/serve.Dockerfile), named the way
templates name the trainer's (``image: trainer`` -> ``<artifact_registry>/trainer:latest``)."""


def alias_problems(aliases: list[str]) -> list[str]:
    """What the registry would refuse in a version's aliases (each message names the alias)."""
    problems = [
        f"{a!r} is not a valid alias: a lower case letter first, then letters, digits and '-', "
        f"ending with a lower case letter or digit, 2 to 128 characters"
        for a in aliases
        if not ALIAS.match(a)
    ]
    duplicates = sorted({a for a in aliases if aliases.count(a) > 1})
    if duplicates:
        problems.append(f"{', '.join(duplicates)} named more than once")
    return problems
