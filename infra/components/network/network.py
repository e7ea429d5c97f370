"""The private network Vertex jobs join.

A VPC without auto subnets, a training subnet with private Google access (flow logs when asked),
Cloud Router + NAT for egress without public IPs, a firewall that denies ingress except from
inside the VPC, and a Cloud DNS server policy that logs the VPC's DNS queries. Then one of the
two ways Vertex reaches it:

- ``psc-interface`` (recommended by Google): a /28 subnet and a ``compute.NetworkAttachment`` that
  the job names in ``pscInterfaceConfig``; the AI Platform agent needs ``compute.networkAdmin`` in
  the attachment's project.
- ``peering``: a reserved ``VPC_PEERING`` range and a ``servicenetworking.Connection``; the job
  names the network as ``projects/<NUMBER>/global/networks/<name>`` plus the reserved range.

With a Shared VPC host, the VPC, subnets, router and firewall live in the host project and the
network attachment in this (service) project, where the job runs.

Further regions (``capacity_regions``, where a capacity ladder's rungs run): an attachment serves
only its own region, so psc-interface stacks get, per further region, the attachment's subnet,
a network attachment and a Cloud Router + NAT (NAT is regional too). Peering stacks get nothing
there: the VPC, its peering range and the servicenetworking connection are global, so a job in
any region joins the same network.

Private serving (``serving.psc_consumers``): per private Vertex endpoint served over Private
Service Connect, an internal address in the training subnet and a forwarding rule to the
endpoint's service attachment. Peering endpoints need nothing more than the peering.

Closed egress (``network.egress: none``): no Router or NAT anywhere and no default route (the VPC
is created without one); the only route out is to the Google APIs VIP range, which Google's
Private Google Access guide routes through ``default-internet-gateway`` (the packets stay in
Google's network). Private Cloud DNS zones answer googleapis.com, gcr.io and pkg.dev with that
VIP; egress firewall rules allow the VIP (HTTPS) and the VPC's own ranges and deny 0.0.0.0/0 at
the lowest priority a rule may have, beneath the allows and above the implied allow-all.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

import pulumi
import pulumi_gcp as gcp

# Private Google Access VIPs (https://cloud.google.com/vpc/docs/configure-private-google-access,
# "Domain options"): restricted.googleapis.com serves only what VPC Service Controls supports,
# private.googleapis.com most Google APIs. Neither range is announced to the internet.
GOOGLE_APIS_VIPS = {"private": "199.36.153.8/30", "restricted": "199.36.153.4/30"}
# Domains the jobs reach without the internet: Google APIs (Cloud Storage, Vertex, logging...)
# and the registries (Artifact Registry's REGION-docker.pkg.dev, Container Registry's gcr.io).
PRIVATE_DOMAINS = ("googleapis.com", "gcr.io", "pkg.dev")
# The lowest priority a VPC firewall rule may have is 65535, taken by the implied allow-egress
# rule: the deny-all sits just above it and beneath every allow (1000).
DENY_PRIORITY = 65534
ALLOW_PRIORITY = 1000
DNS_TTL = 300


@dataclass(frozen=True)
class NetworkArgs:
    project: str
    """The service project (where the network attachment goes)."""
    network_project: str
    """Where the VPC lives: the service project, or the Shared VPC host."""
    network_project_number: pulumi.Input[str]
    region: str
    prefix: str
    mode: Literal["psc-interface", "peering"]
    subnet_cidr: str
    psc_subnet_cidr: str | None
    peering_cidr: str | None
    flow_logs: bool
    flow_logs_sampling: float
    aiplatform_agent: pulumi.Input[str]
    apis: list[pulumi.Resource]
    """Enablement of compute, servicenetworking, cloudresourcemanager and dns."""
    labels: Mapping[str, str]
    """Set on what takes labels here: only the peering range (VPCs, subnets, routers, firewalls
    and network attachments have none in the Compute API)."""
    further_psc_subnets: Mapping[str, str] = field(default_factory=dict)
    """psc-interface only: each further region -> its attachment subnet's CIDR."""
    psc_consumers: Mapping[str, str] = field(default_factory=dict)
    """Private serving over PSC: name -> the service attachment of a private Vertex endpoint."""
    egress: Literal["nat", "none"] = "nat"
    """nat: Cloud NAT per region; none: Private Google Access only (module docstring)."""
    google_apis: Literal["private", "restricted"] = "private"
    """Closed egress: which VIP googleapis.com resolves to (restricted inside a VPC-SC
    perimeter)."""


@dataclass(frozen=True)
class PscConsumerEndpoint:
    """Where the VPC reaches one private Vertex endpoint: an internal address of the training
    subnet, forwarded to the endpoint's service attachment."""

    address: gcp.compute.Address
    forwarding_rule: gcp.compute.ForwardingRule


class Network(pulumi.ComponentResource):
    """VPC, subnets, NAT, firewall, and the PSC attachment or the peering."""

    network: gcp.compute.Network
    subnet: gcp.compute.Subnetwork
    dns_policy: gcp.dns.Policy
    psc_subnet: gcp.compute.Subnetwork | None = None
    attachment: gcp.compute.NetworkAttachment | None = None
    peering_range: gcp.compute.GlobalAddress | None = None
    peering: gcp.servicenetworking.Connection | None = None
    agent_grant: gcp.projects.IAMMember | None = None
    further_psc_subnets: dict[str, gcp.compute.Subnetwork]
    further_attachments: dict[str, gcp.compute.NetworkAttachment]
    psc_consumers: dict[str, PscConsumerEndpoint]

    def __init__(self, name: str, args: NetworkArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("vtx:platform:Network", name, None, opts)
        self._name, self._args = name, args
        after_apis = pulumi.ResourceOptions(parent=self, depends_on=args.apis)
        self.network = gcp.compute.Network(
            f"{name}-vpc",
            project=args.network_project,
            name=f"{args.prefix}-vpc",
            auto_create_subnetworks=False,
            routing_mode="REGIONAL",
            # Closed egress: the 0.0.0.0/0 route to the internet gateway is never there.
            delete_default_routes_on_create=args.egress == "none",
            opts=after_apis,
        )
        self.subnet = self._subnet("training", args.subnet_cidr, flow_logs=args.flow_logs)
        if args.egress == "nat":
            self._egress()
        else:
            self._private_google_access()
        self._firewall()
        self.dns_policy = self._dns_logging()
        if args.mode == "psc-interface":
            assert args.psc_subnet_cidr is not None  # guaranteed by config cross-checks
            # Job traffic enters the VPC through this subnet: it needs flow logs as much as the
            # training subnet does.
            self.psc_subnet = self._subnet("psc", args.psc_subnet_cidr, flow_logs=args.flow_logs)
        else:
            self._peering()
        self.further_attachments = {}
        self.further_psc_subnets = {
            region: self._subnet(f"psc-{region}", cidr, args.flow_logs, region=region)
            for region, cidr in args.further_psc_subnets.items()
        }
        for region in self.further_psc_subnets if args.egress == "nat" else ():
            self._egress(region)
        self.psc_consumers = {
            name: self._psc_consumer(name, attachment)
            for name, attachment in args.psc_consumers.items()
        }
        self.register_outputs({"network": self.network.self_link})

    @property
    def network_project(self) -> str:
        return self._args.network_project

    def _child(self, depends_on: list[pulumi.Resource] | None = None) -> pulumi.ResourceOptions:
        return pulumi.ResourceOptions(parent=self, depends_on=depends_on)

    def _subnet(
        self, role: str, cidr: str, flow_logs: bool, region: str | None = None
    ) -> gcp.compute.Subnetwork:
        args = self._args
        log_config = (
            gcp.compute.SubnetworkLogConfigArgs(
                aggregation_interval="INTERVAL_5_SEC",
                flow_sampling=args.flow_logs_sampling,
                metadata="INCLUDE_ALL_METADATA",
            )
            if flow_logs
            else None
        )
        return gcp.compute.Subnetwork(
            f"{self._name}-{role}",
            project=args.network_project,
            region=region or args.region,
            name=f"{args.prefix}-{role}",
            network=self.network.id,
            ip_cidr_range=cidr,
            private_ip_google_access=True,
            log_config=log_config,
            opts=self._child(),
        )

    def _egress(self, further_region: str | None = None) -> None:
        """Open egress: Cloud Router + NAT in the stack's region, or in a further one
        (``-<region>`` names)."""
        args = self._args
        suffix = f"-{further_region}" if further_region else ""
        router = gcp.compute.Router(
            f"{self._name}-router{suffix}",
            project=args.network_project,
            region=further_region or args.region,
            name=f"{args.prefix}-router{suffix}",
            network=self.network.id,
            opts=self._child(),
        )
        gcp.compute.RouterNat(
            f"{self._name}-nat{suffix}",
            project=args.network_project,
            region=further_region or args.region,
            name=f"{args.prefix}-nat{suffix}",
            router=router.name,
            nat_ip_allocate_option="AUTO_ONLY",
            source_subnetwork_ip_ranges_to_nat="ALL_SUBNETWORKS_ALL_IP_RANGES",
            log_config=gcp.compute.RouterNatLogConfigArgs(enable=True, filter="ERRORS_ONLY"),
            opts=self._child(),
        )

    @property
    def internal_ranges(self) -> list[str]:
        """Every range of the VPC: the subnets, the attachments' subnets, the peering range."""
        args = self._args
        internal = [c for c in (args.subnet_cidr, args.psc_subnet_cidr, args.peering_cidr) if c]
        # Jobs in further regions enter through their own attachment subnets.
        return internal + list(args.further_psc_subnets.values())

    def _firewall(self) -> None:
        args = self._args
        internal = self.internal_ranges
        # Higher priority (lower number) allow for internal traffic, then an explicit deny-all:
        # the implied deny exists too, but an explicit one shows up in reviews and logs.
        gcp.compute.Firewall(
            f"{self._name}-allow-internal",
            project=args.network_project,
            name=f"{args.prefix}-allow-internal",
            network=self.network.id,
            direction="INGRESS",
            priority=1000,
            source_ranges=internal,
            allows=[gcp.compute.FirewallAllowArgs(protocol="all")],
            opts=self._child(),
        )
        gcp.compute.Firewall(
            f"{self._name}-deny-ingress",
            project=args.network_project,
            name=f"{args.prefix}-deny-ingress",
            network=self.network.id,
            direction="INGRESS",
            priority=65534,
            source_ranges=["0.0.0.0/0"],
            denies=[gcp.compute.FirewallDenyArgs(protocol="all")],
            log_config=gcp.compute.FirewallLogConfigArgs(metadata="INCLUDE_ALL_METADATA"),
            opts=self._child(),
        )
        if args.egress == "none":
            self._egress_firewall(internal)

    def _egress_firewall(self, internal: list[str]) -> None:
        """Closed egress: allow the VPC's own ranges and the Google APIs VIP over HTTPS, deny the
        rest. The deny is what shadows a default route the VPC may still have (one created
        before ``egress: none``: ``delete_default_routes_on_create`` acts at creation only)."""
        args = self._args
        allows = {
            "allow-egress-internal": (internal, gcp.compute.FirewallAllowArgs(protocol="all")),
            "allow-egress-google-apis": (
                [GOOGLE_APIS_VIPS[args.google_apis]],
                gcp.compute.FirewallAllowArgs(protocol="tcp", ports=["443"]),
            ),
        }
        for role, (ranges, allow) in allows.items():
            gcp.compute.Firewall(
                f"{self._name}-{role}",
                project=args.network_project,
                name=f"{args.prefix}-{role}",
                network=self.network.id,
                direction="EGRESS",
                priority=ALLOW_PRIORITY,
                destination_ranges=ranges,
                allows=[allow],
                opts=self._child(),
            )
        gcp.compute.Firewall(
            f"{self._name}-deny-egress",
            project=args.network_project,
            name=f"{args.prefix}-deny-egress",
            network=self.network.id,
            direction="EGRESS",
            priority=DENY_PRIORITY,
            destination_ranges=["0.0.0.0/0"],
            denies=[gcp.compute.FirewallDenyArgs(protocol="all")],
            log_config=gcp.compute.FirewallLogConfigArgs(metadata="INCLUDE_ALL_METADATA"),
            opts=self._child(),
        )

    def _private_google_access(self) -> None:
        """Closed egress: the VIP route and the private zones that send Google's domains to it
        (Google's guide, "Network configuration" and "DNS configuration"). Global resources of
        the VPC's project: under Shared VPC the host's, like the VPC itself."""
        args = self._args
        vip = GOOGLE_APIS_VIPS[args.google_apis]
        gcp.compute.Route(
            f"{self._name}-google-apis",
            project=args.network_project,
            name=f"{args.prefix}-google-apis",
            description=f"vtx: {args.google_apis}.googleapis.com, the only way out of the VPC",
            network=self.network.id,
            dest_range=vip,
            next_hop_gateway="default-internet-gateway",
            priority=ALLOW_PRIORITY,
            opts=self._child(),
        )
        addresses = [str(ip) for ip in ipaddress.ip_network(vip)]
        for domain in PRIVATE_DOMAINS:
            self._private_zone(domain, addresses)

    def _private_zone(self, domain: str, addresses: list[str]) -> None:
        """One private zone: the VIP name's A records, every other name a CNAME to it."""
        args = self._args
        slug = domain.replace(".", "-")
        # googleapis.com: *.googleapis.com -> private.googleapis.com; the registries' domains
        # are names themselves (gcr.io/PROJECT/IMAGE): their apex holds the A records.
        vip_name = (
            f"{args.google_apis}.googleapis.com." if domain == "googleapis.com" else f"{domain}."
        )
        zone = gcp.dns.ManagedZone(
            f"{self._name}-zone-{slug}",
            project=args.network_project,
            name=f"{args.prefix}-{slug}",
            dns_name=f"{domain}.",
            description=f"vtx: {domain} through Private Google Access, not the internet",
            visibility="private",
            private_visibility_config=gcp.dns.ManagedZonePrivateVisibilityConfigArgs(
                networks=[
                    gcp.dns.ManagedZonePrivateVisibilityConfigNetworkArgs(
                        network_url=self.network.id
                    )
                ]
            ),
            labels=dict(args.labels),
            opts=self._child(depends_on=args.apis),
        )
        records = {"a": ("A", vip_name, addresses), "cname": ("CNAME", f"*.{domain}.", [vip_name])}
        for role, (kind, name, data) in records.items():
            gcp.dns.RecordSet(
                f"{self._name}-zone-{slug}-{role}",
                project=args.network_project,
                managed_zone=zone.name,
                name=name,
                type=kind,
                ttl=DNS_TTL,
                rrdatas=data,
                opts=self._child(),
            )

    def _dns_logging(self) -> gcp.dns.Policy:
        """CIS GCP 2.12: Cloud DNS logs the queries the VPC's name servers answer. On in every
        stack, dev included: unlike flow logs (one record per sampled connection), a training
        VPC resolves little (Google APIs, package mirrors), so the Cloud Logging volume is small,
        and the names a job looked up are what an incident review needs first. The policy lives
        with the network: under Shared VPC in the host project, which owns the logs too."""
        args = self._args
        return gcp.dns.Policy(
            f"{self._name}-dns-policy",
            project=args.network_project,
            name=f"{args.prefix}-dns-logging",
            description="vtx: log the DNS queries of the training VPC",
            enable_logging=True,
            networks=[gcp.dns.PolicyNetworkArgs(network_url=self.network.id)],
            opts=self._child(depends_on=args.apis),
        )

    @property
    def subnets(self) -> list[tuple[str, gcp.compute.Subnetwork]]:
        """(region, subnet) of every subnet, the stack's region first."""
        own = [self.subnet, *([self.psc_subnet] if self.psc_subnet else [])]
        return [(self._args.region, s) for s in own] + list(self.further_psc_subnets.items())

    def attach_vertex(self, depends_on: list[pulumi.Resource]) -> None:
        """psc-interface: declare the network attachment. Separate from the constructor because
        under Shared VPC it must wait for the host grants, which need the subnets first."""
        args = self._args
        if self.psc_subnet is None:
            return
        # Vertex creates the PSC interfaces in the attachment's project as its service agent.
        self.agent_grant = gcp.projects.IAMMember(
            f"{self._name}-aiplatform-agent-network-admin",
            project=args.project,
            role="roles/compute.networkAdmin",
            member=args.aiplatform_agent,
            opts=self._child(depends_on=args.apis),
        )
        wait_for = [self.agent_grant, *depends_on]
        self.attachment = self._attachment("", args.region, self.psc_subnet, wait_for)
        self.further_attachments = {
            region: self._attachment(f"-{region}", region, subnet, wait_for)
            for region, subnet in self.further_psc_subnets.items()
        }

    def _attachment(
        self,
        suffix: str,
        region: str,
        subnet: gcp.compute.Subnetwork,
        depends_on: list[pulumi.Resource],
    ) -> gcp.compute.NetworkAttachment:
        args = self._args
        return gcp.compute.NetworkAttachment(
            f"{self._name}-attachment{suffix}",
            project=args.project,
            region=region,
            name=f"{args.prefix}-vertex{suffix}",
            description="Vertex AI training jobs join the VPC through this attachment",
            connection_preference="ACCEPT_AUTOMATIC",
            subnetworks=[subnet.self_link],
            opts=self._child(depends_on=depends_on),
        )

    def _psc_consumer(self, name: str, service_attachment: str) -> PscConsumerEndpoint:
        """A PSC endpoint: ``load_balancing_scheme=""`` makes the forwarding rule a consumer
        endpoint of a service attachment rather than a load balancer's front end."""
        args = self._args
        address = gcp.compute.Address(
            f"{self._name}-serving-{name}",
            project=args.network_project,
            region=args.region,
            name=f"{args.prefix}-{name}",
            address_type="INTERNAL",
            subnetwork=self.subnet.id,
            labels=dict(args.labels),
            opts=self._child(),
        )
        rule = gcp.compute.ForwardingRule(
            f"{self._name}-serving-{name}-rule",
            project=args.network_project,
            region=args.region,
            name=f"{args.prefix}-{name}",
            network=self.network.id,
            ip_address=address.id,
            target=service_attachment,
            load_balancing_scheme="",
            labels=dict(args.labels),
            opts=self._child(),
        )
        return PscConsumerEndpoint(address, rule)

    def _peering(self) -> None:
        args = self._args
        assert args.peering_cidr is not None  # guaranteed by config cross-checks
        address, prefix_length = args.peering_cidr.split("/")
        self.peering_range = gcp.compute.GlobalAddress(
            f"{self._name}-vertex-range",
            project=args.network_project,
            name=f"{args.prefix}-vertex-range",
            purpose="VPC_PEERING",
            address_type="INTERNAL",
            address=address,
            prefix_length=int(prefix_length),
            network=self.network.id,
            labels=dict(args.labels),
            opts=self._child(),
        )
        self.peering = gcp.servicenetworking.Connection(
            f"{self._name}-vertex-peering",
            network=self.network.id,
            service="servicenetworking.googleapis.com",
            reserved_peering_ranges=[self.peering_range.name],
            opts=self._child(),
        )
        if args.egress == "none":
            # The jobs' VMs live in Google's servicenetworking VPC, peered to this one: closing
            # this VPC leaves that network's own default route. "VPC Service Controls for
            # peerings" removes it (Google's "VPC Service Controls with Vertex AI" page): then
            # only restricted.googleapis.com leaves there, and the routes of this VPC, which
            # has no default route, are its only other way.
            gcp.servicenetworking.VpcServiceControls(
                f"{self._name}-vertex-peering-closed",
                project=args.network_project,
                network=self.network.name,
                service="servicenetworking.googleapis.com",
                enabled=True,
                opts=self._child(depends_on=[self.peering]),
            )

    @property
    def vertex_network(self) -> pulumi.Output[str] | None:
        """Peering mode: the network as Vertex wants it, by project *number*."""
        if self.peering is None:
            return None
        return pulumi.Output.all(
            self._args.network_project_number, self.network.name, self.peering.id
        ).apply(lambda parts: f"projects/{parts[0]}/global/networks/{parts[1]}")

    @property
    def reserved_ranges(self) -> pulumi.Output[list[str]]:
        if self.peering_range is None:
            return pulumi.Output.from_input([])
        return self.peering_range.name.apply(lambda name: [name])
