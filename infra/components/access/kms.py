"""Customer-managed encryption (prod): one key ring and one rotating key in the stack's region,
usable by the service agents of the services that encrypt with it (and by nobody else)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi
import pulumi_gcp as gcp

ENCRYPTER_DECRYPTER = "roles/cloudkms.cryptoKeyEncrypterDecrypter"
SECONDS_PER_DAY = 86_400


@dataclass(frozen=True)
class KmsArgs:
    project: str
    location: str
    prefix: str
    rotation_days: int
    labels: dict[str, str]
    agents: dict[str, pulumi.Input[str]]
    """Service agent IAM members allowed to use the key, by service (storage, registry...)."""
    apis: list[pulumi.Resource] = field(default_factory=list)
    agents_ready: list[pulumi.Resource] = field(default_factory=list)
    """Grants to agents wait for these (API enablement, ServiceIdentity)."""


class Kms(pulumi.ComponentResource):
    """``kms.KeyRing`` + ``kms.CryptoKey`` (rotation on) + encrypter/decrypter per agent.

    Key rings cannot be deleted in GCP: ``pulumi destroy`` leaves them (and the key's versions are
    scheduled for destruction), so re-creating a stack with the same prefix needs a new name.
    """

    key: gcp.kms.CryptoKey
    grants: list[gcp.kms.CryptoKeyIAMMember]

    def __init__(self, name: str, args: KmsArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("vtx:platform:Kms", name, None, opts)
        ring = gcp.kms.KeyRing(
            f"{name}-ring",
            project=args.project,
            location=args.location,
            name=f"{args.prefix}-ring",
            opts=pulumi.ResourceOptions(parent=self, depends_on=args.apis),
        )
        self.key = gcp.kms.CryptoKey(
            f"{name}-key",
            key_ring=ring.id,
            name=f"{args.prefix}-key",
            purpose="ENCRYPT_DECRYPT",
            rotation_period=f"{args.rotation_days * SECONDS_PER_DAY}s",
            labels=args.labels,
            # Losing the key loses every object encrypted with it: make `pulumi destroy` refuse.
            opts=pulumi.ResourceOptions(parent=self, protect=True),
        )
        self.grants = [
            gcp.kms.CryptoKeyIAMMember(
                f"{name}-{service}-agent",
                crypto_key_id=self.key.id,
                role=ENCRYPTER_DECRYPTER,
                member=member,
                opts=pulumi.ResourceOptions(parent=self, depends_on=args.agents_ready),
            )
            for service, member in args.agents.items()
        ]
        self.register_outputs({"key": self.key.id})
