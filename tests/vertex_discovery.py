"""The Vertex AI v1 discovery document as google-api-python-client ships it in its discovery
cache (a dev dependency): what tests compare the local platform's surfaces with. Read as a file
of the installed distribution, without importing the client."""

from __future__ import annotations

import json
from functools import cache
from importlib import metadata
from typing import Any

DOCUMENT = "googleapiclient/discovery_cache/documents/aiplatform.v1.json"


@cache
def aiplatform_v1() -> dict[str, Any]:
    """The whole document (``revision``, ``resources``, ``schemas``)."""
    path = metadata.distribution("google-api-python-client").locate_file(DOCUMENT)
    return json.loads(path.read_text(encoding="utf-8"))


def method(resource_path: str, name: str) -> dict[str, Any]:
    """A method of ``projects.locations.RESOURCE...`` (``resource_path`` like ``"endpoints"``)."""
    node = aiplatform_v1()["resources"]["projects"]["resources"]["locations"]
    for part in resource_path.split("."):
        node = node["resources"][part]
    return node["methods"][name]


def schema_fields(message: str) -> set[str]:
    """The JSON names of a v1 message's fields (``message`` like ``"Endpoint"``)."""
    return set(aiplatform_v1()["schemas"][f"GoogleCloudAiplatformV1{message}"]["properties"])
