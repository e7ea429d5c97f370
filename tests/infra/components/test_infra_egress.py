"""Closed egress (``vtx:platform.network.egress: none``), run under mocks: prod (psc-interface on a
Shared VPC host) and the test stacks switched to it have no NAT and no default route, reach
Google only through the Private Google Access VIP (route, private zones, egress firewall), and
the policy pack fails the stack as soon as a way out to the internet is added."""

from __future__ import annotations

import ipaddress
from pathlib import Path

import pytest
import yaml

from infra.offline.program import OfflineRun, RecordedResource, run_offline
from infra.policy.evaluate import PolicySubject, evaluate, mandatory_violations
from infra.policy.rule_types import RuleContext
from jobs.core.stack import StackOutputs

STACKS = Path(__file__).resolve().parents[1] / "stacks"
HOST = "acme-net-host-prod"
PRIVATE_VIP = "199.36.153.8/30"
ROUTER_TYPES = {"gcp:compute/router:Router", "gcp:compute/routerNat:RouterNat"}
FIREWALL = "gcp:compute/firewall:Firewall"
ZONE = "gcp:dns/managedZone:ManagedZone"
RECORD = "gcp:dns/recordSet:RecordSet"


def closed(base: str, tmp_path: Path) -> OfflineRun:
    """A test stack of tests/infra/stacks with ``network.egress: none``."""
    document = yaml.safe_load((STACKS / f"Pulumi.{base}.yaml").read_text())
    document["config"]["vtx:platform"]["network"]["egress"] = "none"
    path = tmp_path / f"Pulumi.{base}-closed.yaml"
    path.write_text(yaml.safe_dump(document))
    return run_offline(f"{base}-closed", path)


@pytest.fixture(scope="module")
def closed_peering(tmp_path_factory: pytest.TempPathFactory) -> OfflineRun:
    return closed("ladder-peering", tmp_path_factory.mktemp("peering"))


@pytest.fixture(scope="module")
def closed_psc(tmp_path_factory: pytest.TempPathFactory) -> OfflineRun:
    return closed("ladder-psc", tmp_path_factory.mktemp("psc"))


@pytest.fixture(params=["prod", "closed_peering", "closed_psc"])
def closed_run(request: pytest.FixtureRequest) -> OfflineRun:
    return request.getfixturevalue("prod_run" if request.param == "prod" else request.param)


def firewalls(run: OfflineRun, direction: str) -> dict[str, RecordedResource]:
    return {
        r.name.removeprefix("network-"): r
        for r in run.of_type(FIREWALL)
        if r.inputs["direction"] == direction
    }


def subjects(run: OfflineRun) -> list[PolicySubject]:
    return [PolicySubject(r.type, r.name, r.urn, r.inputs, r.outputs) for r in run.resources]


def closed_findings(extra: list[PolicySubject], run: OfflineRun) -> dict[str, list[str]]:
    ctx = RuleContext(environment=run.outputs["platform"]["environment"], egress="none")
    verdicts = evaluate([*subjects(run), *extra], ctx)
    found: dict[str, list[str]] = {}
    for violation in mandatory_violations(verdicts):
        found.setdefault(violation.policy, []).append(violation.message)
    return found


# --- what the program declares ------------------------------------------------------------


def test_no_nat_and_no_default_route(closed_run: OfflineRun) -> None:
    assert not [r.name for r in closed_run.resources if r.type in ROUTER_TYPES]
    (vpc,) = closed_run.of_type("gcp:compute/network:Network")
    assert vpc.inputs["deleteDefaultRoutesOnCreate"] is True
    (route,) = closed_run.of_type("gcp:compute/route:Route")
    assert route.inputs["destRange"] == PRIVATE_VIP
    assert route.inputs["nextHopGateway"] == "default-internet-gateway"
    assert route.inputs["network"].endswith(f"/global/networks/{vpc.inputs['name']}")
    assert all(
        s.inputs["privateIpGoogleAccess"] is True
        for s in closed_run.of_type("gcp:compute/subnetwork:Subnetwork")
    )
    assert StackOutputs.model_validate(closed_run.outputs["platform"]).egress == "none"


def test_egress_firewall_allows_the_vip_and_the_vpc_beneath_a_deny_all(
    closed_run: OfflineRun,
) -> None:
    egress = firewalls(closed_run, "EGRESS")
    assert set(egress) == {"allow-egress-google-apis", "allow-egress-internal", "deny-egress"}
    deny, apis = egress["deny-egress"], egress["allow-egress-google-apis"]
    assert deny.inputs["destinationRanges"] == ["0.0.0.0/0"]
    assert deny.inputs["denies"] == [{"protocol": "all"}]
    assert apis.inputs["destinationRanges"] == [PRIVATE_VIP]
    assert apis.inputs["allows"] == [{"protocol": "tcp", "ports": ["443"]}]
    # Allows win (lower number), the deny beats the implied allow-egress rule (65535).
    assert egress["allow-egress-internal"].inputs["priority"] < deny.inputs["priority"] < 65535
    assert apis.inputs["priority"] < deny.inputs["priority"]
    # Every range of the VPC stays reachable: subnets, attachment subnets, the peering range.
    internal = egress["allow-egress-internal"].inputs["destinationRanges"]
    declared = [
        s.inputs["ipCidrRange"] for s in closed_run.of_type("gcp:compute/subnetwork:Subnetwork")
    ]
    assert set(declared) <= set(internal)


def test_private_zones_send_google_and_the_registries_to_the_vip(closed_run: OfflineRun) -> None:
    zones = {z.inputs["dnsName"]: z for z in closed_run.of_type(ZONE)}
    assert set(zones) == {"googleapis.com.", "gcr.io.", "pkg.dev."}
    (vpc,) = closed_run.of_type("gcp:compute/network:Network")
    for zone in zones.values():
        assert zone.inputs["visibility"] == "private"
        (bound,) = zone.inputs["privateVisibilityConfig"]["networks"]
        assert bound["networkUrl"].endswith(f"/global/networks/{vpc.inputs['name']}")
    records = {(r.inputs["name"], r.inputs["type"]): r.inputs for r in closed_run.of_type(RECORD)}
    vip_addresses = [str(ip) for ip in ipaddress.ip_network(PRIVATE_VIP)]
    assert records["private.googleapis.com.", "A"]["rrdatas"] == vip_addresses
    assert records["*.googleapis.com.", "CNAME"]["rrdatas"] == ["private.googleapis.com."]
    for domain in ("gcr.io.", "pkg.dev."):
        assert records[domain, "A"]["rrdatas"] == vip_addresses
        assert records[f"*.{domain}", "CNAME"]["rrdatas"] == [domain]


def test_shared_vpc_routes_and_zones_live_in_the_host_project(prod_run: OfflineRun) -> None:
    declared = [
        *prod_run.of_type("gcp:compute/route:Route"),
        *prod_run.of_type(ZONE),
        *prod_run.of_type(RECORD),
        *prod_run.of_type(FIREWALL),
    ]
    assert {r.inputs["project"] for r in declared} == {HOST}


def test_open_stack_keeps_nat_and_exports_no_egress(dev_run: OfflineRun) -> None:
    assert {r.type for r in dev_run.resources} >= ROUTER_TYPES
    assert not dev_run.of_type("gcp:compute/route:Route") and not dev_run.of_type(ZONE)
    assert set(firewalls(dev_run, "EGRESS")) == set()
    (vpc,) = dev_run.of_type("gcp:compute/network:Network")
    assert vpc.inputs.get("deleteDefaultRoutesOnCreate") is not True
    assert "egress" not in dev_run.outputs["platform"]


def test_closed_psc_stack_has_no_nat_in_further_regions_either(closed_psc: OfflineRun) -> None:
    attachments = closed_psc.of_type("gcp:compute/networkAttachment:NetworkAttachment")
    assert len(attachments) == 3
    assert not [r for r in closed_psc.resources if r.type in ROUTER_TYPES]


# --- the policy pack ------------------------------------------------------------------------


def test_closed_stack_passes_every_egress_rule(closed_run: OfflineRun) -> None:
    assert closed_findings([], closed_run) == {}


def test_pack_fails_a_closed_stack_given_a_nat(prod_run: OfflineRun) -> None:
    nat = PolicySubject(
        "gcp:compute/routerNat:RouterNat",
        "network-nat",
        "urn:nat",
        {"name": "acme-vtx-prod-nat", "router": "r", "natIpAllocateOption": "AUTO_ONLY"},
    )
    assert list(closed_findings([nat], prod_run)) == ["egress-none-no-nat"]


def test_pack_fails_a_closed_stack_given_an_internet_egress_allow(prod_run: OfflineRun) -> None:
    (vpc,) = prod_run.of_type("gcp:compute/network:Network")
    allow_all = {
        "project": HOST,
        "name": "acme-vtx-prod-allow-egress-all",
        "network": vpc.outputs["selfLink"],
        "direction": "EGRESS",
        "priority": 900,
        "destinationRanges": ["0.0.0.0/0"],
        "allows": [{"protocol": "all"}],
    }
    rule = PolicySubject(FIREWALL, "allow-all", "urn:fw", allow_all, allow_all)
    route = {
        "project": HOST,
        "network": vpc.outputs["selfLink"],
        "destRange": "0.0.0.0/0",
        "nextHopGateway": "default-internet-gateway",
    }
    to_internet = PolicySubject("gcp:compute/route:Route", "internet", "urn:rt", route, route)
    found = closed_findings([rule, to_internet], prod_run)
    assert set(found) == {
        "egress-none-no-internet-egress-allow",
        "egress-none-default-route-denied",
    }
    assert "route internet sends 0.0.0.0/0" in found["egress-none-default-route-denied"][0]
    # The route alone is shadowed by the stack's own deny-all: the pack lets it be.
    assert closed_findings([to_internet], prod_run) == {}


def test_pack_fails_a_closed_stack_given_an_external_address(prod_run: OfflineRun) -> None:
    address = PolicySubject("gcp:compute/address:Address", "ip", "urn:ip", {"name": "ip"})
    assert list(closed_findings([address], prod_run)) == ["egress-none-no-external-address"]


# --- the mirrors ----------------------------------------------------------------------------


def test_closed_stack_mirrors_pypi_and_docker_hub_and_exports_them(closed_run: OfflineRun) -> None:
    repos = {
        r.inputs["repositoryId"].rsplit("-", 1)[-1]: r
        for r in closed_run.of_type("gcp:artifactregistry/repository:Repository")
    }
    pypi, dockerhub, virtual = repos["pypi"], repos["dockerhub"], repos["all"]
    assert (pypi.inputs["format"], pypi.inputs["mode"]) == ("PYTHON", "REMOTE_REPOSITORY")
    assert pypi.inputs["remoteRepositoryConfig"]["pythonRepository"] == {"publicRepository": "PYPI"}
    assert dockerhub.inputs["remoteRepositoryConfig"]["dockerRepository"] == {
        "publicRepository": "DOCKER_HUB"
    }
    policies = virtual.inputs["virtualRepositoryConfig"]["upstreamPolicies"]
    # The stack's own repository first (greater priority), Docker Hub behind it.
    assert [(p["id"], p["priority"]) for p in policies] == [("trainer", 100), ("dockerhub", 10)]
    assert policies[1]["repository"].endswith(f"/repositories/{dockerhub.inputs['repositoryId']}")
    outputs = StackOutputs.model_validate(closed_run.outputs["platform"])
    project, region = outputs.project, outputs.region
    assert outputs.python_index == (
        f"https://{region}-python.pkg.dev/{project}/{pypi.inputs['repositoryId']}/simple/"
    )
    assert (
        outputs.docker_mirror
        == f"{region}-docker.pkg.dev/{project}/{virtual.inputs['repositoryId']}"
    )


def test_open_stack_has_no_mirror(dev_run: OfflineRun) -> None:
    assert len(dev_run.of_type("gcp:artifactregistry/repository:Repository")) == 1
    outputs = StackOutputs.model_validate(dev_run.outputs["platform"])
    assert outputs.python_index is None and outputs.docker_mirror is None


def test_closed_peering_stack_removes_the_default_route_of_vertexs_network(
    closed_peering: OfflineRun, closed_psc: OfflineRun
) -> None:
    (controls,) = closed_peering.of_type(
        "gcp:servicenetworking/vpcServiceControls:VpcServiceControls"
    )
    (vpc,) = closed_peering.of_type("gcp:compute/network:Network")
    assert controls.inputs == {
        "enabled": True,
        "network": vpc.inputs["name"],
        "project": vpc.inputs["project"],
        "service": "servicenetworking.googleapis.com",
    }
    # Nothing of the kind for a PSC interface (no servicenetworking peering), nor an open stack.
    assert not closed_psc.of_type("gcp:servicenetworking/vpcServiceControls:VpcServiceControls")
