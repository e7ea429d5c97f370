"""Where a job's traffic can go: the egress paths, DNS answers and package sources of the review.

For each subnet a job's traffic leaves from (the training subnet, each network attachment's
subnet), three kinds of destination: the VPC's own ranges, each custom route's range (the Google
APIs VIP in a closed stack), and the internet. A path is open when a route leads there, the
first egress firewall rule that matches it allows it (rules read in priority order, a deny
winning a tie, the implied allow-egress rule last), and, for the internet, a Cloud NAT of the
subnet's region translates it. Then the way out this VPC does not govern, the network Vertex
runs the job's VMs in (``vertex_path``). Everything is read from the declared resources'
inputs, the way GCP will read them, so that a stack which adds a way out shows it here.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from typing import Any

from infra.policy.checks.egress import INTERNET_GATEWAY
from infra.policy.firewall import FIREWALL, is_internet_wide
from infra.policy.values import known
from infra.review.diagram import display_name
from infra.review.rows import shown
from infra.review.sources import ReviewResource

SUBNET = "gcp:compute/subnetwork:Subnetwork"
ATTACHMENT = "gcp:compute/networkAttachment:NetworkAttachment"
ROUTE = "gcp:compute/route:Route"
NAT = "gcp:compute/routerNat:RouterNat"
NETWORK = "gcp:compute/network:Network"
GLOBAL_ADDRESS = "gcp:compute/globalAddress:GlobalAddress"
ZONE = "gcp:dns/managedZone:ManagedZone"
RECORD = "gcp:dns/recordSet:RecordSet"
INTERNET = "0.0.0.0/0"
IMPLIED_ALLOW = "allow (implied allow-egress rule, 65535)"


def _of_type(resources: Sequence[ReviewResource], kind: str) -> list[ReviewResource]:
    return [r for r in resources if r.type == kind]


def _network(cidr: object) -> ipaddress.IPv4Network | ipaddress.IPv6Network | None:
    if not known(cidr):
        return None
    try:
        return ipaddress.ip_network(str(cidr), strict=False)
    except ValueError:
        return None


def _egress_rules(resources: Sequence[ReviewResource]) -> list[tuple[int, int, ReviewResource]]:
    """Enabled egress rules for every instance, in the order GCP applies them."""
    rules = []
    for rule in _of_type(resources, FIREWALL):
        props = rule.inputs
        if props.get("disabled") is True or props.get("direction") != "EGRESS":
            continue
        if props.get("targetTags") or props.get("targetServiceAccounts"):
            continue
        priority = props.get("priority", 1000)
        priority = int(priority) if known(priority) else 1000
        rules.append((priority, 0 if props.get("denies") else 1, rule))
    return sorted(rules, key=lambda entry: (entry[0], entry[1]))


def _firewall_verdict(
    destination: str, rules: Sequence[tuple[int, int, ReviewResource]]
) -> tuple[bool, str]:
    """(allowed, why) for traffic to ``destination``: the first rule whose ranges hold it."""
    target = _network(destination)
    for priority, is_allow, rule in rules:
        ranges = rule.inputs.get("destinationRanges") or [INTERNET]
        nets = [n for n in map(_network, ranges) if n is not None]
        if target is not None and any(
            target.version == n.version and target.subnet_of(n)  # type: ignore[arg-type]
            for n in nets
        ):
            action = f"allow {_opened(rule.inputs)}" if is_allow else "deny"
            return bool(is_allow), f"{action} ({display_name(rule)}, {priority})"
    return True, IMPLIED_ALLOW


def _opened(props: Mapping[str, Any]) -> str:
    """``tcp:443``, ``all``: what an allow rule lets through."""
    opened = []
    for allow in props.get("allows") or []:
        protocol = shown(allow.get("protocol")) if isinstance(allow, Mapping) else "-"
        ports = allow.get("ports") if isinstance(allow, Mapping) else None
        opened += [f"{protocol}:{shown(p)}" for p in ports] if ports else [protocol]
    return ", ".join(opened) or "-"


def _sources(resources: Sequence[ReviewResource]) -> list[tuple[str, str, str]]:
    """(label, cidr, region) of each subnet a job's traffic leaves from."""
    attached: dict[str, str] = {}
    for attachment in _of_type(resources, ATTACHMENT):
        for link in attachment.inputs.get("subnetworks") or []:
            if known(link):
                attached[str(link).rsplit("/", 1)[-1]] = display_name(attachment)
    sources = []
    for subnet in _of_type(resources, SUBNET):
        name, cidr = display_name(subnet), shown(subnet.inputs.get("ipCidrRange"))
        label = f"subnet {name} {cidr}"
        if name in attached:
            label = f"PSC attachment {attached[name]} (subnet {name} {cidr})"
        region = subnet.inputs.get("region") or subnet.outputs.get("region")
        sources.append((label, cidr, shown(region)))
    return sources


def _internet_route(resources: Sequence[ReviewResource]) -> str | None:
    """How traffic for the internet leaves the VPC, None when no route leads there."""
    for route in _of_type(resources, ROUTE):
        dest, hop = route.inputs.get("destRange"), route.inputs.get("nextHopGateway")
        if known(dest) and is_internet_wide(str(dest)) and known(hop):
            return f"route {display_name(route)} -> {str(hop).rsplit('/', 1)[-1]}"
    networks = _of_type(resources, NETWORK)
    if any(n.inputs.get("deleteDefaultRoutesOnCreate") is not True for n in networks):
        return f"default route -> {INTERNET_GATEWAY}"
    return None


def _nat_in(region: str, resources: Sequence[ReviewResource]) -> str | None:
    for nat in _of_type(resources, NAT):
        if shown(nat.inputs.get("region") or nat.outputs.get("region")) == region:
            return display_name(nat)
    return None


def egress_paths(resources: Sequence[ReviewResource]) -> list[dict[str, str]]:
    """One row per (source subnet, destination): route, firewall verdict, open or closed."""
    rules = _egress_rules(resources)
    internal = [shown(s.inputs.get("ipCidrRange")) for s in _of_type(resources, SUBNET)]
    internal += [
        f"{shown(r.inputs.get('address'))}/{shown(r.inputs.get('prefixLength'))}"
        for r in _of_type(resources, GLOBAL_ADDRESS)
        if r.inputs.get("purpose") == "VPC_PEERING"
    ]
    custom = [
        (shown(r.inputs.get("destRange")), display_name(r), r.inputs.get("nextHopGateway"))
        for r in _of_type(resources, ROUTE)
        if not is_internet_wide(shown(r.inputs.get("destRange")))
    ]
    internet_route = _internet_route(resources)
    rows = []
    for source, cidr, region in _sources(resources):
        allowed, why = _firewall_verdict(cidr, rules)
        rows.append(_row(source, f"the VPC ({', '.join(internal)})", "subnet routes", why, allowed))
        for dest, name, hop in custom:
            allowed, why = _firewall_verdict(dest, rules)
            route = f"route {name} -> {shown(hop).rsplit('/', 1)[-1]}"
            rows.append(_row(source, dest, route, why, allowed))
        allowed, why = _firewall_verdict(INTERNET, rules)
        nat = _nat_in(region, resources)
        route = internet_route or "none: the VPC has no route to the internet"
        if internet_route is not None:
            route += f", Cloud NAT {nat}" if nat else ", no NAT (no external IP translates it)"
        reachable = allowed and internet_route is not None and nat is not None
        rows.append(_row(source, f"the internet ({INTERNET})", route, why, reachable))
    vertex = vertex_path(resources)
    return rows + ([vertex] if vertex else [])


VERTEX_SOURCE = "the job's own network (Vertex's)"
PEERING_CONTROLS = "gcp:servicenetworking/vpcServiceControls:VpcServiceControls"
PERIMETER = "gcp:accesscontextmanager/servicePerimeter:ServicePerimeter"
AIPLATFORM = "aiplatform.googleapis.com"


def vertex_path(resources: Sequence[ReviewResource]) -> dict[str, str] | None:
    """The way out this VPC does not govern: the network Vertex runs the job's VMs in. Peering:
    Google's servicenetworking VPC, whose default route "VPC Service Controls for peerings"
    removes. PSC interface: the producer network, where Google API traffic resolves (Google's
    PSC interface page) and which only a VPC Service Controls perimeter closes."""
    if _of_type(resources, "gcp:servicenetworking/connection:Connection"):
        closed = any(r.inputs.get("enabled") is True for r in _of_type(resources, PEERING_CONTROLS))
        route = (
            "none: VPC Service Controls for the peering removed its default route"
            if closed
            else "its own default route (VPC Service Controls for the peering are off)"
        )
        return _row(VERTEX_SOURCE, f"the internet ({INTERNET})", route, "-", not closed)
    if _of_type(resources, ATTACHMENT):
        row = _row(
            VERTEX_SOURCE,
            f"the internet ({INTERNET})",
            "Vertex's producer network (Google APIs resolve there, not through this VPC)",
            _perimeter_state(resources),
            False,
        )
        if row["firewall"].startswith("enforced"):
            return row
        return row | {"result": "outside the stack: a VPC Service Controls perimeter closes it"}
    return None


def _perimeter_state(resources: Sequence[ReviewResource]) -> str:
    """How a perimeter around Vertex AI stands: enforced (its status), dry run, or none.
    Google's PSC interface page: with VPC Service Controls a job's internet egress goes through
    the customer's Cloud NAT, which a closed stack does not have."""
    for perimeter in _of_type(resources, PERIMETER):
        for key, state in (("status", "enforced"), ("spec", "dry run")):
            rules = perimeter.inputs.get(key)
            if isinstance(rules, Mapping) and AIPLATFORM in (rules.get("restrictedServices") or []):
                return f"{state} perimeter {display_name(perimeter).rsplit('/', 1)[-1]}"
    return "no VPC Service Controls perimeter"


def _row(source: str, destination: str, route: str, firewall: str, open_: bool) -> dict[str, str]:
    return {
        "from": source,
        "to": destination,
        "route": route,
        "firewall": firewall,
        "result": "open" if open_ else "closed",
    }


def dns_answers(resources: Sequence[ReviewResource]) -> list[dict[str, str]]:
    """What the VPC's private zones answer; [] when every name resolves publicly."""
    zones = {shown(z.inputs.get("name")): z for z in _of_type(resources, ZONE)}
    rows = []
    for record in _of_type(resources, RECORD):
        zone = zones.get(shown(record.inputs.get("managedZone")))
        visibility = shown(zone.inputs.get("visibility")) if zone else "-"
        rows.append(
            {
                "name": shown(record.inputs.get("name")),
                "type": shown(record.inputs.get("type")),
                "answer": ", ".join(shown(d) for d in record.inputs.get("rrdatas") or []),
                "zone": f"{shown(record.inputs.get('managedZone'))} ({visibility})",
            }
        )
    return sorted(rows, key=lambda row: (row["zone"], row["name"]))


def package_sources(platform: Mapping[str, Any], egress: str | None) -> list[dict[str, str]]:
    """Where a job gets images, Python packages and model weights, as the stack output says."""
    closed = egress == "none"
    models = (platform.get("buckets") or {}).get("models")
    bucket = f"gs://{models}" if models else "the models bucket"
    index, mirror = platform.get("python_index"), platform.get("docker_mirror")
    images = shown(platform.get("artifact_registry"))
    if mirror:
        images += f"; Docker Hub's through {shown(mirror)} (virtual: the stack's first)"
    if index:
        packages = f"{shown(index)} (PyPI remote repository; pip --index-url)"
    elif closed:
        packages = "no index reachable: pypi.org has no route"
    else:
        packages = "pypi.org, through Cloud NAT"
    return [
        {"what": "container images", "from": images},
        {"what": "Python packages", "from": packages},
        {
            "what": "model weights",
            "from": f"{bucket} (copied there with `vtx model mirror`)"
            if closed
            else f"{bucket}, or the Hugging Face Hub through Cloud NAT",
        },
    ]
