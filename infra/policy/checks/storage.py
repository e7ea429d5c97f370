"""Checks on where the platform keeps data, images and training metrics.

Buckets: uniform bucket-level access, public access prevention, a customer-managed key (prod).
Legacy bucket and object ACLs, which bucket IAM (``checks.iam.no_public_principals``) does not
see. Artifact Registry: immutable Docker tags and a customer-managed key (prod). Vertex
TensorBoard: a customer-managed key (prod). A key unknown until apply (a key the same preview
creates) counts as set.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from infra.policy.iam import PUBLIC_PRINCIPALS
from infra.policy.rule_types import RuleContext
from infra.policy.values import UNKNOWN, known

BUCKET = "gcp:storage/bucket:Bucket"
REPOSITORY = "gcp:artifactregistry/repository:Repository"
TENSORBOARD = "gcp:vertex/aiTensorboard:AiTensorboard"
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


def registry_immutable_tags(
    resource_type: str, props: Mapping[str, Any], _: RuleContext
) -> list[str]:
    if resource_type != REPOSITORY or str(props.get("format", "")).upper() != "DOCKER":
        return []
    # Remote and virtual repositories take no pushes: no tag of theirs is moved by one.
    if str(props.get("mode") or "STANDARD_REPOSITORY") != "STANDARD_REPOSITORY":
        return []
    docker = props.get("dockerConfig")
    if not (isinstance(docker, Mapping) and docker.get("immutableTags") is True):
        return ["dockerConfig.immutableTags is not true: a pushed tag could be overwritten"]
    return []


def registry_cmek(resource_type: str, props: Mapping[str, Any], _: RuleContext) -> list[str]:
    """Artifact Registry's CMEK page (docs/vertex-facts.md, "Customer-managed keys for Vertex
    resources"): the key is set when the repository is created; one without must be re-created."""
    if resource_type != REPOSITORY or props.get("kmsKeyName"):
        return []
    return ["no kmsKeyName: its images and packages are encrypted with Google-managed keys"]


def tensorboard_cmek(resource_type: str, props: Mapping[str, Any], _: RuleContext) -> list[str]:
    """Vertex AI's CMEK page (docs/vertex-facts.md, "Customer-managed keys for Vertex
    resources"): ``encryptionSpec`` protects the TensorBoard and everything in it."""
    if resource_type != TENSORBOARD:
        return []
    spec = props.get("encryptionSpec")
    if spec == UNKNOWN or (isinstance(spec, Mapping) and spec.get("kmsKeyName")):
        return []
    return ["no encryptionSpec.kmsKeyName: training metrics are encrypted with Google-managed keys"]
