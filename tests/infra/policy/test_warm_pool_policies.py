"""The persistent-resource (warm pool) rules: on the stack's network, under the replica ceiling,
labelled as the rest of the stack, CMEK in prod; and the stacks' own resources pass them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from infra.config import MAX_WARM_POOL_REPLICAS, ConfigError, load_stack_config
from infra.offline.program import run_offline
from infra.policy.evaluate import PolicySubject, evaluate, mandatory_violations
from infra.policy.rule_types import RuleContext, StackResource
from infra.policy.rules import RULES
from infra.policy.values import UNKNOWN
from tests.conftest import REPO

WARM = "gcp:vertex/aiPersistentResource:AiPersistentResource"
BUCKET = "gcp:storage/bucket:Bucket"
KEY = "projects/p/locations/europe-west4/keyRings/r/cryptoKeys/k"
LABELS = {"environment": "prod", "team": "ml-platform", "cost-center": "ml-production"}
POOL = {
    "id": "l4",
    "machineSpec": {"machineType": "g2-standard-8", "acceleratorType": "NVIDIA_L4"},
    "replicaCount": 1,
    "autoscalingSpec": {"minReplicaCount": 1, "maxReplicaCount": 3},
}
GOOD = {
    "name": "warm-l4",
    "location": "europe-west4",
    "network": "projects/123/global/networks/vpc",
    "resourcePools": [POOL],
    "encryptionSpec": {"kmsKeyName": KEY},
    "labels": LABELS,
}
PROD = RuleContext(environment="prod")


def check(name: str, props: dict[str, Any], resource_type: str = WARM) -> list[str]:
    found = next(r for r in RULES if r.name == name).resource_check
    assert found is not None
    return found(resource_type, props, PROD)


def labels_check(*resources: tuple[str, dict[str, Any]], ctx: RuleContext = PROD) -> list:
    found = next(r for r in RULES if r.name == "persistent-resource-labels").stack_check
    assert found is not None
    stack = [StackResource(t, f"r{i}", f"urn:{i}", p) for i, (t, p) in enumerate(resources)]
    return found(stack, ctx)


def test_a_resource_on_the_peered_vpc_or_a_psc_interface_passes() -> None:
    assert check("persistent-resource-private", GOOD) == []
    psc = {k: v for k, v in GOOD.items() if k != "network"}
    psc["pscInterfaceConfig"] = {"networkAttachment": "projects/p/regions/r/networkAttachments/a"}
    assert check("persistent-resource-private", psc) == []


def test_a_resource_on_no_network_of_the_stack_is_refused() -> None:
    bare = {k: v for k, v in GOOD.items() if k != "network"}
    (message,) = check("persistent-resource-private", bare)
    assert "Google's network" in message
    assert check("persistent-resource-private", {**bare, "pscInterfaceConfig": {}})


def test_a_network_unknown_at_preview_is_not_a_violation() -> None:
    assert check("persistent-resource-private", {**GOOD, "network": UNKNOWN}) == []


def test_other_types_are_not_judged() -> None:
    for name in (
        "persistent-resource-private",
        "persistent-resource-replica-ceiling",
        "prod-persistent-resource-cmek",
    ):
        assert check(name, {}, BUCKET) == []


def test_a_pool_over_the_ceiling_is_refused_by_its_autoscaling_maximum() -> None:
    at = {**POOL, "autoscalingSpec": {"minReplicaCount": 1, "maxReplicaCount": 16}}
    assert check("persistent-resource-replica-ceiling", {**GOOD, "resourcePools": [at]}) == []
    over = {**POOL, "autoscalingSpec": {"minReplicaCount": 1, "maxReplicaCount": 17}}
    (message,) = check("persistent-resource-replica-ceiling", {**GOOD, "resourcePools": [over]})
    assert "pool l4 may hold 17 VMs" in message
    assert f"ceiling of {MAX_WARM_POOL_REPLICAS}" in message


def test_a_pool_without_autoscaling_is_judged_by_its_replica_count() -> None:
    fixed = {"id": "big", "replicaCount": MAX_WARM_POOL_REPLICAS + 4}
    (message,) = check("persistent-resource-replica-ceiling", {**GOOD, "resourcePools": [fixed]})
    assert "pool big may hold 20 VMs" in message


def test_prod_needs_a_customer_managed_key() -> None:
    assert check("prod-persistent-resource-cmek", GOOD) == []
    bare = {k: v for k, v in GOOD.items() if k != "encryptionSpec"}
    (message,) = check("prod-persistent-resource-cmek", bare)
    assert "kmsKeyName" in message


def test_labels_the_rest_of_the_stack_carries_are_required() -> None:
    bucket = (BUCKET, {"labels": LABELS})
    assert labels_check(bucket, (WARM, GOOD)) == []
    unlabelled = {**GOOD, "labels": {"environment": "prod", "team": "ml-platform"}}
    ((message, urn),) = labels_check(bucket, (WARM, unlabelled))
    assert "lacks the labels cost-center" in message and urn == "urn:1"


def test_provider_default_labels_count_and_unknown_labels_are_not_judged() -> None:
    bucket = (BUCKET, {"labels": LABELS})
    ctx = RuleContext(environment="prod", default_labels={"cost-center": "ml-production"})
    partial = {**GOOD, "labels": {"environment": "prod", "team": "ml-platform"}}
    assert labels_check(bucket, (WARM, partial), ctx=ctx) == []
    assert labels_check(bucket, (WARM, {**GOOD, "labels": UNKNOWN})) == []


def test_a_stack_without_persistent_resources_has_nothing_to_label() -> None:
    assert labels_check((BUCKET, {"labels": LABELS})) == []


def test_the_stack_config_refuses_a_pool_over_the_ceiling() -> None:
    doc = yaml.safe_load((REPO / "Pulumi.dev.yaml").read_text())["config"]
    pool = {"id": "l4", "machine": "g2-standard-8", "replicas": 1, "max_replicas": 40}
    doc["vtx:platform"]["persistent_resources"] = [{"id": "warm", "pools": [pool]}]
    with pytest.raises(ConfigError) as caught:
        load_stack_config(doc, "Pulumi.dev.yaml")
    assert "persistent_resources[0].pools[0].max_replicas" in str(caught.value)


WARM_CONFIG = {
    "id": "warm-l4",
    "labels": {"vtx-team": "nlp"},  # prod's team budgets count it
    "pools": [{"id": "l4", "machine": "g2-standard-8", "accelerator": "NVIDIA_L4", "replicas": 1}],
}


@pytest.mark.parametrize(("stack", "egress"), [("dev", None), ("prod", "none")])
def test_the_stacks_own_resources_pass_every_rule(
    tmp_path: Path, stack: str, egress: str | None
) -> None:
    doc = yaml.safe_load((REPO / f"Pulumi.{stack}.yaml").read_text())
    doc["config"]["vtx:platform"]["persistent_resources"] = [WARM_CONFIG]
    path = tmp_path / f"Pulumi.{stack}-warm.yaml"
    path.write_text(yaml.safe_dump(doc))
    run = run_offline(f"{stack}-warm", path)
    subjects = [PolicySubject(r.type, r.name, r.urn, r.inputs, r.outputs) for r in run.resources]
    ctx = RuleContext(environment=stack, egress=egress)
    verdicts = evaluate(subjects, ctx)
    assert mandatory_violations(verdicts) == []
    warm = {v.rule.name: v.status for v in verdicts if "persistent-resource" in v.rule.name}
    expected = "pass" if stack == "prod" else "skipped"
    assert warm == {
        "persistent-resource-private": "pass",
        "persistent-resource-replica-ceiling": "pass",
        "persistent-resource-labels": "pass",
        "prod-persistent-resource-cmek": expected,
    }
