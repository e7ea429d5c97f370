"""The HTML review's pictures (inline SVG): what they draw, that they connect what the report
says, that boxes hold their text, and that names from the stack config cannot break out."""

from __future__ import annotations

import dataclasses
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from itertools import combinations

import pytest

from infra.review.builder import Report
from infra.review.layered_svg import PALETTE, text_width
from infra.review.pictures import access_svg, network_svg
from infra.review.render_html import to_html
from infra.review.rows import IamRow

SVG = "{http://www.w3.org/2000/svg}"
_TOLERANCE = 3.0  # px: arrows stop 2 px short of the box they point at


@dataclass(frozen=True)
class Node:
    kind: str
    x: float
    y: float
    width: float
    height: float
    texts: tuple[str, ...]

    def holds(self, x: float, y: float) -> bool:
        return (
            self.x - _TOLERANCE <= x <= self.x + self.width + _TOLERANCE
            and self.y - _TOLERANCE <= y <= self.y + self.height + _TOLERANCE
        )


@dataclass(frozen=True)
class Picture:
    width: float
    height: float
    nodes: tuple[Node, ...]
    edges: tuple[tuple[Node, Node], ...]

    def titled(self, text: str) -> list[Node]:
        return [n for n in self.nodes if text in n.texts]


def _only(nodes: list[Node], point: tuple[float, float]) -> Node:
    assert len(nodes) == 1, f"{len(nodes)} boxes at {point}"
    return nodes[0]


def parse(svg: str) -> Picture:
    """Boxes and arrows of a picture; each arrow resolved to the boxes its ends touch."""
    root = ET.fromstring(svg)
    _, _, width, height = (float(v) for v in root.attrib["viewBox"].split())
    nodes = []
    for group in root.iter(f"{SVG}g"):
        rect = group.find(f"{SVG}rect")
        assert rect is not None
        nodes.append(
            Node(
                group.attrib["data-kind"],
                *(float(rect.attrib[k]) for k in ("x", "y", "width", "height")),
                tuple(t.text or "" for t in group.iter(f"{SVG}text")),
            )
        )
    edges = []
    for path in root.iter(f"{SVG}path"):
        if path.attrib.get("class") != "edge":
            continue
        numbers = [float(n) for n in re.findall(r"-?\d+(?:\.\d+)?", path.attrib["d"])]
        start, end = (numbers[0], numbers[1]), (numbers[-2], numbers[-1])
        edges.append(
            (
                _only([n for n in nodes if n.holds(*start)], start),
                _only([n for n in nodes if n.holds(*end)], end),
            )
        )
    return Picture(width, height, tuple(nodes), tuple(edges))


# --- the network path -------------------------------------------------------------------------


def _chain(picture: Picture) -> list[str]:
    """Box titles from the one with no arrow in, following the arrows."""
    targets = {id(b) for _, b in picture.edges}
    node = next(n for n in picture.nodes if id(n) not in targets)
    titles = [node.texts[0]]
    following = {id(a): b for a, b in picture.edges}
    while id(node) in following:
        node = following[id(node)]
        titles.append(node.texts[0])
    assert len(titles) == len(picture.nodes), "a box off the chain"
    return titles


def _linked(picture: Picture) -> Picture:
    """The picture without its unconnected boxes (a closed stack's unreached internet)."""
    ends = {id(node) for edge in picture.edges for node in edge}
    return dataclasses.replace(picture, nodes=tuple(n for n in picture.nodes if id(n) in ends))


def test_dev_network_path_goes_through_the_peering(offline) -> None:
    picture = parse(network_svg(offline["dev"][1]))
    assert _chain(picture) == [
        "Vertex AI custom job",
        "VPC peering (Service Networking)",
        "VPC acme-vtx-dev-vpc",
        "Cloud NAT",
        "internet",
    ]
    assert picture.titled("reserved range acme-vtx-dev-vertex-range 10.20.0.0/16")
    assert picture.titled("runs as acme-vtx-dev-trainer@acme-vtx-dev.iam.gserviceaccount.com")


def test_prod_network_path_goes_through_the_psc_interface_on_the_shared_vpc(offline) -> None:
    picture = parse(network_svg(offline["prod"][1]))
    assert _chain(_linked(picture))[1:3] == ["PSC interface", "VPC acme-vtx-prod-vpc"]
    [vpc] = picture.titled("VPC acme-vtx-prod-vpc")
    assert "in Shared VPC host acme-net-host-prod" in vpc.texts
    assert any(t.startswith("subnet acme-vtx-prod-psc 10.31.0.0/28") for t in vpc.texts)
    assert "ingress deny from 0.0.0.0/0" in vpc.texts


def test_closed_network_path_ends_in_google_and_leaves_the_internet_unreached(offline) -> None:
    picture = parse(network_svg(offline["prod"][1]))
    [internet] = picture.titled("internet: no path")
    assert internet.kind == "closed"
    assert "firewall: deny (acme-vtx-prod-deny-egress, 65534)" in internet.texts
    assert "route: none: the VPC has no route to the internet" in internet.texts
    linked = _linked(picture)
    assert internet not in linked.nodes  # no arrow in or out
    assert _chain(linked) == [
        "Vertex AI custom job",
        "PSC interface",
        "VPC acme-vtx-prod-vpc",
        "Private Google Access",
        "Google APIs and registries",
    ]
    [access] = picture.titled("Private Google Access")
    assert "*.googleapis.com. -> private.googleapis.com." in access.texts
    [vpc] = picture.titled("VPC acme-vtx-prod-vpc")
    assert "egress deny to 0.0.0.0/0 (65534)" in vpc.texts


def test_network_path_without_a_network_is_the_job_alone(offline) -> None:
    network = {**offline["dev"][1].network, "mode": "none", "networks": [], "nat": []}
    report = dataclasses.replace(offline["dev"][1], network=network)
    picture = parse(network_svg(report))
    assert _chain(picture) == ["Vertex AI custom job"]


# --- who may do what --------------------------------------------------------------------------


def _shown_role(role: str) -> str:
    """Predefined roles without ``roles/``; custom roles by their id, marked."""
    return (
        role[len("roles/") :]
        if role.startswith("roles/")
        else f"{role.rsplit('/', 1)[-1]} (custom)"
    )


def _drawn(picture: Picture, row: IamRow) -> bool:
    """Whether arrows go from the principal's box to a box listing the role, and from that box
    to the resource's box (boxes name them below a bold title, e-mails split at the @)."""
    principal = row.principal.split(":", 1)[-1]
    resource = row.resource if row.project_wide else row.resource.rsplit("/", 1)[-1]
    for who, grant in picture.edges:
        if who.kind != "principal" or _shown_role(row.role) not in grant.texts:
            continue
        if principal.endswith("".join(who.texts[1:])) and any(
            a is grant and "".join(b.texts[1:]) == resource for a, b in picture.edges
        ):
            return True
    return False


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_every_grant_is_drawn_from_principal_through_role_to_resource(offline, stack) -> None:
    report = offline[stack][1]
    picture = parse(access_svg(report) or "")
    missing = [row for row in report.iam if not _drawn(picture, row)]
    assert missing == []
    # One box per principal, per resource, and per (principal, resource) pair; nothing else.
    principals = {row.principal for row in report.iam}
    assert len([n for n in picture.nodes if n.kind == "principal"]) == len(principals)
    pairs = {(row.principal, row.resource, row.project_wide) for row in report.iam}
    assert len([n for n in picture.nodes if n.kind == "roles"]) == len(pairs)


def test_a_grant_to_someone_else_is_not_drawn_as_the_trainers(offline) -> None:
    """The check above can fail: a role the trainer does not hold is not found on its arrows."""
    report = offline["dev"][1]
    picture = parse(access_svg(report) or "")
    trainer = next(r for r in report.iam if "trainer@" in r.principal)
    assert not _drawn(picture, dataclasses.replace(trainer, role="roles/iam.serviceAccountUser"))


def test_project_wide_grants_stand_out(offline) -> None:
    picture = parse(access_svg(offline["prod"][1]) or "")
    projects = [n for n in picture.nodes if n.kind == "project"]
    assert {n.texts[1] for n in projects} == {"acme-vtx-prod", "acme-net-host-prod"}
    assert PALETTE["project"] != PALETTE["resource"]


def test_no_grants_no_picture(offline) -> None:
    report = dataclasses.replace(offline["dev"][1], iam=[])
    assert access_svg(report) is None
    assert "no IAM grants declared" in to_html(report)


# --- geometry and escaping --------------------------------------------------------------------


def _pictures(report: Report) -> list[Picture]:
    return [parse(network_svg(report)), parse(access_svg(report) or "")]


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_boxes_hold_their_text_lie_inside_the_picture_and_never_overlap(offline, stack) -> None:
    for picture in _pictures(offline[stack][1]):
        for node in picture.nodes:
            assert node.x >= 0 and node.x + node.width <= picture.width
            assert node.y >= 0 and node.y + node.height <= picture.height
            assert max(text_width(t) for t in node.texts) <= node.width - 2 * 8 + 0.01
        for a, b in combinations(picture.nodes, 2):
            apart = (
                a.x + a.width <= b.x
                or b.x + b.width <= a.x
                or a.y + a.height <= b.y
                or b.y + b.height <= a.y
            )
            assert apart, (a.texts, b.texts)


EVIL = "<img src=x onerror=alert(1)>&amp;\"'"


def _evil_report(report: Report) -> Report:
    network = dict(report.network)
    network["networks"] = [f"vpc{EVIL}"]
    network["subnets"] = [{**network["subnets"][0], "name": f"subnet{EVIL}"}]
    iam = [
        IamRow(
            f"user:{EVIL}@example.com",
            "roles/storage.objectViewer",
            "bucket",
            f"b{EVIL}",
            False,
            "x",
        )
    ]
    return dataclasses.replace(report, network=network, iam=iam, stack=f"s{EVIL}")


def test_names_from_the_config_are_escaped_in_the_pictures(offline) -> None:
    report = _evil_report(offline["dev"][1])
    for svg in (network_svg(report), access_svg(report) or ""):
        assert "<img" not in svg
        picture = parse(svg)  # still well-formed XML
        texts = " ".join(t for n in picture.nodes for t in n.texts)
        assert EVIL in texts  # shown as written, not interpreted
    page = to_html(report)
    assert "<img" not in page and "&lt;img src=x onerror=alert(1)&gt;" in page


def test_html_diagram_shows_both_pictures_and_keeps_the_mermaid_source(offline) -> None:
    page = to_html(offline["prod"][1])
    diagram = page[page.index("<h2>Diagram</h2>") :]
    assert diagram.count('<svg xmlns="http://www.w3.org/2000/svg" class="diagram"') == 2
    assert 'aria-label="network path of a prod job"' in diagram
    assert 'aria-label="who may do what in the prod stack"' in diagram
    assert re.search(r"<details><summary>Mermaid source.*?<pre>flowchart LR", diagram, re.S)
    # Arrowhead ids are page-wide: each picture has its own.
    ids = re.findall(r'<marker id="([^"]+)"', page)
    assert len(ids) == len(set(ids)) == 2
