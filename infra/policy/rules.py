"""The platform's guardrails as plain functions.

A resource rule takes a resource's Pulumi type token and its input properties, with Pulumi's wire
names (camelCase: ``uniformBucketLevelAccess``, as CrossGuard and the unit-test mocks see them),
and returns violation messages. A stack rule takes every resource of the stack and returns
(message, urn) pairs. No Pulumi import here: the same functions run inside CrossGuard
(``policies.py``), offline under mocks and over a ``pulumi preview --json`` file (``evaluate.py``).

Environment-specific rules are marked ``prod_only``; the caller decides the environment, so the
functions themselves stay oblivious of where they run.
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from infra.policy.firewall import internet_exposures
from infra.policy.iam import (
    PUBLIC_PRINCIPALS,
    custom_role_ref,
    grants_of,
    is_project_wide,
    is_user_managed_service_account,
)
from infra.policy.instances import metadata_flag, metadata_scopes, vm_of
from infra.policy.labels import takes_labels
from infra.policy.values import UNKNOWN, known

# Vertex AI training reserves this range in the peered / attached network (VERTEX.md).
VERTEX_RESERVED_RANGE = ipaddress.ip_network("172.16.0.0/16")

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
DEFAULT_COMPUTE_ACCOUNT = re.compile(
    r"(?:serviceAccount:)?\d+-compute@developer\.gserviceaccount\.com"
)

BUCKET = "gcp:storage/bucket:Bucket"
SUBNETWORK = "gcp:compute/subnetwork:Subnetwork"
GLOBAL_ADDRESS = "gcp:compute/globalAddress:GlobalAddress"
REPOSITORY = "gcp:artifactregistry/repository:Repository"
CRYPTO_KEY = "gcp:kms/cryptoKey:CryptoKey"
BUDGET = "gcp:billing/budget:Budget"
STACK = "pulumi:pulumi:Stack"
CREDENTIAL_TYPES = frozenset(
    {"gcp:serviceaccount/key:Key", "gcp:storage/hmacKey:HmacKey", "gcp:projects/apiKey:ApiKey"}
)
SECRET_VERSION = "gcp:secretmanager/secretVersion:SecretVersion"
NETWORK = "gcp:compute/network:Network"
DNS_ZONE = "gcp:dns/managedZone:ManagedZone"
AUDIT_CONFIG_TYPES = frozenset(
    {
        "gcp:projects/iAMAuditConfig:IAMAuditConfig",
        "gcp:folder/iamAuditConfig:IamAuditConfig",
        "gcp:organizations/iamAuditConfig:IamAuditConfig",
    }
)
# Legacy ACLs: a list of "ROLE:entity" strings, or one entity per resource.
ACL_LIST_TYPES = frozenset(
    {
        "gcp:storage/bucketACL:BucketACL",
        "gcp:storage/defaultObjectACL:DefaultObjectACL",
        "gcp:storage/objectACL:ObjectACL",
    }
)
ACL_ENTRY_TYPES = frozenset(
    {
        "gcp:storage/bucketAccessControl:BucketAccessControl",
        "gcp:storage/defaultObjectAccessControl:DefaultObjectAccessControl",
        "gcp:storage/objectAccessControl:ObjectAccessControl",
    }
)
# Canned ACLs that grant allUsers or allAuthenticatedUsers (JSON API and XML API spellings).
PUBLIC_PREDEFINED_ACLS = frozenset({"publicread", "publicreadwrite", "authenticatedread"})

KMS_MAX_ROTATION_S = 90 * 24 * 3600  # CIS GCP 1.10: rotate at least every 90 days

# Subnet purposes that are ordinary VM subnets; proxy-only and PSC NAT subnets cannot have
# private Google access or flow logs.
_ORDINARY_SUBNET_PURPOSES = frozenset({"PRIVATE", "PRIVATE_RFC_1918"})


@dataclass(frozen=True)
class RuleContext:
    """What a rule may need besides the resource itself."""

    environment: str | None = None
    required_labels: tuple[str, ...] = ("environment",)
    default_labels: Mapping[str, str] = field(default_factory=dict)
    """Provider-level default labels, which GCP merges into every resource's labels."""


@dataclass(frozen=True)
class StackResource:
    type: str
    name: str
    urn: str
    props: Mapping[str, Any]


ResourceCheck = Callable[[str, Mapping[str, Any], RuleContext], list[str]]
StackCheck = Callable[[Sequence[StackResource], RuleContext], list[tuple[str, str | None]]]


@dataclass(frozen=True)
class Rule:
    name: str
    description: str
    remediation: str
    mandatory: bool = True
    prod_only: bool = False
    resource_check: ResourceCheck | None = None
    stack_check: StackCheck | None = None

    def __post_init__(self) -> None:
        # CrossGuard has one policy class per kind; a rule is exactly one of them.
        if (self.resource_check is None) == (self.stack_check is None):
            raise ValueError(f"rule {self.name} needs exactly one of resource_check, stack_check")


def _ordinary_subnet(props: Mapping[str, Any]) -> bool:
    return props.get("purpose") in (None, *_ORDINARY_SUBNET_PURPOSES)


# --- buckets ---------------------------------------------------------------------------------


def bucket_uniform_access(
    resource_type: str, props: Mapping[str, Any], _: RuleContext
) -> list[str]:
    if resource_type == BUCKET and props.get("uniformBucketLevelAccess") is not True:
        return ["uniformBucketLevelAccess is not true: object ACLs could bypass bucket IAM"]
    return []


def bucket_public_access_prevention(
    resource_type: str, props: Mapping[str, Any], _: RuleContext
) -> list[str]:
    if resource_type == BUCKET and props.get("publicAccessPrevention") != "enforced":
        found = props.get("publicAccessPrevention", "unset")
        return [f"publicAccessPrevention is {found!r}, not 'enforced'"]
    return []


def bucket_cmek(resource_type: str, props: Mapping[str, Any], _: RuleContext) -> list[str]:
    if resource_type != BUCKET:
        return []
    encryption = props.get("encryption")
    key = encryption.get("defaultKmsKeyName") if isinstance(encryption, Mapping) else None
    return [] if key else ["no encryption.defaultKmsKeyName: objects use Google-managed keys"]


# --- IAM -------------------------------------------------------------------------------------


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


def _acl_entries(resource_type: str, props: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """(where, entity) for every entity a legacy ACL resource grants to."""
    if resource_type in ACL_LIST_TYPES:
        entries = props.get("roleEntities")
        for index, entry in enumerate(entries if isinstance(entries, list) else []):
            if known(entry) and ":" in str(entry):
                yield f"roleEntities[{index}] {entry}", str(entry).split(":", 1)[1]
    elif resource_type in ACL_ENTRY_TYPES and known(props.get("entity")):
        yield f"entity {props['entity']} ({props.get('role')})", str(props["entity"])


def no_public_acls(resource_type: str, props: Mapping[str, Any], _: RuleContext) -> list[str]:
    """CIS GCP 5.1 for legacy ACLs, which bucket IAM rules (no-public-principals) do not see."""
    if resource_type not in ACL_LIST_TYPES | ACL_ENTRY_TYPES:
        return []
    public = {p.lower() for p in PUBLIC_PRINCIPALS}
    messages = [
        f"{where} opens it to anyone"
        for where, entity in _acl_entries(resource_type, props)
        if entity.strip().lower() in public
    ]
    for key in ("predefinedAcl", "defaultAcl"):
        canned = props.get(key)
        if known(canned) and str(canned).replace("-", "").lower() in PUBLIC_PREDEFINED_ACLS:
            messages.append(f"{key} {canned} grants allUsers or allAuthenticatedUsers")
    return messages


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


def no_service_account_keys(
    resource_type: str, _props: Mapping[str, Any], __: RuleContext
) -> list[str]:
    if resource_type in CREDENTIAL_TYPES:
        return [f"{resource_type} creates a long-lived credential that can leak"]
    return []


def _strings(value: object, path: str = "") -> Iterator[tuple[str, str]]:
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from _strings(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, Sequence):
        for index, item in enumerate(value):
            yield from _strings(item, f"{path}[{index}]")


def no_default_compute_identity(
    resource_type: str, props: Mapping[str, Any], _: RuleContext
) -> list[str]:
    """The Compute Engine default account is Editor on new projects: nothing may use or trust it."""
    return [
        f"{path} names the Compute Engine default account {value}"
        for path, value in _strings(props)
        if DEFAULT_COMPUTE_ACCOUNT.fullmatch(value)
    ]


def trainer_not_default_compute(
    resources: Sequence[StackResource], _: RuleContext
) -> list[tuple[str, str | None]]:
    """Jobs run as ``platform.trainer_service_account``: it must be a dedicated account."""
    violations: list[tuple[str, str | None]] = []
    for resource in resources:
        if resource.type != STACK:
            continue
        platform = resource.props.get("platform")
        account = platform.get("trainer_service_account") if isinstance(platform, Mapping) else None
        if isinstance(account, str) and DEFAULT_COMPUTE_ACCOUNT.fullmatch(account):
            violations.append(
                (f"platform.trainer_service_account is the Compute Engine default {account}", None)
            )
    return violations


# --- network ---------------------------------------------------------------------------------


def subnet_private_google_access(
    resource_type: str, props: Mapping[str, Any], _: RuleContext
) -> list[str]:
    if resource_type != SUBNETWORK or not _ordinary_subnet(props):
        return []
    if props.get("privateIpGoogleAccess") is not True:
        return [
            "privateIpGoogleAccess is not true: jobs without public IPs cannot reach Google APIs"
        ]
    return []


def subnet_flow_logs(resource_type: str, props: Mapping[str, Any], _: RuleContext) -> list[str]:
    if resource_type != SUBNETWORK or not _ordinary_subnet(props):
        return []
    # A logConfig block, even with every field defaulted, is what turns flow logs on.
    if not isinstance(props.get("logConfig"), Mapping):
        return ["no logConfig: VPC flow logs are off"]
    return []


def _declared_ranges(resource_type: str, props: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    if resource_type == SUBNETWORK:
        yield "ipCidrRange", props.get("ipCidrRange")
        for index, secondary in enumerate(props.get("secondaryIpRanges") or []):
            if isinstance(secondary, Mapping):
                yield f"secondaryIpRanges[{index}].ipCidrRange", secondary.get("ipCidrRange")
    elif resource_type == GLOBAL_ADDRESS:
        address, prefix = props.get("address"), props.get("prefixLength")
        if known(address) and known(prefix):
            yield "address/prefixLength", f"{address}/{int(prefix)}"


def ranges_avoid_vertex_reserved(
    resource_type: str, props: Mapping[str, Any], _: RuleContext
) -> list[str]:
    messages = []
    for where, cidr in _declared_ranges(resource_type, props):
        if not known(cidr):
            continue
        try:
            network = ipaddress.ip_network(str(cidr), strict=False)
        except ValueError:
            messages.append(f"{where} {cidr!r} is not a CIDR range")
            continue
        if network.version == 4 and network.overlaps(VERTEX_RESERVED_RANGE):
            messages.append(f"{where} {cidr} overlaps {VERTEX_RESERVED_RANGE}, reserved by Vertex")
    return messages


def no_internet_ingress(resource_type: str, props: Mapping[str, Any], _: RuleContext) -> list[str]:
    """CIS GCP 3.6 / 3.7: no SSH, RDP or every port open to the internet."""
    messages = []
    for exposure in internet_exposures(resource_type, props):
        if exposure.every_port:
            protocol = "" if exposure.protocol == "all" else f"{exposure.protocol} "
            opened = f"every {protocol}port"
        elif admin := exposure.admin_ports():
            opened = ", ".join(admin)
        else:
            continue
        messages.append(f"{exposure.where} allows {opened} from {', '.join(exposure.sources)}")
    return messages


def network_custom_mode(resource_type: str, props: Mapping[str, Any], _: RuleContext) -> list[str]:
    """CIS GCP 3.1: no network shaped like the default one (a subnet in every region)."""
    auto = props.get("autoCreateSubnetworks")
    if resource_type == NETWORK and auto is not False and auto != UNKNOWN:
        return [
            "autoCreateSubnetworks is not false: an auto-mode network has a subnet in every "
            "region, like the default network"
        ]
    return []


def dns_dnssec(resource_type: str, props: Mapping[str, Any], _: RuleContext) -> list[str]:
    """CIS GCP 3.3 (DNSSEC on public zones), 3.4 / 3.5 (no RSASHA1 signing keys)."""
    if resource_type != DNS_ZONE or str(props.get("visibility") or "public").lower() != "public":
        return []
    dnssec = props.get("dnssecConfig")
    if dnssec == UNKNOWN:
        return []
    dnssec = dnssec if isinstance(dnssec, Mapping) else {}
    messages = []
    if dnssec.get("state") != "on":
        messages.append(f"dnssecConfig.state is {dnssec.get('state', 'unset')!r}, not 'on'")
    for index, spec in enumerate(dnssec.get("defaultKeySpecs") or []):
        if isinstance(spec, Mapping) and str(spec.get("algorithm", "")).lower() == "rsasha1":
            messages.append(
                f"dnssecConfig.defaultKeySpecs[{index}] signs {spec.get('keyType')} with RSASHA1"
            )
    return messages


# --- VMs (a team's own VMs or Workbench instances beside the stack) --------------------------


def instance_no_external_ip(
    resource_type: str, props: Mapping[str, Any], _: RuleContext
) -> list[str]:
    """CIS GCP 4.9."""
    vm = vm_of(resource_type, props)
    return [f"{path} gives the VM a public IP address" for path in vm.external_ips] if vm else []


def instance_not_default_service_account(
    resource_type: str, props: Mapping[str, Any], _: RuleContext
) -> list[str]:
    """CIS GCP 4.1 / 4.2 where the default account is implied (no-default-compute-identity
    catches it when named)."""
    vm = vm_of(resource_type, props)
    if vm is None or vm.default_identity is None:
        return []
    return [f"{vm.default_identity} is not set: the VM runs as the Compute Engine default account"]


def instance_block_project_ssh_keys(
    resource_type: str, props: Mapping[str, Any], _: RuleContext
) -> list[str]:
    """CIS GCP 4.3. OS Login on the VM ignores metadata keys, so it counts as blocking them."""
    vm = vm_of(resource_type, props)
    if vm is None or not vm.metadata_known:
        return []
    blocked = metadata_flag(vm.metadata, "block-project-ssh-keys")
    if blocked or metadata_flag(vm.metadata, "enable-oslogin"):
        return []
    if vm.derived and blocked is None:
        return []
    return [
        f"{vm.metadata_path} does not set block-project-ssh-keys: project-wide SSH keys "
        "log in to this VM"
    ]


def instance_os_login(resource_type: str, props: Mapping[str, Any], _: RuleContext) -> list[str]:
    """CIS GCP 4.4: nothing turns OS Login off, on a VM or for the whole project."""
    return [
        f"{where} sets enable-oslogin false: SSH keys in metadata bypass IAM"
        for where, metadata in metadata_scopes(resource_type, props)
        if metadata_flag(metadata, "enable-oslogin") is False
    ]


def instance_no_serial_port(
    resource_type: str, props: Mapping[str, Any], _: RuleContext
) -> list[str]:
    """CIS GCP 4.5: the interactive serial console accepts connections from any IP address."""
    return [
        f"{where} sets serial-port-enable: the serial console is reachable from anywhere"
        for where, metadata in metadata_scopes(resource_type, props)
        if metadata_flag(metadata, "serial-port-enable")
    ]


def instance_no_ip_forwarding(
    resource_type: str, props: Mapping[str, Any], _: RuleContext
) -> list[str]:
    """CIS GCP 4.6."""
    vm = vm_of(resource_type, props)
    if vm is None or vm.ip_forwarding is None:
        return []
    return [f"{vm.ip_forwarding} is true: the VM can route traffic that is not its own"]


def instance_shielded_vm(resource_type: str, props: Mapping[str, Any], _: RuleContext) -> list[str]:
    """CIS GCP 4.8: vTPM and integrity monitoring stay on (they default to on). Secure Boot is
    left to the team: it refuses unsigned kernel modules, such as some GPU drivers."""
    vm = vm_of(resource_type, props)
    if vm is None:
        return []
    return [
        f"{vm.shielded_path}.{key} is false"
        for key in ("enableVtpm", "enableIntegrityMonitoring")
        if vm.shielded.get(key) is False
    ]


# --- registry, keys, secrets, budget, labels -------------------------------------------------


def registry_immutable_tags(
    resource_type: str, props: Mapping[str, Any], _: RuleContext
) -> list[str]:
    if resource_type != REPOSITORY or str(props.get("format", "")).upper() != "DOCKER":
        return []
    docker = props.get("dockerConfig")
    if not (isinstance(docker, Mapping) and docker.get("immutableTags") is True):
        return ["dockerConfig.immutableTags is not true: a pushed tag could be overwritten"]
    return []


def kms_key_rotation(resource_type: str, props: Mapping[str, Any], _: RuleContext) -> list[str]:
    """CIS GCP 1.10: keys rotate at least every 90 days."""
    if resource_type != CRYPTO_KEY:
        return []
    period = props.get("rotationPeriod")
    if not period:
        return ["no rotationPeriod: the key is never rotated"]
    if period == UNKNOWN:
        return []
    match = re.fullmatch(r"(\d+(?:\.\d+)?)s", str(period).strip())
    if match is None:
        return [f"rotationPeriod {period!r} is not a duration in seconds such as '7776000s'"]
    if float(match.group(1)) > KMS_MAX_ROTATION_S:
        return [f"rotationPeriod {period} is longer than 90 days ({KMS_MAX_ROTATION_S}s)"]
    return []


def no_secret_values_in_state(
    resource_type: str, _props: Mapping[str, Any], __: RuleContext
) -> list[str]:
    if resource_type == SECRET_VERSION:
        return ["a SecretVersion puts the secret value in the Pulumi state"]
    return []


def budget_present(
    resources: Sequence[StackResource], _: RuleContext
) -> list[tuple[str, str | None]]:
    if any(resource.type == BUDGET for resource in resources):
        return []
    return [("the stack declares no billing budget", None)]


def labels_present(resource_type: str, props: Mapping[str, Any], ctx: RuleContext) -> list[str]:
    if not takes_labels(resource_type):
        return []
    labels = props.get("labels")
    if labels == UNKNOWN:
        return []
    effective = {**ctx.default_labels, **(labels if isinstance(labels, Mapping) else {})}
    if not effective:
        return ["no labels: cost reports cannot attribute this resource"]
    missing = [key for key in ctx.required_labels if key not in effective]
    return [f"labels lack {', '.join(missing)}"] if missing else []


RULES: tuple[Rule, ...] = (
    Rule(
        "bucket-uniform-access",
        "Buckets use uniform bucket-level access.",
        "set uniform_bucket_level_access=True on the bucket",
        resource_check=bucket_uniform_access,
    ),
    Rule(
        "bucket-public-access-prevention",
        "Buckets enforce public access prevention.",
        'set public_access_prevention="enforced" on the bucket',
        resource_check=bucket_public_access_prevention,
    ),
    Rule(
        "no-public-principals",
        "No IAM grant to allUsers or allAuthenticatedUsers.",
        "grant the role to a named service account or group instead",
        resource_check=no_public_principals,
    ),
    Rule(
        "no-primitive-roles",
        "No primitive roles (owner, editor, viewer).",
        "grant a predefined role scoped to the task (e.g. roles/storage.objectViewer)",
        resource_check=no_primitive_roles,
    ),
    Rule(
        "no-project-wide-admin",
        "No project-wide storage.admin, aiplatform.admin or cloudkms.admin.",
        "grant the role on the bucket, key or resource that needs it, not on the project",
        resource_check=no_project_wide_admin,
    ),
    Rule(
        "no-project-wide-privilege-escalation",
        "No project-wide role that can act as service accounts, mint their credentials or "
        "change IAM (serviceAccountUser, serviceAccountTokenCreator, projectIamAdmin...).",
        "grant it on the one service account (or resource) that needs it, not on the project",
        resource_check=no_project_wide_privilege_escalation,
    ),
    Rule(
        "no-project-wide-escalating-custom-roles",
        "No project-wide custom role carrying an escalation permission (actAs, getAccessToken, "
        "setIamPolicy...).",
        "drop those permissions from the role, or grant it on the one resource that needs it",
        stack_check=no_project_wide_escalating_custom_roles,
    ),
    Rule(
        "no-admin-roles-on-service-accounts",
        "No service account holds an admin role on the whole project.",
        "grant the account the narrow role it needs (a user or viewer role, or on one resource)",
        resource_check=no_admin_roles_on_service_accounts,
    ),
    Rule(
        "no-public-acls",
        "No legacy bucket or object ACL grants allUsers or allAuthenticatedUsers.",
        "drop the ACL: keep uniform bucket-level access and grant IAM roles to named principals",
        resource_check=no_public_acls,
    ),
    Rule(
        "audit-logs-no-exemptions",
        "Cloud Audit Logs exempt no one.",
        "remove exempted_members from the audit log config",
        resource_check=audit_logs_no_exemptions,
    ),
    Rule(
        "no-service-account-keys",
        "No service account keys, HMAC keys or API keys.",
        "use the attached service account or Workload Identity Federation instead of a key",
        resource_check=no_service_account_keys,
    ),
    Rule(
        "no-default-compute-identity",
        "Nothing uses or grants to the Compute Engine default service account.",
        "use the stack's dedicated trainer / launcher service accounts",
        resource_check=no_default_compute_identity,
    ),
    Rule(
        "jobs-not-default-compute",
        "Jobs do not run as the Compute Engine default service account.",
        "export a dedicated service account as platform.trainer_service_account",
        stack_check=trainer_not_default_compute,
    ),
    Rule(
        "subnet-private-google-access",
        "Subnets have private Google access.",
        "set private_ip_google_access=True on the subnetwork",
        resource_check=subnet_private_google_access,
    ),
    Rule(
        "ranges-avoid-vertex-reserved",
        "Network ranges do not overlap 172.16.0.0/16 (reserved by Vertex AI training).",
        "pick ranges outside 172.16.0.0/16, e.g. in 10.0.0.0/8",
        resource_check=ranges_avoid_vertex_reserved,
    ),
    Rule(
        "no-internet-ingress",
        "No firewall lets the internet reach SSH (22), RDP (3389) or every port.",
        "allow only the ranges that need it (e.g. IAP TCP forwarding 35.235.240.0/20 for SSH)",
        resource_check=no_internet_ingress,
    ),
    Rule(
        "network-custom-mode",
        "Networks are custom mode (no auto-created subnet in every region).",
        "set auto_create_subnetworks=False and declare the subnets the stack needs",
        resource_check=network_custom_mode,
    ),
    Rule(
        "dns-dnssec",
        "Public DNS zones sign with DNSSEC, never with RSASHA1.",
        "set dnssec_config={'state': 'on'} (RSASHA256 keys by default) on the managed zone",
        resource_check=dns_dnssec,
    ),
    Rule(
        "instance-no-external-ip",
        "VMs (instances, templates, Workbench) have no external IP address.",
        "drop access_configs (Workbench: disable_public_ip=True); reach the internet through "
        "Cloud NAT and the VM through IAP",
        resource_check=instance_no_external_ip,
    ),
    Rule(
        "instance-not-default-service-account",
        "VMs run as a dedicated service account, not the implied Compute Engine default.",
        "set service_account={'email': <a dedicated account>, 'scopes': ['cloud-platform']}",
        resource_check=instance_not_default_service_account,
    ),
    Rule(
        "instance-block-project-ssh-keys",
        "VMs block project-wide SSH keys (or use OS Login).",
        "set metadata {'block-project-ssh-keys': 'true'} or {'enable-oslogin': 'TRUE'}",
        resource_check=instance_block_project_ssh_keys,
    ),
    Rule(
        "instance-os-login",
        "Nothing turns OS Login off.",
        "remove enable-oslogin=FALSE from the metadata (set it to TRUE on the project)",
        resource_check=instance_os_login,
    ),
    Rule(
        "instance-no-serial-port",
        "No VM or project enables the interactive serial console.",
        "remove serial-port-enable from the metadata",
        resource_check=instance_no_serial_port,
    ),
    Rule(
        "instance-no-ip-forwarding",
        "VMs do not forward IP packets.",
        "set can_ip_forward=False (Workbench: enable_ip_forwarding=False)",
        resource_check=instance_no_ip_forwarding,
    ),
    Rule(
        "instance-shielded-vm",
        "Shielded VM vTPM and integrity monitoring stay on.",
        "drop enable_vtpm=False / enable_integrity_monitoring=False from shielded_instance_config",
        resource_check=instance_shielded_vm,
    ),
    Rule(
        "no-secret-values-in-state",
        "No secret values in Pulumi state (no SecretVersion resources).",
        "declare the secret only and add versions with `gcloud secrets versions add`",
        resource_check=no_secret_values_in_state,
    ),
    Rule(
        "labels-present",
        "Every resource that takes labels has them, with the required keys.",
        "pass the platform labels (labels=cfg.labels) to the resource",
        mandatory=False,
        resource_check=labels_present,
    ),
    Rule(
        "kms-key-rotation",
        "KMS keys rotate at least every 90 days.",
        'set rotation_period (e.g. "7776000s", 90 days) on the crypto key',
        mandatory=False,
        resource_check=kms_key_rotation,
    ),
    Rule(
        "prod-subnet-flow-logs",
        "In prod, subnets have VPC flow logs.",
        "pass log_config={...} to the subnetwork (flow_logs in the prod config)",
        prod_only=True,
        resource_check=subnet_flow_logs,
    ),
    Rule(
        "prod-bucket-cmek",
        "In prod, buckets are encrypted with a customer-managed key.",
        "set encryption={'default_kms_key_name': key.id} (cmek: true in the prod config)",
        prod_only=True,
        resource_check=bucket_cmek,
    ),
    Rule(
        "prod-registry-immutable-tags",
        "In prod, Docker repositories have immutable tags.",
        "set docker_config={'immutable_tags': True} on the repository",
        prod_only=True,
        resource_check=registry_immutable_tags,
    ),
    Rule(
        "prod-budget",
        "In prod, the stack declares a billing budget.",
        "configure budget (billing account, amount, thresholds) in the prod config",
        prod_only=True,
        stack_check=budget_present,
    ),
)
