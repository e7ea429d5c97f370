"""Team budgets (``vtx:platform.teams``) under mocks: per team a budget filtered on the project
and the team's label, whose updates reach the team's topic and cancel function, which runs as an
account holding only the list and cancel permissions; the ``teams`` export the launcher checks."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from infra.components.team_budgets import BUDGET_PUBLISHER, FUNCTION_SOURCE
from infra.config import CANCEL_PERMISSIONS
from infra.offline.program import OfflineRun, RecordedResource, run_offline
from infra.policy.checks.credentials import DEFAULT_COMPUTE_ACCOUNT
from infra.policy.iam import grants_of
from jobs.core.stack import LABEL_TEAM, StackOutputs

PROJECT_DIR = Path(__file__).resolve().parents[3]
FUNCTION = "gcp:cloudfunctionsv2/function:Function"


@pytest.fixture(scope="module")
def ladder_run(tmp_path_factory: pytest.TempPathFactory) -> OfflineRun:
    """prod with two further regions and a third team that only alerts (cancel_at: null)."""
    document = yaml.safe_load((PROJECT_DIR / "Pulumi.prod.yaml").read_text())
    platform = document["config"]["vtx:platform"]
    platform["capacity_regions"] = [
        {"region": "us-east4", "psc_subnet_cidr": "10.31.0.16/28"},
        {"region": "us-west1", "psc_subnet_cidr": "10.31.0.32/28"},
    ]
    platform["teams"].append({"name": "speech", "monthly_amount": 500, "cancel_at": None})
    path = tmp_path_factory.mktemp("stacks") / "Pulumi.teams.yaml"
    path.write_text(yaml.safe_dump(document))
    return run_offline("teams", path)


def team_resources(run: OfflineRun, type_token: str) -> list[RecordedResource]:
    return [r for r in run.of_type(type_token) if r.component == "teams"]


def by_team(run: OfflineRun, type_token: str) -> dict[str, RecordedResource]:
    return {r.inputs["labels"][LABEL_TEAM]: r for r in team_resources(run, type_token)}


def grants_to(run: OfflineRun, email: str) -> set[tuple[str, str, str]]:
    return {
        (g.role, g.scope_kind, g.scope)
        for r in run.resources
        for g in grants_of(r.type, r.inputs)
        if g.principal == f"serviceAccount:{email}"
    }


def test_the_teams_are_exported_for_the_launcher(prod_run: OfflineRun, dev_run: OfflineRun):
    assert StackOutputs.model_validate(prod_run.outputs["platform"]).teams == ["nlp", "vision"]
    assert "teams" not in dev_run.outputs["platform"]  # a stack without teams exports as before
    assert not team_resources(dev_run, "gcp:billing/budget:Budget")


def test_each_budget_counts_the_project_and_the_teams_label_and_feeds_its_topic(
    prod_run: OfflineRun,
) -> None:
    number = StackOutputs.model_validate(prod_run.outputs["platform"]).project_number
    topics = by_team(prod_run, "gcp:pubsub/topic:Topic")
    budgets = {
        r.inputs["budgetFilter"]["labels"][LABEL_TEAM]: r
        for r in team_resources(prod_run, "gcp:billing/budget:Budget")
    }
    assert set(budgets) == set(topics) == {"nlp", "vision"}
    for team, budget in budgets.items():
        assert budget.inputs["budgetFilter"]["projects"] == [f"projects/{number}"]
        assert budget.inputs["budgetFilter"]["labels"] == {LABEL_TEAM: team}
        rules = budget.inputs["thresholdRules"]
        assert {r["spendBasis"] for r in rules} == {"CURRENT_SPEND"}
        assert [r["thresholdPercent"] for r in rules] == [0.5, 0.9, 1.0]
        updates = budget.inputs["allUpdatesRule"]
        assert updates == {"pubsubTopic": topics[team].id, "schemaVersion": "1.0"}
        assert prod_run.depends_on(budget, topics[team])
    assert budgets["nlp"].inputs["amount"]["specifiedAmount"] == {
        "currencyCode": "USD",
        "units": "5000",
    }
    publishers = team_resources(prod_run, "gcp:pubsub/topicIAMMember:TopicIAMMember")
    assert {(r.inputs["topic"], r.inputs["role"], r.inputs["member"]) for r in publishers} == {
        (t.inputs["name"], "roles/pubsub.publisher", BUDGET_PUBLISHER) for t in topics.values()
    }


def test_each_function_is_triggered_by_its_teams_topic_and_told_its_team_and_regions(
    ladder_run: OfflineRun,
) -> None:
    functions = by_team(ladder_run, FUNCTION)
    topics = by_team(ladder_run, "gcp:pubsub/topic:Topic")
    assert set(functions) == {"nlp", "vision"}  # speech only alerts: no topic, no function
    (speech,) = [
        r
        for r in team_resources(ladder_run, "gcp:billing/budget:Budget")
        if r.inputs["budgetFilter"]["labels"] == {LABEL_TEAM: "speech"}
    ]
    assert "allUpdatesRule" not in speech.inputs
    for team, function in functions.items():
        trigger = function.inputs["eventTrigger"]
        assert trigger["pubsubTopic"] == topics[team].id
        assert trigger["eventType"] == "google.cloud.pubsub.topic.v1.messagePublished"
        env = function.inputs["serviceConfig"]["environmentVariables"]
        assert env["VTX_TEAM"] == team and env["VTX_TEAM_LABEL"] == LABEL_TEAM
        assert env["VTX_REGIONS"] == "europe-west4,us-east4,us-west1"
        assert "VTX_VERTEX_ENDPOINT" not in env  # Google's endpoints in the cloud
    assert functions["vision"].inputs["serviceConfig"]["environmentVariables"]["VTX_CANCEL_AT"] == (
        "1.2"
    )


def test_the_function_runs_with_only_the_cancel_role_and_is_built_by_its_own_account(
    prod_run: OfflineRun,
) -> None:
    (function, *_) = team_resources(prod_run, FUNCTION)
    runtime = function.inputs["serviceConfig"]["serviceAccountEmail"]
    trigger = function.inputs["eventTrigger"]["serviceAccountEmail"]
    builder = function.inputs["buildConfig"]["serviceAccount"].rsplit("/", 1)[-1]
    (role,) = [
        r
        for r in team_resources(prod_run, "gcp:projects/iAMCustomRole:IAMCustomRole")
        if r.inputs["permissions"] == sorted(CANCEL_PERMISSIONS)
    ]
    assert grants_to(prod_run, runtime) == {
        (role.outputs["name"], "project", "acme-vtx-prod"),
    }
    assert grants_to(prod_run, trigger) == {
        ("roles/run.invoker", "name", f.inputs["name"]) for f in team_resources(prod_run, FUNCTION)
    }
    assert grants_to(prod_run, builder) == {
        ("roles/logging.logWriter", "project", "acme-vtx-prod"),
        ("roles/artifactregistry.writer", "project", "acme-vtx-prod"),
        ("roles/storage.objectViewer", "bucket", "acme-vtx-prod-staging"),
    }
    (images,) = [
        r
        for r in team_resources(prod_run, "gcp:projects/iAMMember:IAMMember")
        if r.inputs["role"] == "roles/artifactregistry.writer"
    ]
    assert "repositories/gcf-artifacts" in images.inputs["condition"]["expression"]
    assert not DEFAULT_COMPUTE_ACCOUNT.fullmatch(builder)
    assert len({runtime, trigger, builder}) == 3


def test_the_source_is_the_functions_folder_zipped_under_its_content_hash(
    prod_run: OfflineRun,
) -> None:
    (source,) = team_resources(prod_run, "gcp:storage/bucketObject:BucketObject")
    members = source.inputs["source"]["archive"]
    carried = {"jobs/__init__.py", "jobs/control/__init__.py", "jobs/control/cancels.py"}
    assert set(members) == {"main.py", "cancel_jobs.py", "requirements.txt"} | carried
    folder = FUNCTION_SOURCE.relative_to(PROJECT_DIR)
    assert all(members[name]["file"] == f"{folder}/{name}" for name in set(members) - carried)
    assert all(members[name]["file"] == name for name in carried)  # at its own path
    for function in team_resources(prod_run, FUNCTION):
        storage = function.inputs["buildConfig"]["source"]["storageSource"]
        assert storage == {"bucket": source.inputs["bucket"], "object": source.inputs["name"]}
        assert function.inputs["buildConfig"]["entryPoint"] == "on_budget_update"
