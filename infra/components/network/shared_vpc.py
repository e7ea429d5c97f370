"""Shared VPC: attach this project to the host and let Vertex's agents use the host network."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp


@dataclass(frozen=True)
class SharedVpcArgs:
    host_project: str
    service_project: str
    subnetworks: list[tuple[str, gcp.compute.Subnetwork]]
    """(region, subnet) of the host subnets the service project may use (subnet-level, not
    host-wide, networkUser): the stack's region and its further regions."""
    agents: list[pulumi.Input[str]]
    """IAM members of the service agents that create interfaces/peerings in the host network."""
    apis: list[pulumi.Resource]


class SharedVpc(pulumi.ComponentResource):
    """Service project attachment, ``compute.networkUser`` on each shared subnet and
    ``dns.peer`` on the host for the agents (needed for DNS peering: docs/vertex-facts.md,
    "Networks and service agents")."""

    def __init__(self, name: str, args: SharedVpcArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("vtx:platform:SharedVpc", name, None, opts)
        attachment = gcp.compute.SharedVPCServiceProject(
            f"{name}-service-project",
            host_project=args.host_project,
            service_project=args.service_project,
            opts=pulumi.ResourceOptions(parent=self, depends_on=args.apis),
        )
        after = pulumi.ResourceOptions(parent=self, depends_on=[attachment])
        self.grants: list[pulumi.Resource] = []
        for agent_index, agent in enumerate(args.agents):
            for subnet_index, (region, subnet) in enumerate(args.subnetworks):
                self.grants.append(
                    gcp.compute.SubnetworkIAMMember(
                        f"{name}-agent{agent_index}-subnet{subnet_index}-network-user",
                        project=args.host_project,
                        region=region,
                        subnetwork=subnet.name,
                        role="roles/compute.networkUser",
                        member=agent,
                        opts=after,
                    )
                )
            self.grants.append(
                gcp.projects.IAMMember(
                    f"{name}-agent{agent_index}-dns-peer",
                    project=args.host_project,
                    role="roles/dns.peer",
                    member=agent,
                    opts=after,
                )
            )
        self.register_outputs({"host_project": args.host_project})
