"""Secret Manager secrets (named ``secret_manager`` so that it cannot shadow the stdlib ``secrets``
module: Pulumi runs ``infra/`` with that directory first on ``sys.path``).

Only the secret containers are declared, never a version: values are added out of band with
``gcloud secrets versions add NAME --data-file=-`` so they never reach config, code or state.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp


@dataclass(frozen=True)
class SecretsArgs:
    project: str
    names: list[str]
    locations: list[str]
    """Replica regions; empty for automatic replication."""
    labels: dict[str, str]
    trainer_member: pulumi.Input[str]
    apis: list[pulumi.Resource]


class Secrets(pulumi.ComponentResource):
    """One secret per name, each with ``secretAccessor`` for the trainer on that secret only."""

    secrets: dict[str, gcp.secretmanager.Secret]

    def __init__(self, name: str, args: SecretsArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("vtx:platform:Secrets", name, None, opts)
        replication = (
            gcp.secretmanager.SecretReplicationArgs(
                user_managed=gcp.secretmanager.SecretReplicationUserManagedArgs(
                    replicas=[
                        gcp.secretmanager.SecretReplicationUserManagedReplicaArgs(location=loc)
                        for loc in args.locations
                    ]
                )
            )
            if args.locations
            else gcp.secretmanager.SecretReplicationArgs(
                auto=gcp.secretmanager.SecretReplicationAutoArgs()
            )
        )
        self.secrets = {}
        self.grants: list[pulumi.Resource] = []
        for secret_id in args.names:
            secret = gcp.secretmanager.Secret(
                f"{name}-{secret_id}",
                project=args.project,
                secret_id=secret_id,
                replication=replication,
                labels=args.labels,
                opts=pulumi.ResourceOptions(parent=self, depends_on=args.apis),
            )
            grant = gcp.secretmanager.SecretIamMember(
                f"{name}-{secret_id}-trainer",
                project=args.project,
                secret_id=secret.secret_id,
                role="roles/secretmanager.secretAccessor",
                member=args.trainer_member,
                opts=pulumi.ResourceOptions(parent=self),
            )
            self.grants.append(grant)
            self.secrets[secret_id] = secret
        self.register_outputs({"secrets": list(self.secrets)})
