"""`vtx:platform.persistent_resources` under Pulumi's mocks: each a gcp.vertex.AiPersistentResource
joined to the stack's network (prod: the PSC interface attachment; dev: the peered VPC) with the
region's CMEK key where the stack has one, exported in StackOutputs; config mistakes named."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from infra.config import ConfigError, load_stack_config
from infra.offline.program import run_offline
from jobs.core.stack import StackOutputs
from tests.conftest import REPO

TYPE = "gcp:vertex/aiPersistentResource:AiPersistentResource"
WARM = {
    "id": "warm-l4",
    "labels": {"vtx-team": "nlp"},  # prod bills every resource to one of its teams
    "pools": [
        {
            "id": "l4",
            "machine": "g2-standard-8",
            "accelerator": "NVIDIA_L4",
            "accelerator_count": 1,
            "replicas": 1,
            "max_replicas": 3,
        }
    ],
}


def _stack_file(tmp_path: Path, stack: str, *resources: dict) -> Path:
    doc = yaml.safe_load((REPO / f"Pulumi.{stack}.yaml").read_text())
    doc["config"]["vtx:platform"]["persistent_resources"] = list(resources)
    path = tmp_path / f"Pulumi.{stack}-warm.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_prod_declares_the_resource_on_its_attachment_and_key(tmp_path: Path) -> None:
    run = run_offline("prod-warm", _stack_file(tmp_path, "prod", WARM))
    (resource,) = run.of_type(TYPE)
    inputs = resource.inputs
    assert inputs["name"] == "warm-l4"
    assert inputs["location"] == "europe-west4"
    assert "networkAttachment" in inputs["pscInterfaceConfig"]
    assert "network" not in inputs
    assert inputs["encryptionSpec"]["kmsKeyName"]
    (pool,) = inputs["resourcePools"]
    assert pool["machineSpec"] == {
        "machineType": "g2-standard-8",
        "acceleratorType": "NVIDIA_L4",
        "acceleratorCount": 1,
    }
    assert pool["autoscalingSpec"] == {"minReplicaCount": 1, "maxReplicaCount": 3}
    assert inputs["labels"]["vtx-team"] == "nlp"
    outputs = StackOutputs.model_validate(run.outputs["platform"])
    warm = outputs.persistent_resources["warm-l4"]
    assert warm.name.endswith("/persistentResources/warm-l4")
    assert warm.pools[0].replicas_max == 3


def test_dev_peers_it_with_the_vpc_without_cmek(tmp_path: Path) -> None:
    run = run_offline("dev-warm", _stack_file(tmp_path, "dev", WARM))
    (resource,) = run.of_type(TYPE)
    assert resource.inputs["network"].startswith("projects/")
    assert "pscInterfaceConfig" not in resource.inputs
    assert "encryptionSpec" not in resource.inputs


def test_mistakes_are_named_with_their_key_path() -> None:
    doc = yaml.safe_load((REPO / "Pulumi.dev.yaml").read_text())["config"]
    bad_pool = {"id": "x", "machine": "g2-standard-88", "replicas": 2, "max_replicas": 2}
    doc["vtx:platform"]["persistent_resources"] = [
        {"id": "a", "pools": [bad_pool]},
        {
            "id": "a",
            "region": "asia-east1",
            "pools": [{"id": "y", "machine": "n1-standard-4", "spot": True}],
        },
    ]
    with pytest.raises(ConfigError) as caught:
        load_stack_config(doc, "Pulumi.dev.yaml")
    text = str(caught.value)
    assert "persistent_resources[1].pools[0].spot" in text


def test_a_stack_with_team_budgets_bills_each_resource_to_one_of_its_teams() -> None:
    doc = yaml.safe_load((REPO / "Pulumi.prod.yaml").read_text())["config"]
    unlabelled = {k: v for k, v in WARM.items() if k != "labels"}
    stranger = {**WARM, "id": "warm-b", "labels": {"vtx-team": "search"}}
    doc["vtx:platform"]["persistent_resources"] = [unlabelled, stranger]
    with pytest.raises(ConfigError) as caught:
        load_stack_config(doc, "Pulumi.prod.yaml")
    text = " ".join(str(caught.value).split())
    assert "persistent_resources[0].labels.vtx-team: names no team" in text
    assert "would count in no team's budget" in text
    assert "labels: {vtx-team: nlp} (one of nlp, vision)" in text
    assert "persistent_resources[1].labels.vtx-team: names team 'search', which has no budget" in (
        text
    )
    doc["vtx:platform"]["persistent_resources"] = [WARM]
    assert load_stack_config(doc, "Pulumi.prod.yaml").platform.persistent_resources[0].id == (
        "warm-l4"
    )
