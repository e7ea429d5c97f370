"""Each stack matches its inventory (tests/infra/inventories/<stack>.yaml), Fabric style."""

from __future__ import annotations

import copy

import pytest
from infra_inventory import REGENERATE, compare, load

from infra.offline.program import OfflineRun


def test_stack_matches_its_inventory(stack_run: OfflineRun) -> None:
    problems = compare(load(stack_run.stack), stack_run)
    if problems:
        listing = "\n  ".join(problems)
        pytest.fail(
            f"stack {stack_run.stack} departs from inventories/{stack_run.stack}.yaml:\n"
            f"  {listing}\nIf the change is intended, regenerate and review the diff:\n"
            f"  {REGENERATE} {stack_run.stack}",
            pytrace=False,
        )


def test_inventory_covers_every_component(stack_run: OfflineRun) -> None:
    components = {entry["component"] for entry in load(stack_run.stack)["values"].values()}
    expected = {
        "apis",
        "agents",
        "identity",
        "network",
        "storage",
        "registry",
        "quotas",
        "secrets",
        "observability",
        "ci",
        "controller",
    }
    if stack_run.stack == "prod":
        expected |= {"kms", "shared-vpc", "teams", "alerts"}
    if stack_run.stack == "dev":  # the example warm pool (Pulumi.dev.yaml)
        expected |= {"persistent-resources"}
    assert components == expected


def test_comparison_catches_drift(dev_run: OfflineRun) -> None:
    inventory = copy.deepcopy(load("dev"))
    values = inventory["values"]
    values["storage-data"]["inputs"]["publicAccessPrevention"] = "inherited"
    values["storage-data"]["inputs"]["labels"] = {"team": "someone-else"}
    values["storage-models"]["inputs"]["versioning"] = "__missing__"
    values["storage-ghost"] = {"type": "gcp:storage/bucket:Bucket", "inputs": {}}
    inventory["counts"]["gcp:storage/bucket:Bucket"] = 5
    problems = compare(inventory, dev_run)
    assert "storage-data.publicAccessPrevention: expected 'inherited', got 'enforced'" in problems
    assert "storage-data.labels.team: expected 'someone-else', got 'ml-platform'" in problems
    assert any(p.startswith("storage-models.versioning: expected absent") for p in problems)
    assert "storage-ghost: listed in the inventory but not declared" in problems
    assert "count of gcp:storage/bucket:Bucket: expected 5, got 4" in problems


def test_missing_marker_fails_when_the_attribute_appears(prod_run: OfflineRun) -> None:
    inventory = copy.deepcopy(load("prod"))
    inventory["values"]["storage-data"]["inputs"]["encryption"] = "__missing__"
    assert any(
        p.startswith("storage-data.encryption: expected absent")
        for p in compare(inventory, prod_run)
    )
