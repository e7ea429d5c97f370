"""Checks on the network: subnets, address ranges, firewalls, networks and DNS zones.

Subnets reach Google APIs privately and (in prod) keep flow logs; no declared range overlaps the
one Vertex AI training reserves; no firewall opens SSH, RDP or every port to the internet
(``firewall.internet_exposures`` reads every kind of firewall); networks are custom mode; public
DNS zones are signed with DNSSEC.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator, Mapping
from typing import Any

from infra.policy.firewall import internet_exposures
from infra.policy.rule_types import RuleContext
from infra.policy.values import UNKNOWN, known

# Vertex AI training reserves this range in the peered / attached network (not confirmed from a
# Google page: docs/vertex-facts.md, "Networks and service agents").
VERTEX_RESERVED_RANGE = ipaddress.ip_network("172.16.0.0/16")

SUBNETWORK = "gcp:compute/subnetwork:Subnetwork"
GLOBAL_ADDRESS = "gcp:compute/globalAddress:GlobalAddress"
NETWORK = "gcp:compute/network:Network"
DNS_ZONE = "gcp:dns/managedZone:ManagedZone"

# Subnet purposes that are ordinary VM subnets; proxy-only and PSC NAT subnets cannot have
# private Google access or flow logs.
_ORDINARY_SUBNET_PURPOSES = frozenset({"PRIVATE", "PRIVATE_RFC_1918"})


def _ordinary_subnet(props: Mapping[str, Any]) -> bool:
    return props.get("purpose") in (None, *_ORDINARY_SUBNET_PURPOSES)


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
    log_config = props.get("logConfig")
    if not isinstance(log_config, Mapping):
        return ["no logConfig: VPC flow logs are off"]
    # The provider documents flowSampling 0.0 as "no logs are sampled": flow logs on, empty.
    sampling = log_config.get("flowSampling")
    if isinstance(sampling, int | float) and not isinstance(sampling, bool) and sampling <= 0:
        return [
            f"logConfig.flowSampling is {sampling}: no flow is logged; 0.5 (the default) or more"
        ]
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
