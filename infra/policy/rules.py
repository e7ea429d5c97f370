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
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from infra.policy.iam import PUBLIC_PRINCIPALS, grants_of, is_project_wide
from infra.policy.labels import takes_labels

# What the Pulumi engine writes for a value that is not known until apply (preview JSON).
UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"

# Vertex AI training reserves this range in the peered / attached network (VERTEX.md).
VERTEX_RESERVED_RANGE = ipaddress.ip_network("172.16.0.0/16")

PRIMITIVE_ROLES = frozenset({"roles/owner", "roles/editor", "roles/viewer"})
PROJECT_WIDE_FORBIDDEN_ROLES = frozenset(
    {"roles/storage.admin", "roles/aiplatform.admin", "roles/iam.serviceAccountUser"}
)
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
CREDENTIAL_TYPES = frozenset({"gcp:serviceaccount/key:Key", "gcp:storage/hmacKey:HmacKey"})
SECRET_VERSION = "gcp:secretmanager/secretVersion:SecretVersion"

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


def _known(value: object) -> bool:
    return value is not None and value != UNKNOWN


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
        if _known(address) and _known(prefix):
            yield "address/prefixLength", f"{address}/{int(prefix)}"


def ranges_avoid_vertex_reserved(
    resource_type: str, props: Mapping[str, Any], _: RuleContext
) -> list[str]:
    messages = []
    for where, cidr in _declared_ranges(resource_type, props):
        if not _known(cidr):
            continue
        try:
            network = ipaddress.ip_network(str(cidr), strict=False)
        except ValueError:
            messages.append(f"{where} {cidr!r} is not a CIDR range")
            continue
        if network.version == 4 and network.overlaps(VERTEX_RESERVED_RANGE):
            messages.append(f"{where} {cidr} overlaps {VERTEX_RESERVED_RANGE}, reserved by Vertex")
    return messages


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
    if resource_type == CRYPTO_KEY and not props.get("rotationPeriod"):
        return ["no rotationPeriod: the key is never rotated"]
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
        "No project-wide storage.admin, aiplatform.admin or iam.serviceAccountUser.",
        "grant the role on the bucket or service account that needs it, not on the project",
        resource_check=no_project_wide_admin,
    ),
    Rule(
        "no-service-account-keys",
        "No service account keys or HMAC keys.",
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
        "KMS keys rotate.",
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
