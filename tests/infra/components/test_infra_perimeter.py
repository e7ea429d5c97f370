"""The VPC Service Controls perimeter (``vtx:platform.vpc_sc``), run under mocks from prod with a
perimeter added: what it holds and guards, who may come in, dry run against enforced, the
restricted VIP, the registry's upstreams; the review's account of Vertex's own network; and the
config's checks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from infra.config import ConfigError, load_stack_config, read_stack_file
from infra.offline.mocks import project_number
from infra.offline.program import OfflineRun, run_offline
from infra.policy.evaluate import PolicySubject, evaluate, mandatory_violations
from infra.policy.rule_types import RuleContext
from infra.review.builder import build_report
from infra.review.sources import from_offline

PROJECT_DIR = Path(__file__).resolve().parents[3]
PERIMETER = "gcp:accesscontextmanager/servicePerimeter:ServicePerimeter"
GUARDED = [
    "aiplatform.googleapis.com",
    "storage.googleapis.com",
    "artifactregistry.googleapis.com",
    "secretmanager.googleapis.com",
]
VPC_SC = {"access_policy": "123456789012", "ingress_identities": ["group:ml@acme.example"]}


def prod_with(tmp: Path, vpc_sc: dict[str, Any]) -> Path:
    document = yaml.safe_load((PROJECT_DIR / "Pulumi.prod.yaml").read_text())
    document["config"]["vtx:platform"]["vpc_sc"] = vpc_sc
    path = tmp / f"Pulumi.prod-{vpc_sc.get('mode', 'x')}.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


@pytest.fixture(scope="module", params=["dry_run", "enforced"])
def perimeter_run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    path = prod_with(tmp_path_factory.mktemp("vpc-sc"), {**VPC_SC, "mode": request.param})
    return request.param, run_offline(f"prod-{request.param}", path)


def test_the_perimeter_guards_the_project_and_the_host(perimeter_run) -> None:
    mode, run = perimeter_run
    (perimeter,) = run.of_type(PERIMETER)
    inputs = perimeter.inputs
    assert inputs["parent"] == "accessPolicies/123456789012"
    assert inputs["name"] == "accessPolicies/123456789012/servicePerimeters/acme_vtx_prod"
    assert inputs["perimeterType"] == "PERIMETER_TYPE_REGULAR"
    if mode == "dry_run":
        rules = inputs["spec"]
        assert inputs["useExplicitDryRunSpec"] is True and "status" not in inputs
    else:
        rules = inputs["status"]
        assert "spec" not in inputs and "useExplicitDryRunSpec" not in inputs
    assert rules["restrictedServices"] == GUARDED
    assert rules["resources"] == [
        f"projects/{project_number('acme-vtx-prod')}",
        f"projects/{project_number('acme-net-host-prod')}",
    ]
    (ingress,) = rules["ingressPolicies"]
    launcher = run.outputs["platform"]["launcher_service_account"]
    assert ingress["ingressFrom"]["identities"] == sorted(
        [f"serviceAccount:{launcher}", "group:ml@acme.example"]
    )
    assert ingress["ingressFrom"]["sources"] == [{"accessLevel": "*"}]
    assert [o["serviceName"] for o in ingress["ingressTo"]["operations"]] == GUARDED
    assert "egressPolicies" not in rules
    services = {r.inputs["service"] for r in run.of_type("gcp:projects/service:Service")}
    assert "accesscontextmanager.googleapis.com" in services


def test_inside_a_perimeter_google_resolves_to_the_restricted_vip(perimeter_run) -> None:
    _, run = perimeter_run
    records = {(r.inputs["name"], r.inputs["type"]): r.inputs for r in run.of_type(
        "gcp:dns/recordSet:RecordSet"
    )}  # fmt: skip
    assert records["*.googleapis.com.", "CNAME"]["rrdatas"] == ["restricted.googleapis.com."]
    assert records["restricted.googleapis.com.", "A"]["rrdatas"] == [
        "199.36.153.4", "199.36.153.5", "199.36.153.6", "199.36.153.7"
    ]  # fmt: skip
    (route,) = run.of_type("gcp:compute/route:Route")
    assert route.inputs["destRange"] == "199.36.153.4/30"
    (allow,) = [
        r for r in run.of_type("gcp:compute/firewall:Firewall")
        if r.name == "network-allow-egress-google-apis"
    ]  # fmt: skip
    assert allow.inputs["destinationRanges"] == ["199.36.153.4/30"]
    (upstreams,) = run.of_type("gcp:artifactregistry/vpcscConfig:VpcscConfig")
    assert upstreams.inputs["vpcscPolicy"] == "ALLOW"


def test_a_perimeter_stack_passes_the_pack(perimeter_run) -> None:
    _, run = perimeter_run
    subjects = [PolicySubject(r.type, r.name, r.urn, r.inputs, r.outputs) for r in run.resources]
    verdicts = evaluate(subjects, RuleContext(environment="prod", egress="none"))
    assert mandatory_violations(verdicts) == []


def test_the_review_says_whether_the_perimeter_closes_vertexs_network(tmp_path: Path) -> None:
    states = {}
    for mode in ("dry_run", "enforced"):
        path = prod_with(tmp_path, {**VPC_SC, "mode": mode})
        report = build_report(from_offline(f"prod-{mode}", path))
        (vertex,) = [p for p in report.network["egress_paths"] if p["from"].startswith("the job")]
        states[mode] = (vertex["firewall"], vertex["result"])
    assert states["enforced"] == ("enforced perimeter acme_vtx_prod", "closed")
    assert states["dry_run"][0] == "dry run perimeter acme_vtx_prod"
    assert states["dry_run"][1].startswith("outside the stack")


def test_shipped_stacks_have_no_perimeter(dev_run: OfflineRun, prod_run: OfflineRun) -> None:
    assert not dev_run.of_type(PERIMETER) and not prod_run.of_type(PERIMETER)


@pytest.mark.parametrize(
    ("vpc_sc", "path", "message"),
    [
        ({"mode": "strict", "access_policy": "1"}, "vtx:platform.vpc_sc.mode", "Input should be"),
        ({"mode": "enforced", "access_policy": "policy-1"}, "vtx:platform.vpc_sc.access_policy",
         "not a valid access policy number"),
        ({"mode": "enforced", "access_policy": "1", "ingress_identities": ["ml@acme.example"]},
         "vtx:platform.vpc_sc.ingress_identities[0]", "not a valid IAM member"),
        ({"mode": "enforced"}, "vtx:platform.vpc_sc.access_policy", "required key is missing"),
    ],
)  # fmt: skip
def test_config_mistakes_name_the_key(
    tmp_path: Path, vpc_sc: dict[str, Any], path: str, message: str
) -> None:
    values = read_stack_file(prod_with(tmp_path, vpc_sc))
    with pytest.raises(ConfigError) as caught:
        load_stack_config(values, "Pulumi.prod.yaml")
    assert [(p.path, message in p.message) for p in caught.value.problems] == [(path, True)]
