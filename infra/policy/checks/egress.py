"""Checks of a stack whose training has no route to the internet (``network.egress: none``).

Such a stack reaches Google APIs and the registries through Private Google Access only, so
nothing may open another way out: no Cloud NAT, no external address, no egress firewall rule
that allows internet-wide destinations, and no default route to the internet gateway unless an
egress deny of 0.0.0.0/0 ranks ahead of every rule that would let the traffic out (the implied
allow-egress rule, priority 65535, included). A Vertex peering (private services access) must
have "VPC Service Controls for peerings" on, or the servicenetworking network the jobs run in
keeps its own default route (docs/vertex-facts.md, "Closed egress").
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from typing import Any

from infra.policy.checks.network import NETWORK, NETWORK_PATH, NetworkKey, network_key, same_network
from infra.policy.firewall import FIREWALL, internet_egress, is_internet_wide
from infra.policy.rule_types import RuleContext, StackResource
from infra.policy.values import UNKNOWN, known

ROUTER_NAT = "gcp:compute/routerNat:RouterNat"
ADDRESS = "gcp:compute/address:Address"
GLOBAL_ADDRESS = "gcp:compute/globalAddress:GlobalAddress"
ROUTE = "gcp:compute/route:Route"
INTERNET_GATEWAY = "default-internet-gateway"
# Every VPC has an implied rule allowing all egress at the lowest priority, 65535.
IMPLIED_ALLOW_PRIORITY = 65535
DEFAULT_PRIORITY = 1000


def no_cloud_nat(resource_type: str, props: Mapping[str, Any], _: RuleContext) -> list[str]:
    if resource_type != ROUTER_NAT:
        return []
    return [f"Cloud NAT {props.get('name', '')!s} translates the VPC's traffic to the internet"]


def no_external_address(resource_type: str, props: Mapping[str, Any], _: RuleContext) -> list[str]:
    """Reserved addresses: the API's default addressType is EXTERNAL."""
    if resource_type not in (ADDRESS, GLOBAL_ADDRESS):
        return []
    kind = props.get("addressType")
    if kind == UNKNOWN or str(kind or "EXTERNAL").upper() != "EXTERNAL":
        return []
    given = "addressType EXTERNAL" if kind else "no addressType (EXTERNAL by default)"
    return [f"{given}: an internet-facing address"]


def no_internet_egress_allow(
    resource_type: str, props: Mapping[str, Any], _: RuleContext
) -> list[str]:
    return [
        f"{opening.where} lets traffic out to {', '.join(opening.destinations)}"
        for opening in internet_egress(resource_type, props)
    ]


def _priority(props: Mapping[str, Any]) -> int | None:
    value = props.get("priority", DEFAULT_PRIORITY)
    if value is None:
        return DEFAULT_PRIORITY
    return int(value) if known(value) else None


def _network_of(props: Mapping[str, Any]) -> NetworkKey | None:
    """The network a route or firewall rule names: an id, a selfLink or a bare name."""
    value = props.get("network")
    if not known(value):
        return None
    match = NETWORK_PATH.search(str(value))
    if match:
        return match.group(1), match.group(2)
    project = props.get("project")
    return (str(project) if known(project) else None), str(value)


def _whole_internet(ranges: object) -> bool:
    if not isinstance(ranges, Sequence) or isinstance(ranges, str):
        return ranges is None  # no destination given: 0.0.0.0/0
    if not ranges:
        return True
    return any(_prefix_length(r) == 0 for r in ranges)


def _prefix_length(cidr: object) -> int | None:
    if not known(cidr):
        return None
    try:
        return ipaddress.ip_network(str(cidr), strict=False).prefixlen
    except ValueError:
        return None


def _denies_everything(props: Mapping[str, Any]) -> bool:
    """An enabled egress deny of every protocol to 0.0.0.0/0, for every instance."""
    if props.get("disabled") is True or str(props.get("direction")) != "EGRESS":
        return False
    if props.get("targetTags") or props.get("targetServiceAccounts"):
        return False
    denies = props.get("denies")
    if not isinstance(denies, Sequence) or not any(
        isinstance(d, Mapping) and str(d.get("protocol")).lower() == "all" for d in denies
    ):
        return False
    return _whole_internet(props.get("destinationRanges"))


def _default_routes(resources: Sequence[StackResource]) -> list[tuple[StackResource, str]]:
    """(resource, what it is) for each default route to the internet gateway the stack has."""
    found = []
    for resource in resources:
        props = resource.props
        if resource.type == NETWORK and props.get("deleteDefaultRoutesOnCreate") is not True:
            found.append((resource, "keeps the default route 0.0.0.0/0 it is created with"))
        elif resource.type == ROUTE:
            dest, hop = props.get("destRange"), props.get("nextHopGateway")
            to_gateway = known(hop) and str(hop).rsplit("/", 1)[-1] == INTERNET_GATEWAY
            if to_gateway and known(dest) and is_internet_wide(str(dest)):
                found.append((resource, f"sends {dest} to the default internet gateway"))
    return found


def _shadowed(network: NetworkKey, resources: Sequence[StackResource]) -> bool:
    """True when a deny-all egress rule of that network ranks ahead of every way out."""
    deny: int | None = None
    first_allow = IMPLIED_ALLOW_PRIORITY
    for rule in resources:
        if rule.type != FIREWALL:
            continue
        key = _network_of(rule.props)
        priority = _priority(rule.props)
        if key is None or priority is None or not same_network(network, key):
            continue
        if _denies_everything(rule.props):
            deny = priority if deny is None else min(deny, priority)
        elif internet_egress(rule.type, rule.props):
            first_allow = min(first_allow, priority)
    # A deny wins a tie with an allow, but only a priority below 65535 overrides the implied
    # rules (Google's "VPC firewall rules" page, "Priority" and "Implied rules").
    return deny is not None and deny < IMPLIED_ALLOW_PRIORITY and deny <= first_allow


def default_route_denied(
    resources: Sequence[StackResource], _: RuleContext
) -> list[tuple[str, str | None]]:
    routes = _default_routes(resources)
    if not routes:
        return []
    # Before apply a rule may name its network by an id not known yet: judge nothing then.
    firewalls = [r for r in resources if r.type == FIREWALL]
    if any(not known(r.props.get("network")) for r in firewalls):
        return []
    violations: list[tuple[str, str | None]] = []
    for resource, what in routes:
        key = (
            network_key(resource.props) if resource.type == NETWORK else _network_of(resource.props)
        )
        if key is None or _shadowed(key, resources):
            continue
        label = "network" if resource.type == NETWORK else "route"
        violations.append(
            (
                f"{label} {resource.name} {what}, and no egress deny of 0.0.0.0/0 on "
                f"network {key[1]} ranks ahead of the rules that let traffic out",
                resource.urn,
            )
        )
    return violations


CONNECTION = "gcp:servicenetworking/connection:Connection"
PEERING_CONTROLS = "gcp:servicenetworking/vpcServiceControls:VpcServiceControls"


def peering_default_route_removed(
    resources: Sequence[StackResource], _: RuleContext
) -> list[tuple[str, str | None]]:
    """Each servicenetworking peering's network has VPC Service Controls for peerings on."""
    closed: list[str | None] = []
    for controls in resources:
        if controls.type == PEERING_CONTROLS and controls.props.get("enabled") in (True, UNKNOWN):
            closed.append(_name_of(controls.props.get("network")))
    violations: list[tuple[str, str | None]] = []
    for peering in resources:
        if peering.type != CONNECTION:
            continue
        network = _name_of(peering.props.get("network"))
        if network is None or network in closed or None in closed:
            continue
        violations.append(
            (
                f"peering {peering.name} of network {network}: VPC Service Controls for the "
                "peering are off, so the servicenetworking network Vertex runs jobs in keeps "
                "its default route to the internet",
                peering.urn,
            )
        )
    return violations


def _name_of(network: object) -> str | None:
    """A network's name from its name, id or selfLink; None when not known yet."""
    if not known(network):
        return None
    return str(network).rstrip("/").rsplit("/", 1)[-1]
