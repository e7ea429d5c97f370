"""Checks on the network: subnets, address ranges, firewalls, networks and DNS.

Subnets reach Google APIs privately and (in prod) keep flow logs; no declared range overlaps the
one Vertex AI training reserves; no firewall opens SSH, RDP or every port to the internet
(``firewall.internet_exposures`` reads every kind of firewall); networks are custom mode and
have a DNS server policy that logs their queries; public DNS zones are signed with DNSSEC.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from infra.policy.firewall import internet_exposures
from infra.policy.rule_types import RuleContext, StackResource
from infra.policy.values import UNKNOWN, known

# Vertex AI training reserves this range in the peered / attached network (not confirmed from a
# Google page: docs/vertex-facts.md, "Networks and service agents").
VERTEX_RESERVED_RANGE = ipaddress.ip_network("172.16.0.0/16")

SUBNETWORK = "gcp:compute/subnetwork:Subnetwork"
GLOBAL_ADDRESS = "gcp:compute/globalAddress:GlobalAddress"
NETWORK = "gcp:compute/network:Network"
DNS_ZONE = "gcp:dns/managedZone:ManagedZone"
DNS_POLICY = "gcp:dns/policy:Policy"
# A network as a DNS policy names it: its id or its selfLink (https://.../compute/v1/ + the id).
NETWORK_PATH = re.compile(r"(?:^|/)projects/([^/]+)/global/networks/([^/]+)$")

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


NetworkKey = tuple[str | None, str]
"""(project, name) of a network; the project is None where the provider's default applies."""


def network_key(props: Mapping[str, Any]) -> NetworkKey | None:
    for link in (props.get("selfLink"), props.get("id")):
        if known(link) and (match := NETWORK_PATH.search(str(link))):
            return match.group(1), match.group(2)
    name, project = props.get("name"), props.get("project")
    if not known(name):
        return None
    return (str(project) if known(project) else None), str(name)


def same_network(network: NetworkKey, named: NetworkKey) -> bool:
    """A policy may name the project by number where the network says its id: names decide."""
    (project, name), (named_project, named_name) = network, named
    if name != named_name:
        return False
    projects = {project, named_project}
    return None in projects or len(projects) == 1 or any(p.isdigit() for p in projects if p)


def _policy_networks(props: Mapping[str, Any]) -> tuple[list[NetworkKey], bool]:
    """The networks a DNS policy names, and whether some are unknown until apply."""
    networks = props.get("networks")
    if not isinstance(networks, list):
        return [], networks == UNKNOWN
    named, unknown = [], False
    for entry in networks:
        url = entry.get("networkUrl") if isinstance(entry, Mapping) else entry
        match = NETWORK_PATH.search(str(url)) if known(url) else None
        if match:
            named.append((match.group(1), match.group(2)))
        else:
            unknown = unknown or url == UNKNOWN
    return named, unknown


def network_dns_logging(
    resources: Sequence[StackResource], _: RuleContext
) -> list[tuple[str, str | None]]:
    """CIS GCP 2.12: every network the stack declares has a DNS policy with logging on."""
    logged: list[NetworkKey] = []
    silent: list[tuple[NetworkKey, str]] = []
    unresolved = False
    for policy in resources:
        if policy.type != DNS_POLICY:
            continue
        named, unknown = _policy_networks(policy.props)
        if policy.props.get("enableLogging") in (True, UNKNOWN):
            logged += named
            # Before apply a policy names a new network by an id not known yet: which network
            # it covers shows only then, so no network is judged on such a preview.
            unresolved = unresolved or unknown
        else:
            silent += [(key, policy.name) for key in named]
    if unresolved:
        return []
    violations: list[tuple[str, str | None]] = []
    for network in resources:
        key = network_key(network.props) if network.type == NETWORK else None
        if key is None or any(same_network(key, named) for named in logged):
            continue
        policy = next((name for named, name in silent if same_network(key, named)), None)
        if policy is None:
            problem = "no DNS policy with enableLogging names it"
        else:
            problem = f"its DNS policy {policy} leaves enableLogging off"
        violations.append(
            (f"network {key[1]}: {problem}, so its DNS queries are not logged", network.urn)
        )
    return violations
