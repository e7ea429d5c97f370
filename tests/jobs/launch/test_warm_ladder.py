"""A capacity ladder whose rung runs on a persistent resource (warm pool first, then Spot
elsewhere), through `jobs.launch.plan.compile_rungs`: the rung's job is placed on the resource's
pools (`jobs.custom_jobs.pool_fit`), only that rung renders ``persistentResourceId``, and a rung
whose job fits no pool is refused at the rung with the pool to match."""

from __future__ import annotations

import json
from typing import Any

import pytest

from jobs.core.stack import StackOutputs
from jobs.launch.plan import Rung, compile_rungs
from jobs.pricing.plan import plan_job
from jobs.quota.cloud_quotas import QuotaCheck
from jobs.spec.template import JobTemplate
from tests.conftest import TEST_DATA

WARM = {
    "name": "projects/123456789012/locations/us-central1/persistentResources/warm-l4",
    "region": "us-central1",
    "pools": [
        {
            "id": "l4",
            "machine_type": "g2-standard-8",
            "accelerator_type": "NVIDIA_L4",
            "accelerator_count": 1,
            "replica_count": 1,
        }
    ],
}
EAST = "projects/vtx-dev-123/regions/us-east4/networkAttachments/vtx-training"
BASE: dict[str, Any] = {
    "name": "warm-first",
    "image": "trainer",
    "command": ["python", "-m", "trainer"],
    "pools": {"chief": {"machine": "g2-standard-8", "accelerator": "NVIDIA_L4"}},
    "scheduling": {"strategy": "standard", "timeout": "2h"},
}


@pytest.fixture
def stack() -> StackOutputs:
    doc = json.loads((TEST_DATA / "stack-dev.json").read_text())
    doc["persistent_resources"] = {"warm-l4": WARM}
    doc["regions"] = {"us-east4": {"network_attachment": EAST}}
    return StackOutputs.model_validate(doc)


def compiled(stack: StackOutputs, doc: dict[str, Any]) -> tuple[list[dict], list[str]]:
    template = JobTemplate.from_document(doc, "warm.yaml")
    rungs, problems = compile_rungs(template, stack, "warm-first-run", "warm.yaml")
    return [job.rest for _, job in rungs], [f"{p.path}: {p.message}" for p in problems]


def _resource(job: dict) -> str | None:
    return job["jobSpec"].get("persistentResourceId")


def test_warm_pool_first_then_spot_elsewhere(stack: StackOutputs) -> None:
    doc = {
        **BASE,
        "persistent_resource": "warm-l4",
        "capacity": {
            "max_wait": "10m",
            "ladder": [{"region": "us-east4", "set": {"scheduling.strategy": "spot"}}],
        },
    }
    (warm, spot), problems = compiled(stack, doc)
    assert problems == []
    assert _resource(warm) == "warm-l4"
    assert _resource(spot) is None  # the base's resource is its rung's alone
    assert spot["jobSpec"]["scheduling"]["strategy"] == "SPOT"
    assert warm["jobSpec"]["pscInterfaceConfig"]["networkAttachment"] != EAST
    assert spot["jobSpec"]["pscInterfaceConfig"]["networkAttachment"] == EAST


def test_a_later_rung_may_name_the_resource_itself(stack: StackOutputs) -> None:
    doc = {
        **BASE,
        "scheduling": {"strategy": "spot", "timeout": "2h"},
        "capacity": {
            "ladder": [
                {"persistent_resource": "warm-l4", "set": {"scheduling.strategy": "standard"}}
            ]
        },
    }
    (spot, warm), problems = compiled(stack, doc)
    assert problems == []
    assert (_resource(spot), _resource(warm)) == (None, "warm-l4")


def test_a_rung_whose_job_fits_no_pool_is_refused_at_the_rung(stack: StackOutputs) -> None:
    doc = {
        **BASE,
        "scheduling": {"strategy": "spot", "timeout": "2h"},
        "capacity": {
            "ladder": [
                {
                    "persistent_resource": "warm-l4",
                    "set": {
                        "scheduling.strategy": "standard",
                        "pools.chief.machine": "g2-standard-24",
                    },
                }
            ]
        },
    }
    rungs, problems = compiled(stack, doc)
    assert len(rungs) == 1 and _resource(rungs[0]) is None  # the base still compiles
    (problem,) = problems
    assert problem.startswith("capacity.ladder[0]: pools.chief: no resource pool of ")
    assert "closest is pool 'l4'" in problem
    assert "set pools.chief.machine to g2-standard-8" in problem


def test_a_warm_rung_on_spot_or_in_another_region_is_refused(stack: StackOutputs) -> None:
    doc = {
        **BASE,
        "capacity": {"ladder": [{"persistent_resource": "warm-l4", "region": "us-east4"}]},
        "scheduling": {"strategy": "spot", "timeout": "2h"},
    }
    _, problems = compiled(stack, doc)
    text = "\n".join(problems)
    assert "capacity.ladder[0]: persistent_resource: persistent resource 'warm-l4' is in " in text
    assert "capacity.ladder[0]: scheduling.strategy: spot on a persistent resource" in text


def test_a_rung_naming_a_resource_the_stack_lacks_is_refused(stack: StackOutputs) -> None:
    doc = {**BASE, "capacity": {"ladder": [{"persistent_resource": "absent"}]}}
    _, problems = compiled(stack, doc)
    (problem,) = problems
    assert "capacity.ladder[0]: persistent_resource: stack vtx-dev-123 has no persistent" in (
        problem
    )


def test_the_walk_names_the_warm_rung_by_its_resource(stack: StackOutputs) -> None:
    doc = {
        **BASE,
        "persistent_resource": "warm-l4",
        "capacity": {"ladder": [{"set": {"scheduling.strategy": "spot"}}]},
    }
    template = JobTemplate.from_document(doc, "warm.yaml")
    compiled, _ = compile_rungs(template, stack, "warm-first-run", "warm.yaml")
    labels = [
        Rung(d.number, plan_job(job), QuotaCheck("us-central1", []), None, None).label
        for d, job in compiled
    ]
    assert labels == [
        "rung 1 us-central1 1xL4 STANDARD on warm-l4",
        "rung 2 us-central1 1xL4 SPOT",
    ]
