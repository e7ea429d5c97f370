"""The HTML review's two pictures, as inline SVG: the job's network path, and who may do what.

The network path is a chain, top down: the Vertex AI job, how it joins the VPC (a PSC
interface's network attachment or the peering's reserved range), the VPC with its subnets and
firewall rules, Cloud NAT, the internet (egress only); with ``egress: none``, Private Google
Access and Google's services instead, the internet beside them with no arrow in. Who may do
what has three columns: each principal, one box per (principal, resource) pair listing the roles
granted, and each resource; grants on the whole project are drawn in orange, as they reach
every resource of the project. Both read the report's sections, so a review built offline and
one built from a real preview draw the same.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from itertools import pairwise

from infra.review.builder import Report
from infra.review.diagram import external_label
from infra.review.egress_paths import VERTEX_SOURCE
from infra.review.layered_svg import Box, draw
from infra.review.rows import IamRow

# IamRow.resource_kind -> what a reviewer calls that resource
_RESOURCE_KINDS = {
    "project": "project (every resource in it)",
    "bucket": "bucket",
    "secretId": "secret",
    "serviceAccountId": "service account",
    "cryptoKeyId": "KMS key",
    "repository": "image registry",
    "subnetwork": "subnet",
}


_PRINCIPAL_KINDS = {"serviceAccount": "service account", "user": "user", "group": "group"}


# --- the network path -------------------------------------------------------------------------


def _vertex(report: Report) -> Box:
    trainer = report.platform.get("trainer_service_account")
    return Box(
        "vertex", "Vertex AI custom job", (f"runs as {trainer}",) if trainer else (), "vertex"
    )


def _link(network: dict) -> Box | None:
    """How the job joins the VPC: the attachment (PSC interface) or the peering's range."""
    if network["mode"] == "psc-interface":
        lines = [
            f"attachment {a['name']} ({a['connection_preference']})" for a in network["attachment"]
        ]
        return Box("link", "PSC interface", tuple(lines), "link")
    if network["mode"] == "peering":
        lines = [f"reserved range {r['name']} {r['cidr']}" for r in network["peering_ranges"]]
        return Box("link", "VPC peering (Service Networking)", tuple(lines), "link")
    return None


def _vpc(network: dict) -> Box | None:
    if not network["networks"]:
        return None
    lines = []
    if network["shared_vpc_host"] != "-":
        lines.append(f"in Shared VPC host {network['shared_vpc_host']}")
    lines += [
        f"subnet {s['name']} {s['cidr']}, private Google access {s['private_google_access']}, "
        f"flow logs {s['flow_logs']}"
        for s in network["subnets"]
    ]
    lines += [
        f"ingress {f['action']} from {f['sources']}"
        if f["direction"] == "INGRESS"
        else f"egress {f['action']} to {f['destinations']} ({f['priority']})"
        for f in network["firewall"]
    ]
    return Box("vpc", f"VPC {', '.join(network['networks'])}", tuple(lines), "network")


def _egress(network: dict) -> list[Box]:
    if not network["nat"]:
        return []
    nats = tuple(f"{n['name']} ({n['ip_allocation']})" for n in network["nat"])
    return [
        Box("nat", "Cloud NAT", nats, "nat"),
        Box("internet", "internet", ("egress only: no inbound path",), "outside"),
    ]


def _private_access(network: dict) -> list[Box]:
    """Closed egress: the VIP route and the names sent to it, then Google's services."""
    vip = sorted({p["to"] for p in network["egress_paths"] if p["route"].startswith("route ")})
    routes = sorted({p["route"] for p in network["egress_paths"] if p["to"] in vip})
    zones = sorted({d["zone"].split(" ", 1)[0] for d in network["dns"]})
    names = [d for d in network["dns"] if d["type"] == "CNAME"]
    return [
        Box(
            "pga",
            "Private Google Access",
            (
                *routes,
                *(f"{d['name']} -> {d['answer']}" for d in names),
                *(f"private zone {zone}" for zone in zones),
            ),
            "link",
        ),
        Box("google", "Google APIs and registries", tuple(f"VIP {v}" for v in vip), "vertex"),
    ]


def _closed_internet(network: dict) -> Box:
    """The internet, with no arrow to it: why each way there is shut."""
    ways = [p for p in network["egress_paths"] if p["to"].startswith("the internet")]
    ours = [p for p in ways if p["from"] != VERTEX_SOURCE]
    shut = {f"route: {p['route']}" for p in ours} | {f"firewall: {p['firewall']}" for p in ours}
    nat = "Cloud NAT: none" if not network["nat"] else f"Cloud NAT: {len(network['nat'])}"
    vertex = [f"{p['from']}: {p['result']}" for p in ways if p["from"] == VERTEX_SOURCE]
    return Box("internet", "internet: no path", (*sorted(shut), nat, *vertex), "closed")


def network_svg(report: Report) -> str:
    """The chain a job's traffic takes; links missing from the stack are left out of it. A
    closed stack (``egress: none``) ends in Google's services, the internet drawn beside them
    with no arrow in."""
    network = report.network
    chain = [_vertex(report), _link(network), _vpc(network)]
    boxes = [box for box in chain if box is not None]
    if network["egress"] == "none" and boxes[-1].key == "vpc":
        pga, google = _private_access(network)
        layers = [[box] for box in boxes] + [[pga, _closed_internet(network)], [google]]
        edges = [(a.key, b.key) for a, b in pairwise([*boxes, pga, google])]
    else:
        boxes += _egress(network)
        layers = [[box] for box in boxes]
        edges = [(a.key, b.key) for a, b in pairwise(boxes)]
    # Top down: the boxes hold whole subnet and firewall lines, too wide to sit side by side.
    return draw(
        layers, edges, f"network path of a {report.stack} job", marker="net-arrow", down=True
    )


# --- who may do what --------------------------------------------------------------------------


def _email(text: str) -> tuple[str, ...]:
    """An e-mail on two lines, the account then ``@domain``: halves a column's width."""
    local, at, domain = text.partition("@")
    return (local, at + domain) if at else (text,)


def _bare(principal: str) -> tuple[str, str]:
    """``serviceAccount:x@y`` -> (``serviceAccount``, ``x@y``); ``allUsers`` -> ("", same)."""
    kind, _, bare = principal.partition(":")
    return (kind, bare) if bare and not principal.startswith("principal") else ("", principal)


def _principal(principal: str) -> Box:
    if principal.startswith(("principalSet://", "principal://")):
        # The pool names who; what follows it says which of the pool's identities.
        tail = principal.split("/workloadIdentityPools/", 1)[-1].split("/", 1)[1:]
        return Box(f"who {principal}", external_label(principal), tuple(tail), "principal")
    kind, bare = _bare(principal)
    if bare.startswith("service-"):
        title = external_label(principal)  # a Google service agent, named by its service
    else:
        title = _PRINCIPAL_KINDS.get(kind, kind or "principal")
    return Box(f"who {principal}", title, _email(bare), "principal")


def _resource(row: IamRow) -> Box:
    kind = "project" if row.project_wide else row.resource_kind
    title = _RESOURCE_KINDS.get(kind, kind)
    # Secrets, keys and accounts are named by their path: the last part names them.
    name = row.resource.rsplit("/", 1)[-1] if kind != "project" else row.resource
    colour = "project" if row.project_wide else "resource"
    return Box(f"on {kind} {row.resource}", title, _email(name), colour)


def _role(role: str) -> str:
    if role.startswith("roles/"):
        return role.removeprefix("roles/")
    return f"{role.rsplit('/', 1)[-1]} (custom)"


def access_svg(report: Report) -> str | None:
    """Principals -> roles -> resources, ordered so that few arrows cross; None without grants."""
    if not report.iam:
        return None
    roles: dict[tuple[str, str], list[str]] = defaultdict(list)
    resources: dict[str, Box] = {}
    for row in report.iam:
        target = _resource(row)
        resources.setdefault(target.key, target)
        roles[(row.principal, target.key)].append(_role(row.role))
    principals = sorted({principal for principal, _ in roles}, key=_principal_order)
    rank = {principal: i for i, principal in enumerate(principals)}
    # A resource sits at the mean rank of those granted on it (the barycentre heuristic of
    # layered drawing): one pass suffices when every middle box has one arrow in and one out.
    order = {
        key: i
        for i, key in enumerate(
            sorted(resources, key=lambda k: (_mean(rank[p] for p, r in roles if r == k), k))
        )
    }
    pairs = sorted(roles, key=lambda pair: (rank[pair[0]], order[pair[1]]))
    grants = [
        Box(f"grant {i}", "", tuple(sorted(roles[pair])), "roles") for i, pair in enumerate(pairs)
    ]
    edges = [(f"who {p}", g.key) for (p, _), g in zip(pairs, grants, strict=True)]
    edges += [(g.key, r) for (_, r), g in zip(pairs, grants, strict=True)]
    columns = [
        [_principal(p) for p in principals],
        grants,
        sorted(resources.values(), key=lambda box: order[box.key]),
    ]
    return draw(
        columns,
        edges,
        f"who may do what in the {report.stack} stack",
        headers=("who", "may (roles)", "on what"),
        marker="iam-arrow",
        anchor=1,  # the roles: one arrow in and one out each, the others centre on them
    )


def _principal_order(principal: str) -> tuple[int, str]:
    """The stack's own accounts first, then service agents, then identities from outside."""
    kind, bare = _bare(principal)
    if bare.startswith("service-"):
        return 1, bare
    return (0 if kind == "serviceAccount" else 2), bare


def _mean(values: Iterable[int]) -> float:
    items = list(values)
    return sum(items) / len(items)
