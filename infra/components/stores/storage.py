"""The four buckets and the trainer's bucket-level roles.

| bucket | holds | trainer role | protection |
|---|---|---|---|
| data | training data | objectViewer | soft delete |
| checkpoints | runs/<run-id>/ (checkpoints, model dir, logs) | objectUser | versions, soft delete |
| staging | packages, rendered specs | objectViewer | objects expire |
| models | exported models | objectUser | versions, soft delete |

Every bucket: uniform bucket-level access, public access prevention enforced, labels, the CMEK
key when one is given. No project-wide storage role for anyone.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

BUCKET_KINDS = ("data", "checkpoints", "staging", "models")
TRAINER_ROLES = {
    "data": "roles/storage.objectViewer",
    "checkpoints": "roles/storage.objectUser",  # write + delete: checkpoint rotation
    "staging": "roles/storage.objectViewer",
    "models": "roles/storage.objectUser",
}
VERSIONED = frozenset({"checkpoints", "models"})
SECONDS_PER_DAY = 86_400


@dataclass(frozen=True)
class StorageArgs:
    project: str
    prefix: str
    location: str
    labels: dict[str, str]
    soft_delete_days: int
    noncurrent_version_days: int
    staging_ttl_days: int
    trainer_member: pulumi.Input[str]
    kms_key: pulumi.Input[str] | None
    depends_on: list[pulumi.Resource]
    """API enablement and, with CMEK, the storage agent's key grant (else creation fails)."""


class Storage(pulumi.ComponentResource):
    buckets: dict[str, gcp.storage.Bucket]
    grants: list[gcp.storage.BucketIAMMember]

    def __init__(self, name: str, args: StorageArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("vtx:platform:Storage", name, None, opts)
        self._args = args
        self.buckets = {kind: self._bucket(name, kind) for kind in BUCKET_KINDS}
        self.grants = [
            gcp.storage.BucketIAMMember(
                f"{name}-{kind}-trainer",
                bucket=bucket.name,
                role=TRAINER_ROLES[kind],
                member=args.trainer_member,
                opts=pulumi.ResourceOptions(parent=self),
            )
            for kind, bucket in self.buckets.items()
        ]
        self.register_outputs({kind: b.name for kind, b in self.buckets.items()})

    def _bucket(self, name: str, kind: str) -> gcp.storage.Bucket:
        args = self._args
        return gcp.storage.Bucket(
            f"{name}-{kind}",
            project=args.project,
            name=f"{args.prefix}-{kind}",
            location=args.location,
            storage_class="STANDARD",
            uniform_bucket_level_access=True,
            public_access_prevention="enforced",
            force_destroy=False,
            labels=args.labels | {"bucket": kind},
            versioning=gcp.storage.BucketVersioningArgs(enabled=kind in VERSIONED),
            soft_delete_policy=gcp.storage.BucketSoftDeletePolicyArgs(
                retention_duration_seconds=args.soft_delete_days * SECONDS_PER_DAY
            ),
            lifecycle_rules=self._lifecycle(kind),
            encryption=(
                gcp.storage.BucketEncryptionArgs(default_kms_key_name=args.kms_key)
                if args.kms_key is not None
                else None
            ),
            opts=pulumi.ResourceOptions(parent=self, depends_on=args.depends_on),
        )

    def _lifecycle(self, kind: str) -> list[gcp.storage.BucketLifecycleRuleArgs]:
        args = self._args
        delete = gcp.storage.BucketLifecycleRuleActionArgs(type="Delete")
        if kind == "staging":
            condition = gcp.storage.BucketLifecycleRuleConditionArgs(age=args.staging_ttl_days)
            return [gcp.storage.BucketLifecycleRuleArgs(action=delete, condition=condition)]
        if kind in VERSIONED:
            # Old versions are what an overwritten checkpoint/model leaves: keep them a while.
            condition = gcp.storage.BucketLifecycleRuleConditionArgs(
                days_since_noncurrent_time=args.noncurrent_version_days, with_state="ARCHIVED"
            )
            return [gcp.storage.BucketLifecycleRuleArgs(action=delete, condition=condition)]
        return []
