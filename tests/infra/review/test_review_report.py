"""`vtx review`: the offline review of dev and prod, and the review of a `pulumi preview --json`."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest
from typer.testing import CliRunner

from infra.policy.evaluate import PolicySubject, evaluate
from infra.policy.policies import POLICIES
from infra.policy.rule_types import RuleContext
from infra.review.builder import build_report
from infra.review.render_html import to_html
from infra.review.render_json import to_data
from infra.review.render_markdown import to_markdown
from infra.review.sources import (
    ReviewResource,
    ReviewSourceError,
    from_preview_json,
)
from vtx.commands.review import Format, render_review

FIXTURES = Path(__file__).parent / "fixtures"
PREVIEW = FIXTURES / "preview-dev.json"
SECTIONS = (
    "## Resources",
    "## Network",
    "## IAM",
    "## Buckets",
    "## Quotas requested",
    "## Secrets (names only)",
    "## Team budgets",
    "## Controller",
    "## Policies",
    "## Diagram",
    "```mermaid\nflowchart LR",
)


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_offline_review_has_every_section(offline, stack: str) -> None:
    _, report = offline[stack]
    text = to_markdown(report)
    for section in SECTIONS:
        assert section in text, f"{section!r} missing from the {stack} review"


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_offline_review_describes_what_the_stack_exports(offline, stack: str) -> None:
    source, report = offline[stack]
    platform = source.platform
    assert report.environment == platform["environment"] == stack
    bucket_names = {b["name"] for b in report.buckets}
    assert bucket_names == set(platform["buckets"].values())
    assert all(b["uniform_access"] == "yes" for b in report.buckets)
    assert {s["secret_id"] for s in report.secrets} == set(platform["secrets"])
    trainer = f"serviceAccount:{platform['trainer_service_account']}"
    trainer_targets = {row.resource for row in report.iam if row.principal == trainer}
    assert platform["buckets"]["checkpoints"] in trainer_targets
    assert report.quotas and all(q["service"] == "aiplatform.googleapis.com" for q in report.quotas)


def test_team_budgets_show_each_chain_from_budget_to_the_functions_permissions(offline) -> None:
    _, report = offline["prod"]
    nlp, vision = report.teams
    assert nlp["team"] == "nlp" and nlp["budget"] == "5000 USD/month"
    assert nlp["thresholds"] == "0.5, 0.9, 1" and nlp["label_filter"] == "vtx-team=nlp"
    assert nlp["topic"] == "acme-vtx-prod-budget-nlp" and nlp["topic_cmek"].endswith("-key")
    assert nlp["function"] == "acme-vtx-prod-cancel-nlp" and vision["cancel_at"] == "1.2"
    assert nlp["runs_as"].startswith("acme-vtx-prod-canceler@")
    [role] = nlp["permissions"]
    assert role.startswith("projects/acme-vtx-prod/roles/acme_vtx_prod_budget_canceler (")
    assert "aiplatform.customJobs.cancel" in role and "hyperparameterTuningJobs.list" in role
    markdown, html = to_markdown(report), to_html(report)
    assert "| nlp | 5000 USD/month | 0.5, 0.9, 1 | vtx-team=nlp | acme-vtx-prod-budget-nlp" in (
        markdown
    )
    assert "<h2>Team budgets" in html and "acme-vtx-prod-cancel-vision" in html
    assert to_data(report)["teams"][1]["function"] == "acme-vtx-prod-cancel-vision"
    assert offline["dev"][1].teams == []  # dev declares no team: the table says none


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_the_controller_shows_its_schedule_caller_identity_and_reach(offline, stack: str) -> None:
    _, report = offline[stack]
    [controller] = report.controller
    assert controller["function"] == f"acme-vtx-{stack}-controller"
    assert controller["schedule"] == "* * * * *"
    assert controller["called_by"].startswith(f"acme-vtx-{stack}-ctlsched@")
    assert controller["runs_as"].startswith(f"acme-vtx-{stack}-ctl@")
    role, acts_as, objects = controller["permissions"]
    assert role.startswith(f"projects/acme-vtx-{stack}/roles/acme_vtx_{stack}_controller (")
    assert "aiplatform.customJobs.create" in role and "hyperparameterTuningJobs.cancel" in role
    assert (acts_as, objects) == ("roles/iam.serviceAccountUser", "roles/storage.objectUser")
    [reach] = controller["objects"]
    assert f"buckets/acme-vtx-{stack}-checkpoints/objects/runs/" in reach
    assert "| acme-vtx-" in to_markdown(report).split("## Controller")[1].split("##")[0]
    assert to_data(report)["controller"][0]["function"] == controller["function"]


def test_network_section_follows_each_stacks_mode(offline) -> None:
    dev, prod = offline["dev"][1].network, offline["prod"][1].network
    assert dev["mode"] == "peering" and dev["peering_ranges"] and not dev["attachment"]
    assert prod["mode"] == "psc-interface" and prod["attachment"]
    assert prod["attachment"][0]["exported_as"] == offline["prod"][0].platform["network_attachment"]


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_stack_passes_every_mandatory_policy(offline, stack: str) -> None:
    _, report = offline[stack]
    failing = [p for p in report.policy if p.mandatory and p.status == "fail"]
    assert failing == [], failing
    skipped = {p.policy for p in report.policy if p.status == "skipped"}
    # dev keeps NAT (network.egress nat): the closed-egress rules do not apply to it.
    dev_skips = {p.policy for p in report.policy if p.policy.startswith(("prod-", "egress-none-"))}
    assert skipped == (dev_skips if stack == "dev" else set())


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_shipped_stacks_raise_no_advisory_findings(offline, stack: str) -> None:
    """The example stacks pass the project's own advice (dev's peering range once had no labels)."""
    _, report = offline[stack]
    findings = [(p.policy, v) for p in report.policy if not p.mandatory for v in p.violations]
    assert findings == []
    assert "(0 advisory finding(s))" in to_markdown(report)


def test_prod_review_applies_the_prod_rules(offline) -> None:
    _, report = offline["prod"]
    verdicts = {p.policy: p.status for p in report.policy}
    assert verdicts["prod-bucket-cmek"] == "pass"
    assert verdicts["prod-registry-cmek"] == "pass"
    assert verdicts["prod-tensorboard-cmek"] == "pass"
    assert verdicts["prod-registry-immutable-tags"] == "pass"
    assert verdicts["network-dns-logging"] == "pass"
    assert verdicts["prod-budget"] == "pass"
    assert "skipped" not in verdicts.values()


def test_secret_values_never_reach_the_report(offline) -> None:
    for _, report in offline.values():
        for text in (to_markdown(report), to_html(report), json.dumps(to_data(report))):
            assert "offline-dummy-secret" not in text
            assert "secretData" not in text
        assert all(s["versions_in_state"] == 0 for s in report.secrets)


def test_against_shows_what_differs_between_dev_and_prod(offline) -> None:
    text, _ = render_review("dev", against="prod")
    diff = text[text.index("## dev vs prod") :]
    assert "| network | mode | peering | psc-interface |" in diff
    assert "gcp:billing/budget:Budget | 0 | 3 |" in diff  # the project's and two teams'
    assert "immutableTags" in diff
    # The environment name and project number are blanked: not every resource differs.
    assert 'storage-data | labels.cost-center | `"ml-research"` | `"ml-production"`' in diff
    assert "Bucket storage-data | name" not in diff
    # Differing values are whole, numbers read as the stack file wrote them.
    assert "…" not in diff
    key = "projects/acme-vtx-{env}/locations/europe-west4/keyRings/acme-vtx-{env}-ring/cryptoKeys/"
    assert f'`{{"defaultKmsKeyName": "{key}acme-vtx-{{env}}-key"}}`' in diff
    assert "softDeletePolicy.retentionDurationSeconds | `604800` | `2592000` |" in diff


def test_cli_writes_json_and_exits_with_the_policy_verdict(
    tmp_path: Path, offline, review_cli
) -> None:
    out = tmp_path / "dev.json"
    result = CliRunner().invoke(
        review_cli, ["review", "--stack", "dev", "--format", "json", "-o", str(out)]
    )
    data = json.loads(out.read_text())
    assert {
        "resources",
        "iam",
        "policy",
        "network",
        "buckets",
        "quotas",
        "secrets",
        "diagram",
    } <= set(data)
    assert result.exit_code == (1 if data["mandatory_violations"] else 0)
    assert result.exit_code == 0, result.output


# --- pulumi preview --json ------------------------------------------------------------------


def test_preview_json_renders_the_same_sections() -> None:
    report = build_report(from_preview_json(PREVIEW, "dev"))
    text = to_markdown(report)
    for section in SECTIONS:
        assert section in text
    assert report.environment == "dev"
    assert report.network["mode"] == "peering"
    assert {c.component for c in report.counts} == {
        "identity",
        "network",
        "quotas",
        "registry",
        "secrets",
        "storage",
    }
    assert [b["name"] for b in report.buckets] == [
        "acme-vtx-dev-checkpoints",
        "acme-vtx-dev-staging",
    ]
    assert report.mandatory_failures == 0


def _node_id(diagram: str, label: str) -> str:
    """The Mermaid id of the node whose label is exactly ``label``."""
    for line in diagram.splitlines():
        if f'"{label}"' in line and "-->" not in line:
            return line.strip().split('"', 1)[0].rstrip("[({/>")
    raise AssertionError(f"no node {label!r} in\n{diagram}")


def test_preview_json_diagram_draws_grants_between_stack_resources() -> None:
    diagram = build_report(from_preview_json(PREVIEW, "dev")).diagram
    trainer = _node_id(diagram, "service account: acme-vtx-dev-trainer")
    launcher = _node_id(diagram, "service account: acme-vtx-dev-launcher")
    bucket = _node_id(diagram, "bucket: acme-vtx-dev-checkpoints")
    secret = _node_id(diagram, "secret: hf-token")
    edges = {line.strip() for line in diagram.splitlines() if "-->" in line}
    assert f'{trainer} -->|"storage.objectAdmin"| {bucket}' in edges
    assert f'{trainer} -->|"secretmanager.secretAccessor"| {secret}' in edges
    assert f'{launcher} -->|"iam.serviceAccountUser"| {trainer}' in edges
    assert f'{launcher} -->|"aiplatform.user"| project' in edges


def test_preview_with_public_bucket_grant_fails_the_review(tmp_path: Path, review_cli) -> None:
    digest = json.loads(PREVIEW.read_text())
    step = copy.deepcopy(
        next(s for s in digest["steps"] if s["urn"].endswith("checkpoints-trainer"))
    )
    step["urn"] = step["newState"]["urn"] = step["urn"].replace("checkpoints-trainer", "public")
    step["newState"]["inputs"]["member"] = "allUsers"
    digest["steps"].append(step)
    path = tmp_path / "preview.json"
    path.write_text(json.dumps(digest))
    result = CliRunner().invoke(
        review_cli, ["review", "--stack", "dev", "--preview-json", str(path)]
    )
    assert result.exit_code == 1
    assert "no-public-principals | mandatory | fail" in result.output
    assert "grants roles/storage.objectViewer to allUsers" not in result.output
    assert (
        "grants roles/storage.objectAdmin to allUsers on bucket acme-vtx-dev-checkpoints"
        in result.output
    )


def test_deleted_resources_are_not_reviewed(tmp_path: Path) -> None:
    digest = json.loads(PREVIEW.read_text())
    for step in digest["steps"]:
        if step["urn"].endswith("::staging"):
            step["op"] = "delete"
            step["oldState"] = step.pop("newState")
    path = tmp_path / "preview.json"
    path.write_text(json.dumps(digest))
    report = build_report(from_preview_json(path, "dev"))
    assert [b["name"] for b in report.buckets] == ["acme-vtx-dev-checkpoints"]


def test_preview_file_without_steps_is_refused_with_the_command_to_make_one(
    tmp_path: Path, review_cli
) -> None:
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"config": {}}))
    with pytest.raises(ReviewSourceError, match=r"pulumi preview --json --stack dev"):
        from_preview_json(path, "dev")
    result = CliRunner().invoke(
        review_cli, ["review", "--stack", "dev", "--preview-json", str(path)]
    )
    assert result.exit_code == 2


def test_json_format_has_resources_iam_and_policy_keys() -> None:
    text, code = render_review("dev", preview_json=PREVIEW, fmt=Format.json)
    data = json.loads(text)
    assert code == 0
    assert len(data["resources"]) == 20  # custom resources in the fixture
    assert {"principal", "role", "resource_kind", "resource"} <= set(data["iam"][0])
    assert {p["policy"] for p in data["policy"]} >= {"no-public-principals", "prod-budget"}


# --- HTML ------------------------------------------------------------------------------------


class _Collector(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.external: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        for name, value in attrs:
            if name in ("src", "href") and value:
                self.external.append(value)


def test_html_report_is_one_self_contained_page() -> None:
    text, _ = render_review("dev", preview_json=PREVIEW, fmt=Format.html)
    parser = _Collector()
    parser.feed(text)
    assert parser.external == []
    assert "script" not in parser.tags and "link" not in parser.tags
    assert parser.tags.count("table") >= 7
    for heading in ("Resources", "Network", "IAM", "Buckets", "Quotas requested", "Policies"):
        assert f"<h2>{heading}" in text


def test_review_cli_module_is_cheap_to_import() -> None:
    """`vtx --help` loads it: Pulumi, the providers and the infra program stay unimported."""
    code = (
        "import sys, vtx.commands.review; "
        "heavy = [m for m in sys.modules if m.split('.')[0] in ('pulumi', 'pulumi_gcp', "
        "'pulumi_policy') or m in ('infra.components.vertex_platform', 'infra.__main__')]; "
        "assert not heavy, heavy"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def _engine_violations(resources, environment: str) -> set[tuple[str, str]]:
    """(policy, resource name) pairs the CrossGuard policies report, fed as the engine would."""
    from pulumi_policy import (
        PolicyResource,
        ResourceValidationArgs,
        ResourceValidationPolicy,
        StackValidationArgs,
    )
    from pulumi_policy.policy import _NotApplicableError
    from pulumi_policy.proxy import unknown_checking_proxy

    config = {"environment": environment}
    found: set[tuple[str, str]] = set()
    for policy in POLICIES:
        try:
            if isinstance(policy, ResourceValidationPolicy):
                for r in resources:
                    props = unknown_checking_proxy(dict(r.inputs))
                    args = ResourceValidationArgs(r.type, props, r.urn, r.name, None, None, config)
                    reported: list[str] = []
                    policy.validate(args, lambda message, urn, out=reported: out.append(message))
                    if reported:
                        found.add((policy.name, r.name))
            else:
                stack = [
                    PolicyResource(r.type, r.outputs, r.urn, r.name, None, None, None, [], {})
                    for r in resources
                ]
                reported = []
                policy.validate(
                    StackValidationArgs(stack, config),
                    lambda message, urn, out=reported: out.append(message),
                )
                if reported:
                    found.add((policy.name, "stack"))
        except _NotApplicableError:
            continue
    return found


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_crossguard_policies_agree_with_the_offline_verdicts(offline, stack: str) -> None:
    """The pack `pulumi preview --policy-pack infra/policy` loads finds what the review finds,
    on the real stack plus two resources that must be refused."""

    source, _ = offline[stack]
    planted = [
        ReviewResource(
            "urn:planted:public",
            "gcp:storage/bucketIAMMember:BucketIAMMember",
            "public",
            {"bucket": "b", "role": "roles/storage.objectViewer", "member": "allUsers"},
            {},
            "x",
        ),
        ReviewResource("urn:planted:key", "gcp:serviceaccount/key:Key", "key", {}, {}, "x"),
        ReviewResource(
            "urn:planted:ssh",
            "gcp:compute/firewall:Firewall",
            "ssh",
            {"allows": [{"protocol": "tcp", "ports": ["22"]}], "sourceRanges": ["0.0.0.0/0"]},
            {},
            "x",
        ),
        ReviewResource(
            "urn:planted:vm",
            "gcp:compute/instance:Instance",
            "vm",
            {"networkInterfaces": [{"subnetwork": "s", "accessConfigs": [{}]}]},
            {},
            "x",
        ),
    ]
    resources = [*source.resources, *planted]
    subjects = [PolicySubject(r.type, r.name, r.urn, r.inputs, r.outputs) for r in resources]
    offline_found = {
        (v.policy, v.resource.split(" ", 1)[1] if v.resource else "stack")
        for verdict in evaluate(subjects, RuleContext(environment=stack))
        for v in verdict.violations
    }
    assert {
        ("no-public-principals", "public"),
        ("no-service-account-keys", "key"),
        ("no-internet-ingress", "ssh"),
        ("instance-no-external-ip", "vm"),
    } <= offline_found
    assert _engine_violations(resources, stack) == offline_found


def test_unknown_stack_is_reported_with_the_missing_file(review_cli) -> None:
    result = CliRunner().invoke(review_cli, ["review", "--stack", "nosuch"])
    assert result.exit_code == 2
    assert "Pulumi.nosuch.yaml" in result.output
    assert "stacks here: dev, prod" in " ".join(result.output.split())


def test_misspelt_against_stack_fails_before_any_stack_runs(review_cli, monkeypatch) -> None:
    def must_not_run(*args: object, **kwargs: object) -> None:
        raise AssertionError("the first stack ran before --against was checked")

    monkeypatch.setattr("vtx.commands.review.from_offline", must_not_run)
    result = CliRunner().invoke(review_cli, ["review", "--stack", "dev", "--against", "prdo"])
    assert result.exit_code == 2
    assert "no stack 'prdo'" in result.output
    assert "stacks here: dev, prod" in " ".join(result.output.split())


@pytest.mark.timeout(60)  # a FIFO with no writer blocked read_text() before the reader's check
def test_a_preview_file_that_is_not_a_regular_file_is_one_line(tmp_path: Path, review_cli) -> None:
    fifo = tmp_path / "preview.json"
    os.mkfifo(fifo)
    with pytest.raises(ReviewSourceError, match=f"^preview file {fifo} is a FIFO"):
        from_preview_json(fifo, "dev")
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 10_000 + "]" * 10_000)
    with pytest.raises(ReviewSourceError, match="JSON nested more than"):  # RecursionError before
        from_preview_json(deep, "dev")
    result = CliRunner().invoke(
        review_cli, ["review", "--stack", "dev", "--preview-json", str(fifo)]
    )
    assert result.exit_code == 2, result.output
    assert "is a FIFO (named pipe), not a regular file" in result.output


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_a_review_written_to_a_full_disk_is_one_line(review_cli) -> None:
    result = CliRunner().invoke(
        review_cli,
        ["review", "--stack", "dev", "--preview-json", str(PREVIEW), "-o", "/dev/full"],
    )
    assert result.exit_code == 2, result.output
    assert "--output /dev/full was not written whole: no space left" in result.output
    assert isinstance(result.exception, SystemExit), result.exception


def test_the_alerts_show_what_fires_them_and_who_hears(offline) -> None:
    _, report = offline["prod"]
    alerts = {a["alert"]: a for a in report.alerts}
    breached = alerts["acme-vtx-prod: progress guard breached"]
    assert breached["fires_when"] == [
        "A run's progress guard was breached (acme-vtx-prod-guard-breaches)"
    ]
    assert breached["notifies"] == ["email ml-platform-oncall@acme.example"]
    nlp = alerts["acme-vtx-prod: progress guard breached (team nlp)"]
    assert nlp["notifies"] == ["email nlp-oncall@acme.example"]
    stopped = alerts["acme-vtx-prod: controller stopped"]
    assert stopped["fires_when"] == [
        "No controller pass for 10 minutes (acme-vtx-prod-controller-passes)"
    ]
    section = to_markdown(report).split("## Alerts")[1].split("##")[0]
    assert "controller stopped" in section and "nlp-oncall@acme.example" in section
    assert to_data(report)["alerts"][0]["alert"] == "acme-vtx-prod: controller stopped"
    assert offline["dev"][1].alerts == []  # dev configures none: the table says none
