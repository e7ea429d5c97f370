"""The offline preview: resources grouped by component, with the settings worth reading."""

from __future__ import annotations

import json
from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

from infra.offline.records import OfflineRun, RecordedResource

# The settings worth seeing per type in a preview (dotted paths into the inputs).
KEY_SETTINGS: dict[str, tuple[str, ...]] = {
    "gcp:projects/service:Service": ("service",),
    "gcp:projects/serviceIdentity:ServiceIdentity": ("service",),
    "gcp:serviceaccount/account:Account": ("accountId",),
    "gcp:projects/iAMMember:IAMMember": ("project", "role", "member"),
    "gcp:projects/iAMCustomRole:IAMCustomRole": ("roleId",),
    "gcp:serviceaccount/iAMMember:IAMMember": ("serviceAccountId", "role", "member"),
    "gcp:storage/bucketIAMMember:BucketIAMMember": ("bucket", "role", "member"),
    "gcp:secretmanager/secretIamMember:SecretIamMember": ("secretId", "role", "member"),
    "gcp:kms/cryptoKeyIAMMember:CryptoKeyIAMMember": ("role", "member"),
    "gcp:compute/subnetworkIAMMember:SubnetworkIAMMember": ("subnetwork", "role", "member"),
    "gcp:artifactregistry/repositoryIamMember:RepositoryIamMember": (
        "repository",
        "role",
        "member",
    ),
    "gcp:compute/network:Network": ("name", "project", "autoCreateSubnetworks"),
    "gcp:compute/subnetwork:Subnetwork": (
        "name",
        "ipCidrRange",
        "privateIpGoogleAccess",
        "logConfig.flowSampling",
    ),
    "gcp:compute/firewall:Firewall": ("name", "priority", "sourceRanges", "allows", "denies"),
    "gcp:compute/router:Router": ("name",),
    "gcp:compute/routerNat:RouterNat": ("name", "sourceSubnetworkIpRangesToNat"),
    "gcp:compute/networkAttachment:NetworkAttachment": ("name", "connectionPreference"),
    "gcp:compute/globalAddress:GlobalAddress": ("name", "purpose", "address", "prefixLength"),
    "gcp:compute/sharedVPCServiceProject:SharedVPCServiceProject": (
        "hostProject",
        "serviceProject",
    ),
    "gcp:servicenetworking/connection:Connection": ("service", "reservedPeeringRanges"),
    "gcp:dns/policy:Policy": ("name", "project", "enableLogging"),
    "gcp:storage/bucket:Bucket": (
        "name",
        "location",
        "publicAccessPrevention",
        "versioning.enabled",
        "softDeletePolicy.retentionDurationSeconds",
        "encryption.defaultKmsKeyName",
    ),
    "gcp:artifactregistry/repository:Repository": (
        "repositoryId",
        "dockerConfig.immutableTags",
        "vulnerabilityScanningConfig.enablementConfig",
        "kmsKeyName",
    ),
    "gcp:cloudquota/sQuotaPreference:SQuotaPreference": (
        "quotaId",
        "dimensions.region",
        "quotaConfig.preferredValue",
    ),
    "gcp:secretmanager/secret:Secret": ("secretId",),
    "gcp:kms/keyRing:KeyRing": ("name", "location"),
    "gcp:kms/cryptoKey:CryptoKey": ("name", "rotationPeriod"),
    "gcp:vertex/aiTensorboard:AiTensorboard": ("displayName", "encryptionSpec.kmsKeyName"),
    "gcp:billing/budget:Budget": ("displayName", "amount.specifiedAmount.units", "thresholdRules"),
    "gcp:iam/workloadIdentityPool:WorkloadIdentityPool": ("workloadIdentityPoolId",),
    "gcp:iam/workloadIdentityPoolProvider:WorkloadIdentityPoolProvider": ("attributeCondition",),
}


def lookup(inputs: dict[str, Any], path: str) -> Any:
    """Value at a dotted path in a resource's inputs, or None."""
    value: Any = inputs
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


# Display only: keeps a preview readable in 80 columns.
ABBREVIATIONS = (
    ("https://www.googleapis.com/compute/v1/", ""),
    (".iam.gserviceaccount.com", ""),
    ("serviceAccount:", "sa:"),
    ("principalSet://iam.googleapis.com/", "principalSet://"),
)


def _short(value: Any) -> str:
    if isinstance(value, list) and value and isinstance(value[0], dict):
        return ",".join(str(v.get("thresholdPercent") or v.get("protocol") or v) for v in value)
    if isinstance(value, float) and value.is_integer():
        value = int(value)  # protobuf Struct numbers arrive as floats
    text = value if isinstance(value, str) else json.dumps(value)
    for long, short in ABBREVIATIONS:
        text = text.replace(long, short)
    return text


def settings_line(resource: RecordedResource) -> str:
    parts = []
    for path in KEY_SETTINGS.get(resource.type, ()):
        value = lookup(resource.inputs, path)
        if value is not None:
            parts.append(f"{path.rsplit('.', 1)[-1]}={_short(value)}")
    return " ".join(parts)


def render_preview(run: OfflineRun) -> Any:
    """A rich renderable: resources grouped by component, with their key settings."""
    platform = run.outputs.get("platform", {})
    title = Text.assemble(
        ("vtx offline preview ", "bold"),
        (f"stack {run.stack}", "bold cyan"),
        f"  project {platform.get('project')}  region {platform.get('region')}  ",
        (f"{len(run.resources)} resources", "green"),
        "  (Pulumi mocks, nothing was created)",
    )
    tables: list[Any] = [title]
    for component, resources in run.by_component().items():
        table = Table(title=f"{component} ({len(resources)})", title_justify="left", expand=True)
        table.add_column("type", style="cyan", no_wrap=True)
        table.add_column("name", overflow="fold", max_width=28)
        table.add_column("key settings", overflow="fold", ratio=1)
        for resource in resources:
            short_type = resource.type.split(":")[-1]
            table.add_row(short_type, resource.name, settings_line(resource))
        tables.append(table)
    outputs = Table(title="platform output (jobs.core.stack.StackOutputs)", title_justify="left")
    outputs.add_column("key", style="cyan")
    outputs.add_column("value", overflow="fold")
    for key, value in platform.items():
        outputs.add_row(key, value if isinstance(value, str) else json.dumps(value))
    tables.append(outputs)
    return Group(*tables)
