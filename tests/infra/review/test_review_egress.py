"""`vtx review` of a closed stack (prod, ``network.egress: none``): every way out of the subnets
jobs use, where Google's names resolve, where code and weights come from, in every format; and
the same derivation showing a way out as soon as a stack adds one."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import yaml

from infra.review.builder import Report, build_report
from infra.review.render_html import to_html
from infra.review.render_json import to_json
from infra.review.render_markdown import to_markdown
from infra.review.sources import ReviewResource, ReviewSource, from_offline

STACKS = Path(__file__).resolve().parents[1] / "stacks"

VIP = "199.36.153.8/30"
INTERNET = "the internet (0.0.0.0/0)"
VERTEX = "the job's own network (Vertex's)"


def paths(report: Report) -> dict[tuple[str, str], dict[str, str]]:
    return {(p["from"], p["to"]): p for p in report.network["egress_paths"]}


def test_closed_stack_has_no_open_path_to_the_internet(offline) -> None:
    report = offline["prod"][1]
    assert report.network["egress"] == "none"
    found = paths(report)
    vertex = found.pop((VERTEX, INTERNET))
    # What this VPC does not govern is said, not counted as closed.
    assert vertex["result"].startswith("outside the stack: a VPC Service Controls perimeter")
    sources = {source for source, _ in found}
    # The training subnet and the PSC attachment, each with its three destinations.
    assert sources == {
        "subnet acme-vtx-prod-training 10.30.0.0/20",
        "PSC attachment acme-vtx-prod-vertex (subnet acme-vtx-prod-psc 10.31.0.0/28)",
    }
    for source in sources:
        internet = found[source, INTERNET]
        assert internet["result"] == "closed"
        assert internet["route"] == "none: the VPC has no route to the internet"
        assert internet["firewall"] == "deny (acme-vtx-prod-deny-egress, 65534)"
        google = found[source, VIP]
        assert google["result"] == "open"
        assert google["route"] == "route acme-vtx-prod-google-apis -> default-internet-gateway"
        assert google["firewall"].startswith(
            "allow tcp:443 (acme-vtx-prod-allow-egress-google-apis"
        )
    assert [p for p in found.values() if p["to"] == INTERNET and p["result"] == "open"] == []


def test_closed_stack_resolves_google_and_the_registries_to_the_vip(offline) -> None:
    dns = {(d["name"], d["type"]): d for d in offline["prod"][1].network["dns"]}
    assert dns["*.googleapis.com.", "CNAME"]["answer"] == "private.googleapis.com."
    assert dns["private.googleapis.com.", "A"]["answer"].startswith("199.36.153.8, ")
    assert dns["*.pkg.dev.", "CNAME"]["zone"] == "acme-vtx-prod-pkg-dev (private)"
    assert ("gcr.io.", "A") in dns
    assert offline["dev"][1].network["dns"] == []


def test_package_sources_follow_the_egress_mode(offline) -> None:
    closed = {s["what"]: s["from"] for s in offline["prod"][1].network["package_sources"]}
    opened = {s["what"]: s["from"] for s in offline["dev"][1].network["package_sources"]}
    assert closed["container images"].startswith(
        "europe-west4-docker.pkg.dev/acme-vtx-prod/acme-vtx-prod-trainer; Docker Hub's through "
        "europe-west4-docker.pkg.dev/acme-vtx-prod/acme-vtx-prod-trainer-all"
    )
    assert closed["Python packages"].startswith(
        "https://europe-west4-python.pkg.dev/acme-vtx-prod/acme-vtx-prod-trainer-pypi/simple/"
    )
    assert "vtx model mirror" in closed["model weights"]
    assert "Cloud NAT" in opened["Python packages"] and "Hugging Face" in opened["model weights"]


def test_open_stack_shows_its_way_out_through_nat(offline) -> None:
    paths = offline["dev"][1].network["egress_paths"]
    (internet,) = [p for p in paths if p["to"] == INTERNET and p["from"] != VERTEX]
    assert internet["result"] == "open"
    assert (
        internet["route"] == "default route -> default-internet-gateway, Cloud NAT acme-vtx-dev-nat"
    )
    assert internet["firewall"] == "allow (implied allow-egress rule, 65535)"


def test_a_way_out_added_to_a_closed_stack_shows_as_open(offline) -> None:
    source, _ = offline["prod"]
    vpc = "projects/acme-net-host-prod/global/networks/acme-vtx-prod-vpc"
    added = (
        ReviewResource(
            "urn:route", "gcp:compute/route:Route", "out", {
                "name": "out", "network": vpc, "destRange": "0.0.0.0/0",
                "nextHopGateway": "default-internet-gateway",
            }, {}, "network",
        ),
        ReviewResource(
            "urn:fw", "gcp:compute/firewall:Firewall", "allow-out", {
                "name": "allow-out", "network": vpc, "direction": "EGRESS", "priority": 900,
                "destinationRanges": ["0.0.0.0/0"], "allows": [{"protocol": "all"}],
            }, {}, "network",
        ),
        ReviewResource(
            "urn:nat", "gcp:compute/routerNat:RouterNat", "nat",
            {"name": "nat", "region": "europe-west4"}, {}, "network",
        ),
    )  # fmt: skip
    report = build_report(dataclasses.replace(source, resources=source.resources + added))
    (training,) = [
        p for p in report.network["egress_paths"]
        if p["to"] == INTERNET and p["from"].startswith("subnet acme-vtx-prod-training")
    ]  # fmt: skip
    assert training["result"] == "open"
    assert training["route"] == "route out -> default-internet-gateway, Cloud NAT nat"
    assert training["firewall"] == "allow all (allow-out, 900)"
    # The pack fails the stack for each of the three.
    failing = {p.policy for p in report.policy if p.status == "fail"}
    assert {
        "egress-none-no-nat",
        "egress-none-no-internet-egress-allow",
        "egress-none-default-route-denied",
    } <= failing


def test_every_format_carries_the_egress_paths(offline) -> None:
    report = offline["prod"][1]
    markdown = to_markdown(report)
    assert "egress: **none**" in markdown
    assert "| egress from | to | route | firewall | result |" in markdown
    assert "| private DNS name | type | answer | zone |" in markdown
    assert "| package source | from |" in markdown
    data = json.loads(to_json(report))
    assert data["network"]["egress_paths"] == report.network["egress_paths"]
    page = to_html(report)
    assert "<th>egress from</th>" in page and "internet: no path" in page


def test_review_without_a_platform_output_does_not_guess_the_mode(offline) -> None:
    source: ReviewSource = offline["prod"][0]
    report = build_report(dataclasses.replace(source, platform={}))
    assert report.network["egress"] == "-"
    skipped = {p.policy: p.note for p in report.policy if p.status == "skipped"}
    assert skipped["egress-none-no-nat"] == "network.egress none only; this stack's is unknown"


def test_a_closed_peering_stack_closes_vertexs_network_too(offline, tmp_path: Path) -> None:
    document = yaml.safe_load((STACKS / "Pulumi.ladder-peering.yaml").read_text())
    document["config"]["vtx:platform"]["network"]["egress"] = "none"
    path = tmp_path / "Pulumi.peering-closed.yaml"
    path.write_text(yaml.safe_dump(document))
    closed = build_report(from_offline("peering-closed", path))
    vertex = paths(closed)[VERTEX, INTERNET]
    assert vertex["result"] == "closed"
    assert vertex["route"].startswith("none: VPC Service Controls for the peering")
    assert all(p["result"] != "open" for p in closed.network["egress_paths"] if p["to"] == INTERNET)
    # The open dev stack's peering keeps Vertex's default route: said as an open path.
    assert paths(offline["dev"][1])[VERTEX, INTERNET]["result"] == "open"
