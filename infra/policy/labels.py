"""Which resource types take labels, asked of the installed pulumi-gcp itself.

A hand-kept list would rot with every provider release; the provider's own resource classes are the
ground truth. pulumi-gcp registers its type tokens with their Python module and class in its
``__init__.py`` (``resource_modules``): we read that table as text, import only the module a token
needs, and look for a ``labels`` argument. Imports happen on first use, never at module import.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import json
import re
from functools import cache

NOT_RESOURCE_LABELS = {
    "gcp:monitoring/notificationChannel:NotificationChannel": (
        "a channel's labels are its settings (an e-mail channel's email_address); its own "
        "labels are user_labels"
    ),
}
"""Types whose ``labels`` argument is not the resource's labels, with what it is instead."""
_RESOURCE_MODULES = re.compile(r'resource_modules="""(.*?)"""', re.DOTALL)


@cache
def _gcp_type_index() -> dict[str, tuple[str, str]]:
    """Type token -> (python module, class name) for every pulumi-gcp resource."""
    spec = importlib.util.find_spec("pulumi_gcp")
    if spec is None or spec.origin is None:
        raise RuntimeError(
            "pulumi-gcp is not installed; it is needed to know which types take labels"
        )
    with open(spec.origin, encoding="utf-8") as handle:
        match = _RESOURCE_MODULES.search(handle.read())
    if match is None:
        raise RuntimeError(f"no resource_modules table in {spec.origin}: pulumi-gcp layout changed")
    return {
        token: (module["fqn"], class_name)
        for module in json.loads(match.group(1))
        for token, class_name in module["classes"].items()
    }


@cache
def takes_labels(resource_type: str) -> bool:
    """True when the pulumi-gcp resource type accepts a ``labels`` input that is its labels."""
    if resource_type in NOT_RESOURCE_LABELS:
        return False
    location = _gcp_type_index().get(resource_type)
    if location is None:
        return False
    module_name, class_name = location
    resource_class = getattr(importlib.import_module(module_name), class_name)
    return "labels" in inspect.signature(resource_class._internal_init).parameters
