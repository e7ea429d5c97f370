"""Reading IAM grants out of pulumi-gcp IAM resources, whatever their flavour.

pulumi-gcp has one Member / Binding / Policy trio per resource kind (``projects/iAMMember``,
``storage/bucketIAMBinding``, ``secretmanager/secretIamPolicy``...). They all carry the same three
shapes of input, so one reader serves the policy rules and the review's IAM matrix.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# Keys naming the resource a grant is attached to, most specific first. ``project`` comes last
# because bucket- or secret-level IAM resources may also carry a ``project`` input.
_SCOPE_KEYS = (
    "bucket",
    "topic",
    "secretId",
    "serviceAccountId",
    "cryptoKeyId",
    "keyRingId",
    "repository",
    "subnetwork",
    # A Cloud Run service's IAM names the service ``name`` (cloudrunv2/serviceIamMember).
    "name",
    "region",
    "project",
    "folder",
    "orgId",
)

# Modules whose IAM resources grant on a whole project, folder or organisation.
_BROAD_SCOPE_MODULES = frozenset({"projects", "folder", "organizations"})

PUBLIC_PRINCIPALS = frozenset({"allUsers", "allAuthenticatedUsers"})

# Accounts a project's users create (NAME@PROJECT.iam.gserviceaccount.com), as CIS GCP 1.5 reads
# them; Google's service agents there are service-[org-|folder-]NUMBER@... and are left out.
_USER_MANAGED_SERVICE_ACCOUNT = re.compile(
    r"serviceAccount:(?!service-(?:org-|folder-)?\d+@)[^@]+@[a-z][a-z0-9-]*\.iam\.gserviceaccount\.com"
)
_CUSTOM_ROLE = re.compile(r"(projects|organizations)/([^/]+)/roles/([^/]+)")


@dataclass(frozen=True)
class Grant:
    principal: str
    role: str
    scope_kind: str
    """What the grant is on: ``project``, ``bucket``, ``secretId``... (the input key used)."""
    scope: str
    """The value of that key (a bucket name, a secret id, a project id)."""
    project_wide: bool


def iam_flavour(resource_type: str) -> str | None:
    """``member``, ``binding`` or ``policy`` for an IAM resource type token, else None."""
    class_name = resource_type.rsplit(":", 1)[-1].lower()
    for flavour in ("member", "binding", "policy"):
        if class_name.endswith(f"iam{flavour}"):
            return flavour
    return None


def is_project_wide(resource_type: str) -> bool:
    module = resource_type.split(":")[1].split("/")[0] if resource_type.count(":") == 2 else ""
    return module in _BROAD_SCOPE_MODULES


def is_user_managed_service_account(principal: str) -> bool:
    return _USER_MANAGED_SERVICE_ACCOUNT.fullmatch(principal) is not None


def custom_role_ref(role: str) -> tuple[str, str, str] | None:
    """(``projects`` or ``organizations``, its id, role id) for a custom role name, else None."""
    match = _CUSTOM_ROLE.fullmatch(role)
    return (match.group(1), match.group(2), match.group(3)) if match else None


def _scope(props: Mapping[str, Any]) -> tuple[str, str]:
    for key in _SCOPE_KEYS:
        value = props.get(key)
        if value:
            return key, str(value)
    return "resource", "(unknown)"


def _policy_bindings(policy_data: object) -> list[tuple[str, list[str]]]:
    if not isinstance(policy_data, str):
        return []
    try:
        document = json.loads(policy_data)
    except json.JSONDecodeError:
        return []
    return [
        (str(binding.get("role", "")), [str(m) for m in binding.get("members", [])])
        for binding in document.get("bindings", [])
        if isinstance(binding, Mapping)
    ]


def grants_of(resource_type: str, props: Mapping[str, Any]) -> list[Grant]:
    """Every (principal, role) an IAM resource grants; [] for non-IAM resources."""
    flavour = iam_flavour(resource_type)
    if flavour is None:
        return []
    if flavour == "member":
        pairs = [(str(props.get("role", "")), [str(props.get("member", ""))])]
    elif flavour == "binding":
        pairs = [(str(props.get("role", "")), [str(m) for m in props.get("members") or []])]
    else:
        pairs = _policy_bindings(props.get("policyData"))
    scope_kind, scope = _scope(props)
    wide = is_project_wide(resource_type)
    return [
        Grant(principal=member, role=role, scope_kind=scope_kind, scope=scope, project_wide=wide)
        for role, members in pairs
        for member in members
    ]
