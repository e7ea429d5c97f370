"""Reading what a firewall rule lets in from, or out to, the internet, whatever its flavour.

pulumi-gcp has VPC firewall rules (``compute/firewall``: ``allows``, ``sourceRanges``) and three
kinds of firewall policy (hierarchical, global network, regional network), each as a rule
resource and as a policy "with rules" (``match.srcIpRanges``, ``match.layer4Configs``). One reader
turns them all into the same question: which ports does it open, and to which internet-wide
sources? Denies, egress and disabled rules open nothing. ``internet_egress`` asks the same of
egress rules (``destinationRanges``, ``match.destIpRanges``), for stacks with no route out.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from infra.policy.values import UNKNOWN, known

T = TypeVar("T")

FIREWALL = "gcp:compute/firewall:Firewall"
POLICY_RULE_TYPES = frozenset(
    {
        "gcp:compute/firewallPolicyRule:FirewallPolicyRule",
        "gcp:compute/networkFirewallPolicyRule:NetworkFirewallPolicyRule",
        "gcp:compute/regionNetworkFirewallPolicyRule:RegionNetworkFirewallPolicyRule",
    }
)
POLICY_WITH_RULES_TYPES = frozenset(
    {
        "gcp:compute/firewallPolicyWithRules:FirewallPolicyWithRules",
        "gcp:compute/networkFirewallPolicyWithRules:NetworkFirewallPolicyWithRules",
        "gcp:compute/regionNetworkFirewallPolicyWithRules:RegionNetworkFirewallPolicyWithRules",
    }
)

# A public range at least this wide counts as "the internet": 0.0.0.0/0 split in halves, or a
# /8 of someone else's addresses, is no narrower in practice. Google's own source ranges (IAP
# TCP forwarding 35.235.240.0/20, health checks 35.191.0.0/16) stay well inside.
_INTERNET_PREFIX_LEN = {4: 8, 6: 32}

# Ports an attacker tries first; CIS GCP 3.6 (SSH) and 3.7 (RDP).
REMOTE_ADMIN_PORTS = {22: "SSH", 3389: "RDP"}
_PORT_PROTOCOLS = frozenset({"tcp", "udp", "sctp", "6", "17", "132"})
_ALL_PROTOCOLS = frozenset({"all"})


@dataclass(frozen=True)
class Exposure:
    """One protocol/ports entry of a rule that lets internet-wide sources in."""

    where: str
    """The rule's path inside the resource (``allows[0]``, ``rules[2].match.layer4Configs[0]``)."""
    sources: tuple[str, ...]
    protocol: str
    ports: tuple[str, ...]
    """Empty when the entry opens every port of the protocol."""

    @property
    def every_port(self) -> bool:
        return self.protocol in _ALL_PROTOCOLS or (
            self.protocol in _PORT_PROTOCOLS and not self.ports
        )

    def admin_ports(self) -> list[str]:
        """The remote administration services (SSH, RDP) this entry opens."""
        if self.protocol not in _PORT_PROTOCOLS and not self.every_port:
            return []
        return [
            f"{name} ({port})"
            for port, name in REMOTE_ADMIN_PORTS.items()
            if self.every_port or any(_port_in(port, spec) for spec in self.ports)
        ]


def _port_in(port: int, spec: str) -> bool:
    low, _, high = str(spec).partition("-")
    try:
        return int(low) <= port <= int(high or low)
    except ValueError:
        return False


def is_internet_wide(cidr: str) -> bool:
    """True for 0.0.0.0/0, ::/0 and any public range about as wide; False for private ones."""
    try:
        network = ipaddress.ip_network(cidr.strip(), strict=False)
    except ValueError:
        return False
    if network.prefixlen == 0:
        return True
    return not network.is_private and network.prefixlen <= _INTERNET_PREFIX_LEN[network.version]


def _strings(value: object) -> list[str]:
    if isinstance(value, Sequence) and not isinstance(value, str):
        return [str(item) for item in value if known(item)]
    return []


def _public(cidr: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network | None:
    try:
        network = ipaddress.ip_network(cidr.strip(), strict=False)
    except ValueError:
        return None
    return None if network.is_private else network


def _public_union_is_internet_wide(cidrs: list[str]) -> bool:
    """True when the public ranges together, overlaps counted once, span as many addresses as
    one internet-wide range: 0.0.0.0/1 given as 128 /9 blocks is half the internet, though no
    block alone is as wide as a /8."""
    for version, prefix_len in _INTERNET_PREFIX_LEN.items():
        networks = [n for n in map(_public, cidrs) if n is not None and n.version == version]
        spanned = sum(n.num_addresses for n in ipaddress.collapse_addresses(networks))
        if networks and spanned >= 2 ** ((32 if version == 4 else 128) - prefix_len):
            return True
    return False


def _internet_sources(ranges: object, region_codes: object = None) -> tuple[str, ...]:
    cidrs = _strings(ranges)
    if _public_union_is_internet_wide(cidrs):
        found = [cidr for cidr in cidrs if is_internet_wide(cidr) or _public(cidr) is not None]
    else:
        found = [cidr for cidr in cidrs if is_internet_wide(cidr)]
    # A source given as countries is the internet, one country at a time.
    found += [f"region {code}" for code in _strings(region_codes)]
    return tuple(found)


def _entries(
    entries: object, protocol_key: str, where: str, sources: tuple[str, ...]
) -> Iterator[Exposure]:
    if not isinstance(entries, Sequence) or isinstance(entries, str):
        return
    for index, entry in enumerate(entries):
        if not isinstance(entry, Mapping) or not known(entry.get(protocol_key)):
            continue
        yield Exposure(
            where=f"{where}[{index}]",
            sources=sources,
            protocol=str(entry[protocol_key]).lower(),
            ports=tuple(_strings(entry.get("ports"))),
        )


def _vpc_rule(props: Mapping[str, Any]) -> Iterator[Exposure]:
    if props.get("disabled") is True or str(props.get("direction") or "INGRESS") != "INGRESS":
        return
    ranges = props.get("sourceRanges")
    if ranges == UNKNOWN:
        return
    # gcloud: with no source ranges, tags or service accounts an ingress rule means 0.0.0.0/0.
    unsourced = not any(
        props.get(k) for k in ("sourceRanges", "sourceTags", "sourceServiceAccounts")
    )
    sources = ("0.0.0.0/0 (no source given)",) if unsourced else _internet_sources(ranges)
    if sources:
        yield from _entries(props.get("allows"), "protocol", "allows", sources)


def _policy_rule(rule: Mapping[str, Any], where: str) -> Iterator[Exposure]:
    if rule.get("disabled") is True or str(rule.get("direction")) != "INGRESS":
        return
    if str(rule.get("action")).lower() != "allow":
        return
    match = rule.get("match")
    if not isinstance(match, Mapping):
        return
    sources = _internet_sources(match.get("srcIpRanges"), match.get("srcRegionCodes"))
    if sources:
        prefix = f"{where}." if where else ""
        yield from _entries(
            match.get("layer4Configs"), "ipProtocol", f"{prefix}match.layer4Configs", sources
        )


def internet_exposures(resource_type: str, props: Mapping[str, Any]) -> list[Exposure]:
    """What an ingress rule opens to internet-wide sources; [] for anything else."""
    return _each_rule(resource_type, props, _vpc_rule, _policy_rule)


def _each_rule(
    resource_type: str,
    props: Mapping[str, Any],
    vpc_rule: Callable[[Mapping[str, Any]], Iterable[T]],
    policy_rule: Callable[[Mapping[str, Any], str], Iterable[T]],
) -> list[T]:
    """``vpc_rule`` over a VPC firewall, ``policy_rule`` over a firewall policy's rule or each
    rule of a policy that holds them (with its path); [] for anything else."""
    if resource_type == FIREWALL:
        return list(vpc_rule(props))
    if resource_type in POLICY_RULE_TYPES:
        return list(policy_rule(props, ""))
    if resource_type in POLICY_WITH_RULES_TYPES:
        rules = props.get("rules")
        if not isinstance(rules, Sequence) or isinstance(rules, str):
            return []
        return [
            found
            for index, rule in enumerate(rules)
            if isinstance(rule, Mapping)
            for found in policy_rule(rule, f"rules[{index}]")
        ]
    return []


# --- egress: what a rule lets out to the internet -----------------------------------------------


@dataclass(frozen=True)
class EgressOpening:
    """One rule (or one rule of a policy) that lets traffic out to internet-wide destinations."""

    where: str
    """``allows`` for a VPC firewall rule, ``rules[2]`` in a policy with rules."""
    destinations: tuple[str, ...]


def _internet_destinations(
    ranges: object, region_codes: object = None, fqdns: object = None
) -> tuple[str, ...]:
    # A destination given as countries or as names on the internet is the internet too.
    return _internet_sources(ranges, region_codes) + tuple(
        f"fqdn {name}" for name in _strings(fqdns)
    )


def _vpc_egress(props: Mapping[str, Any]) -> Iterator[EgressOpening]:
    if props.get("disabled") is True or str(props.get("direction") or "INGRESS") != "EGRESS":
        return
    ranges = props.get("destinationRanges")
    if ranges == UNKNOWN or not props.get("allows"):
        return
    # gcloud: an egress rule with no destination ranges applies to 0.0.0.0/0.
    destinations = (
        ("0.0.0.0/0 (no destination given)",) if not ranges else _internet_destinations(ranges)
    )
    if destinations:
        yield EgressOpening("allows", destinations)


def _policy_egress(rule: Mapping[str, Any], where: str) -> Iterator[EgressOpening]:
    if rule.get("disabled") is True or str(rule.get("direction")) != "EGRESS":
        return
    if str(rule.get("action")).lower() != "allow":
        return
    match = rule.get("match")
    if not isinstance(match, Mapping):
        return
    destinations = _internet_destinations(
        match.get("destIpRanges"), match.get("destRegionCodes"), match.get("destFqdns")
    )
    if destinations:
        yield EgressOpening(where or "match", destinations)


def internet_egress(resource_type: str, props: Mapping[str, Any]) -> list[EgressOpening]:
    """What an egress rule lets out to internet-wide destinations; [] for anything else."""
    return _each_rule(resource_type, props, _vpc_egress, _policy_egress)
