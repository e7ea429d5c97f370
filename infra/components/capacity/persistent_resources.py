"""Persistent resources (``vtx:platform.persistent_resources``): warm pools of Vertex training VMs
that stay up and take jobs at once, each a ``gcp.vertex.AiPersistentResource`` in its region,
joined to the stack's network the way its jobs are (the region's PSC interface attachment, or
the peered VPC) and encrypted with the region's CMEK key when the stack has one
(docs/vertex-facts.md, "Persistent resources"). Their outputs are the stack contract's
``persistent_resources`` (jobs.core.stack.PersistentResourceOutputs)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_gcp as gcp

from infra.config import PersistentResourceConfig, WarmPoolConfig


@dataclass(frozen=True)
class PersistentResourcesArgs:
    project: str
    project_number: pulumi.Input[str]
    region: str
    resources: list[PersistentResourceConfig]
    labels: dict[str, str]
    attachments: dict[str, pulumi.Input[str]]
    """Region -> network attachment (psc-interface stacks); empty for peering."""
    network: pulumi.Input[str] | None
    """The peered VPC as Vertex names it (peering stacks)."""
    kms_keys: dict[str, pulumi.Input[str]]
    """Region -> CMEK key (CMEK stacks)."""
    depends_on: list[pulumi.Resource]


def _pool(pool: WarmPoolConfig) -> gcp.vertex.AiPersistentResourceResourcePoolArgs:
    machine = gcp.vertex.AiPersistentResourceResourcePoolMachineSpecArgs(
        machine_type=pool.machine,
        accelerator_type=pool.accelerator,
        accelerator_count=pool.accelerator_count if pool.accelerator else None,
    )
    scaling = (
        gcp.vertex.AiPersistentResourceResourcePoolAutoscalingSpecArgs(
            min_replica_count=pool.replicas, max_replica_count=pool.max_replicas
        )
        if pool.max_replicas
        else None
    )
    return gcp.vertex.AiPersistentResourceResourcePoolArgs(
        id=pool.id,
        machine_spec=machine,
        replica_count=pool.replicas,
        autoscaling_spec=scaling,
        disk_spec=gcp.vertex.AiPersistentResourceResourcePoolDiskSpecArgs(
            boot_disk_type=pool.boot_disk_type, boot_disk_size_gb=pool.boot_disk_size_gb
        ),
    )


def _output_pool(pool: WarmPoolConfig) -> dict[str, Any]:
    return {
        "id": pool.id,
        "machine_type": pool.machine,
        "accelerator_type": pool.accelerator,
        "accelerator_count": pool.accelerator_count or (1 if pool.accelerator else 0),
        "boot_disk_type": pool.boot_disk_type,
        "boot_disk_size_gb": pool.boot_disk_size_gb,
        "replica_count": pool.replicas,
        "max_replica_count": pool.max_replicas,
    }


class PersistentResources(pulumi.ComponentResource):
    resources: dict[str, gcp.vertex.AiPersistentResource]
    outputs: pulumi.Output[dict[str, Any]]

    def __init__(
        self, name: str, args: PersistentResourcesArgs, opts: pulumi.ResourceOptions | None = None
    ):
        super().__init__("vtx:platform:PersistentResources", name, None, opts)
        child = pulumi.ResourceOptions(parent=self, depends_on=args.depends_on)
        self.resources = {}
        exported = {}
        for entry in args.resources:
            region = entry.region or args.region
            attachment = args.attachments.get(region)
            key = args.kms_keys.get(region)
            resource = gcp.vertex.AiPersistentResource(
                entry.id,
                name=entry.id,
                project=args.project,
                location=region,
                display_name=entry.id,
                labels=args.labels | dict(entry.labels),
                resource_pools=[_pool(p) for p in entry.pools],
                psc_interface_config=gcp.vertex.AiPersistentResourcePscInterfaceConfigArgs(
                    network_attachment=attachment
                )
                if attachment
                else None,
                network=args.network if attachment is None else None,
                encryption_spec=gcp.vertex.AiPersistentResourceEncryptionSpecArgs(kms_key_name=key)
                if key
                else None,
                opts=child,
            )
            self.resources[entry.id] = resource
            exported[entry.id] = pulumi.Output.all(
                name=pulumi.Output.concat(
                    "projects/",
                    args.project_number,
                    f"/locations/{region}/persistentResources/{entry.id}",
                ),
                region=region,
                pools=[_output_pool(p) for p in entry.pools],
                labels=args.labels | dict(entry.labels),
            )
        self.outputs = pulumi.Output.all(**exported)
        self.register_outputs({"persistent_resources": self.outputs})
