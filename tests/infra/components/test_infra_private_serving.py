"""Private serving (``vtx:platform.serving``), run under mocks from the test stacks: peering
stacks turn Cloud DNS on and export their network for `vtx deploy`; psc-interface stacks get an
internal address and a forwarding rule per PSC consumer and export where each one is; the
config refuses what could not work."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from infra.config import ConfigError, load_stack_config, read_stack_file
from infra.offline.program import OfflineRun, run_offline
from infra.policy.evaluate import PolicySubject, evaluate
from infra.policy.rule_types import RuleContext
from infra.review.builder import build_report
from infra.review.render_markdown import to_markdown
from infra.review.sources import from_offline
from jobs.core.stack import StackOutputs

STACKS = Path(__file__).resolve().parents[1] / "stacks"
ATTACHMENT = "projects/abc123-tp/regions/europe-west4/serviceAttachments/sa-gkedpm-42"


def stack_with(tmp_path: Path, base: str, serving: dict[str, Any]) -> Path:
    document = yaml.safe_load((STACKS / f"Pulumi.{base}.yaml").read_text())
    document["config"]["vtx:platform"]["serving"] = serving
    path = tmp_path / f"Pulumi.{base}-serving.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


@pytest.fixture(scope="module")
def psc_run(tmp_path_factory: pytest.TempPathFactory) -> OfflineRun:
    serving = {
        "private": True,
        "psc_consumers": [{"name": "chat", "service_attachment": ATTACHMENT}],
    }
    path = stack_with(tmp_path_factory.mktemp("psc"), "ladder-psc", serving)
    return run_offline("psc-serving", path)


@pytest.fixture(scope="module")
def peering_run(tmp_path_factory: pytest.TempPathFactory) -> OfflineRun:
    path = stack_with(tmp_path_factory.mktemp("peering"), "ladder-peering", {"private": True})
    return run_offline("peering-serving", path)


def services(run: OfflineRun) -> set[str]:
    return {r.inputs["service"] for r in run.of_type("gcp:projects/service:Service")}


def test_a_public_stack_exports_no_private_serving() -> None:
    run = run_offline("dev")
    assert "private_serving" not in run.outputs["platform"]


def test_peering_turns_on_cloud_dns_and_exports_the_peered_network(
    peering_run: OfflineRun,
) -> None:
    assert "dns.googleapis.com" in services(peering_run)
    private = StackOutputs.model_validate(peering_run.outputs["platform"]).private_serving
    assert private is not None and private.kind == "peering"
    assert private.network == StackOutputs.model_validate(peering_run.outputs["platform"]).network
    assert not peering_run.of_type("gcp:compute/forwardingRule:ForwardingRule")


def test_a_psc_consumer_is_an_address_in_the_training_subnet_forwarded_to_its_attachment(
    psc_run: OfflineRun,
) -> None:
    (address,) = psc_run.of_type("gcp:compute/address:Address")
    (rule,) = psc_run.of_type("gcp:compute/forwardingRule:ForwardingRule")
    (subnet,) = [
        s
        for s in psc_run.of_type("gcp:compute/subnetwork:Subnetwork")
        if s.name.endswith("training")
    ]
    assert address.inputs["addressType"] == "INTERNAL"
    assert address.inputs["subnetwork"] == subnet.id
    assert rule.inputs["target"] == ATTACHMENT
    assert rule.inputs["loadBalancingScheme"] == ""  # a PSC endpoint, not a load balancer
    assert rule.inputs["ipAddress"] == address.id
    assert rule.inputs["region"] == address.inputs["region"] == "europe-west4"
    private = StackOutputs.model_validate(psc_run.outputs["platform"]).private_serving
    assert private is not None and private.kind == "psc"
    assert private.psc_consumers == {"chat": address.outputs["address"]}
    assert private.psc_consumers["chat"].startswith("10.")
    # The forwarding rules live in the VPC's project (a Shared VPC host here).
    assert set(private.project_allowlist) >= {rule.inputs["project"]}


@pytest.mark.parametrize("stack", ["psc", "peering"])
def test_private_serving_raises_no_policy_finding(
    stack: str, request: pytest.FixtureRequest
) -> None:
    run: OfflineRun = request.getfixturevalue(f"{stack}_run")
    subjects = [PolicySubject(r.type, r.name, r.urn, r.inputs, r.outputs) for r in run.resources]
    environment = run.outputs["platform"]["environment"]
    verdicts = evaluate(subjects, RuleContext(environment=environment))
    assert [(v.rule.name, x.message) for v in verdicts for x in v.violations] == []


@pytest.mark.parametrize(
    ("base", "serving", "path", "message"),
    [
        (
            "ladder-psc",
            {"psc_consumers": [{"name": "chat", "service_attachment": ATTACHMENT}]},
            "vtx:platform.serving.psc_consumers",
            "only used with private: true",
        ),
        (
            "ladder-peering",
            {"private": True, "psc_consumers": [{"name": "c", "service_attachment": ATTACHMENT}]},
            "vtx:platform.serving.psc_consumers",
            "only used in network mode psc-interface",
        ),
        (
            "ladder-psc",
            {
                "private": True,
                "psc_consumers": [
                    {
                        "name": "chat",
                        "service_attachment": ATTACHMENT.replace("europe-west4", "us-east4"),
                    }
                ],
            },
            "vtx:platform.serving.psc_consumers[0].service_attachment",
            "in us-east4, not gcp:region europe-west4",
        ),
        (
            "ladder-psc",
            {
                "private": True,
                "psc_consumers": [
                    {"name": "chat", "service_attachment": ATTACHMENT},
                    {"name": "chat", "service_attachment": ATTACHMENT + "0"},
                ],
            },
            "vtx:platform.serving.psc_consumers[1].name",
            "listed already, at psc_consumers[0]",
        ),
        (
            "ladder-psc",
            {"private": True, "psc_consumers": [{"name": "Chat!", "service_attachment": "sa-1"}]},
            "vtx:platform.serving.psc_consumers[0].name",
            "not a valid resource name",
        ),
    ],
)
def test_a_serving_mistake_names_its_key(
    tmp_path: Path, base: str, serving: dict, path: str, message: str
) -> None:
    file = stack_with(tmp_path, base, serving)
    with pytest.raises(ConfigError) as raised:
        load_stack_config(read_stack_file(file), str(file))
    found = [(p.path, p.message) for p in raised.value.problems]
    assert any(p == path and message in m for p, m in found), found


def test_the_review_shows_how_models_are_reached_and_each_psc_endpoint(tmp_path: Path) -> None:
    serving = {
        "private": True,
        "psc_consumers": [{"name": "chat", "service_attachment": ATTACHMENT}],
    }
    report = build_report(from_offline("psc-serving", stack_with(tmp_path, "ladder-psc", serving)))
    assert report.network["serving"].startswith("private endpoints over Private Service Connect")
    (consumer,) = report.network["psc_consumers"]
    assert consumer["target"] == ATTACHMENT and consumer["address"].startswith("10.")
    text = to_markdown(report)
    assert "PSC endpoint" in text and ATTACHMENT in text and consumer["address"] in text
    peering = build_report(
        from_offline("peering-serving", stack_with(tmp_path, "ladder-peering", {"private": True}))
    )
    assert peering.network["serving"].startswith(
        "private endpoints over the VPC peering (projects/"
    )
    assert "serving: public endpoints" in to_markdown(build_report(from_offline("dev")))
