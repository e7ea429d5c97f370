"""Checks on IAM: who may do what, and on how much of the project.

No grant to the public, no primitive role, no project-wide admin of data or keys, no project-wide
role (or custom role with its permissions) that lets its holder become someone more powerful, no
admin role for a service account on the whole project, no exemption from the audit logs. The
grants are read by ``iam.grants_of`` whatever the resource's shape (binding, member, policy).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from infra.config import (
    CANCEL_PERMISSIONS,
    CANCELER_ROLE_SUFFIX,
    CONTROLLER_PERMISSIONS,
    CONTROLLER_ROLE_SUFFIX,
)
from infra.policy.iam import (
    PUBLIC_PRINCIPALS,
    custom_role_ref,
    grants_of,
    is_project_wide,
    is_user_managed_service_account,
)
from infra.policy.rule_types import RuleContext, StackResource
from infra.policy.values import known

PRIMITIVE_ROLES = frozenset({"roles/owner", "roles/editor", "roles/viewer"})
# Admin of the data and keys the platform guards, on everything in the project at once. A
# project-wide KMS admin could also grant itself encrypt/decrypt (CIS GCP 1.11).
PROJECT_WIDE_FORBIDDEN_ROLES = frozenset(
    {"roles/storage.admin", "roles/aiplatform.admin", "roles/cloudkms.admin"}
)
# Roles that, held on a whole project, folder or organisation, let their holder become someone
# more powerful: act as or mint credentials for any service account in it (CIS GCP 1.6), rewrite
# its IAM policy, widen a custom role they already hold, or run deployments and builds as a
# Google-managed account that is Editor. (Owner and Editor: no-primitive-roles.)
PRIVILEGE_ESCALATION_ROLES = frozenset(
    {
        "roles/iam.serviceAccountUser",
        "roles/iam.serviceAccountTokenCreator",
        "roles/iam.serviceAccountKeyAdmin",
        "roles/iam.serviceAccountAdmin",
        "roles/iam.workloadIdentityUser",
        "roles/iam.securityAdmin",
        "roles/iam.roleAdmin",
        "roles/iam.organizationRoleAdmin",
        "roles/resourcemanager.projectIamAdmin",
        "roles/resourcemanager.folderIamAdmin",
        "roles/resourcemanager.folderAdmin",
        "roles/resourcemanager.organizationAdmin",
        "roles/deploymentmanager.editor",
        "roles/cloudbuild.builds.editor",
    }
)
# The permissions behind those roles, for custom roles granted project-wide.
PRIVILEGE_ESCALATION_PERMISSIONS = frozenset(
    {
        "iam.serviceAccounts.actAs",
        "iam.serviceAccounts.getAccessToken",
        "iam.serviceAccounts.getOpenIdToken",
        "iam.serviceAccounts.implicitDelegation",
        "iam.serviceAccounts.signBlob",
        "iam.serviceAccounts.signJwt",
        "iam.serviceAccounts.setIamPolicy",
        "iam.serviceAccountKeys.create",
        "iam.roles.update",
        "resourcemanager.projects.setIamPolicy",
        "resourcemanager.folders.setIamPolicy",
        "resourcemanager.organizations.setIamPolicy",
        "deploymentmanager.deployments.create",
        "cloudbuild.builds.create",
    }
)
# Custom role type -> (the kind of parent in its name ``projects/P/roles/R``, the parent input).
CUSTOM_ROLE_TYPES = {
    "gcp:projects/iAMCustomRole:IAMCustomRole": ("projects", "project"),
    "gcp:organizations/iAMCustomRole:IAMCustomRole": ("organizations", "orgId"),
}
PROJECT_CUSTOM_ROLE = "gcp:projects/iAMCustomRole:IAMCustomRole"
AUDIT_CONFIG_TYPES = frozenset(
    {
        "gcp:projects/iAMAuditConfig:IAMAuditConfig",
        "gcp:folder/iamAuditConfig:IamAuditConfig",
        "gcp:organizations/iamAuditConfig:IamAuditConfig",
    }
)


def no_public_principals(resource_type: str, props: Mapping[str, Any], _: RuleContext) -> list[str]:
    return [
        f"grants {grant.role} to {grant.principal} on {grant.scope_kind} {grant.scope}"
        for grant in grants_of(resource_type, props)
        if grant.principal in PUBLIC_PRINCIPALS
    ]


def no_primitive_roles(resource_type: str, props: Mapping[str, Any], _: RuleContext) -> list[str]:
    return [
        f"grants primitive role {grant.role} to {grant.principal}"
        for grant in grants_of(resource_type, props)
        if grant.role in PRIMITIVE_ROLES
    ]


def no_project_wide_admin(
    resource_type: str, props: Mapping[str, Any], _: RuleContext
) -> list[str]:
    if not is_project_wide(resource_type):
        return []
    return [
        f"grants {grant.role} to {grant.principal} on the whole {grant.scope_kind} {grant.scope}"
        for grant in grants_of(resource_type, props)
        if grant.role in PROJECT_WIDE_FORBIDDEN_ROLES
    ]


def no_project_wide_privilege_escalation(
    resource_type: str, props: Mapping[str, Any], _: RuleContext
) -> list[str]:
    if not is_project_wide(resource_type):
        return []
    return [
        f"grants {grant.role} to {grant.principal} on the whole {grant.scope_kind} {grant.scope}: "
        "its holder can make themselves more powerful"
        for grant in grants_of(resource_type, props)
        if grant.role in PRIVILEGE_ESCALATION_ROLES
    ]


def no_admin_roles_on_service_accounts(
    resource_type: str, props: Mapping[str, Any], _: RuleContext
) -> list[str]:
    """CIS GCP 1.5: an account a workload runs as holds no admin role on the whole project."""
    if not is_project_wide(resource_type):
        return []
    return [
        f"grants admin role {grant.role} to service account {grant.principal} on the whole "
        f"{grant.scope_kind} {grant.scope}"
        for grant in grants_of(resource_type, props)
        if "admin" in grant.role.rsplit("/", 1)[-1].lower()
        and is_user_managed_service_account(grant.principal)
    ]


_RoleKey = tuple[str, str | None, str]


def _escalating_custom_roles(resources: Sequence[StackResource]) -> dict[_RoleKey, list[str]]:
    """(kind, parent or None, role id) -> the escalation permissions of each declared role."""
    roles: dict[_RoleKey, list[str]] = {}
    for resource in resources:
        kind = CUSTOM_ROLE_TYPES.get(resource.type)
        if kind is None or not known(resource.props.get("roleId")):
            continue
        permissions = resource.props.get("permissions")
        found = sorted(
            p
            for p in (permissions if isinstance(permissions, list) else [])
            if p in PRIVILEGE_ESCALATION_PERMISSIONS
        )
        if found:
            parent = resource.props.get(kind[1])
            key = (kind[0], str(parent) if known(parent) else None, str(resource.props["roleId"]))
            roles[key] = found
    return roles


def no_project_wide_escalating_custom_roles(
    resources: Sequence[StackResource], _: RuleContext
) -> list[tuple[str, str | None]]:
    """A custom role with an escalation role's permissions is that role under another name."""
    roles = _escalating_custom_roles(resources)
    violations: list[tuple[str, str | None]] = []
    for resource in resources:
        if not is_project_wide(resource.type):
            continue
        for grant in grants_of(resource.type, resource.props):
            ref = custom_role_ref(grant.role)
            if ref is None:
                continue
            kind, parent, role_id = ref
            permissions = roles.get((kind, parent, role_id)) or roles.get((kind, None, role_id))
            if permissions:
                held = ", ".join(permissions)
                violations.append(
                    (
                        f"{resource.name}: grants custom role {grant.role} ({held}) to "
                        f"{grant.principal} on the whole {grant.scope_kind} {grant.scope}",
                        resource.urn,
                    )
                )
    return violations


def audit_logs_no_exemptions(
    resource_type: str, props: Mapping[str, Any], _: RuleContext
) -> list[str]:
    """CIS GCP 2.1: audit logs leave no one out."""
    configs: list[tuple[str, object]] = []
    if resource_type in AUDIT_CONFIG_TYPES:
        configs.append((str(props.get("service", "")), props.get("auditLogConfigs")))
    elif is_project_wide(resource_type) and isinstance(props.get("policyData"), str):
        try:
            policy = json.loads(props["policyData"])
        except json.JSONDecodeError:
            policy = {}
        for config in policy.get("auditConfigs", []) if isinstance(policy, Mapping) else []:
            if isinstance(config, Mapping):
                configs.append((str(config.get("service", "")), config.get("auditLogConfigs")))
    messages = []
    for service, log_configs in configs:
        for log in log_configs if isinstance(log_configs, list) else []:
            exempted = log.get("exemptedMembers") if isinstance(log, Mapping) else None
            if isinstance(exempted, list) and exempted:
                messages.append(
                    f"{log.get('logType')} audit logs of {service} exempt {', '.join(exempted)}"
                )
    return messages


def budget_canceler_only_cancels(
    resource_type: str, props: Mapping[str, Any], _: RuleContext
) -> list[str]:
    """A team budget's cancel function runs unattended on every budget update: its role may
    list and cancel jobs (infra.config.CANCEL_PERMISSIONS) and nothing else."""
    if resource_type != PROJECT_CUSTOM_ROLE or not str(props.get("roleId", "")).endswith(
        CANCELER_ROLE_SUFFIX
    ):
        return []
    permissions = props.get("permissions")
    if not known(permissions) or not isinstance(permissions, list):
        return []
    extra = sorted(set(map(str, permissions)) - set(CANCEL_PERMISSIONS))
    return [f"holds {', '.join(extra)} beyond listing and cancelling jobs"] if extra else []


def controller_only_walks_and_cancels(
    resource_type: str, props: Mapping[str, Any], _: RuleContext
) -> list[str]:
    """The stack's controller runs unattended every minute: its role may create, watch and
    cancel Vertex jobs and studies (infra.config.CONTROLLER_PERMISSIONS) and nothing else."""
    if resource_type != PROJECT_CUSTOM_ROLE or not str(props.get("roleId", "")).endswith(
        CONTROLLER_ROLE_SUFFIX
    ):
        return []
    permissions = props.get("permissions")
    if not known(permissions) or not isinstance(permissions, list):
        return []
    extra = sorted(set(map(str, permissions)) - set(CONTROLLER_PERMISSIONS))
    return (
        [f"holds {', '.join(extra)} beyond creating, watching and cancelling jobs"] if extra else []
    )
