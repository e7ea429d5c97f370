"""A stack's further regions (``regions`` in its outputs): a job whose template names one is
compiled with that region's network attachment and key, priced and submitted there; a region the
stack was not given, or one missing what the stack's own region has, is refused before submit."""

from __future__ import annotations

from typing import Any

import pytest

from jobs.core.contract import region_of
from jobs.core.stack import RegionOutputs, StackOutputs
from jobs.custom_jobs.compile import CompileError, compile_job
from jobs.pricing.plan import plan_job
from jobs.spec.template import JobTemplate
from jobs.vertex.rest import VertexRest
from tests.conftest import dev_stack

RUN_ID = "regions-test-run"
EAST = "projects/vtx-dev-123/regions/us-east4/networkAttachments/vtx-training-us-east4"
EAST_KEY = "projects/vtx-dev-123/locations/us-east4/keyRings/vtx/cryptoKeys/vtx"


@pytest.fixture
def stack() -> StackOutputs:
    return dev_stack(regions={"us-east4": RegionOutputs(network_attachment=EAST)})


def template(region: str | None) -> JobTemplate:
    doc: dict[str, Any] = {
        "name": "regional",
        "image": "trainer",
        "pools": {"chief": {"machine": "g2-standard-4"}},
    }
    return JobTemplate.from_document({**doc, "region": region} if region else doc)


def test_a_job_in_a_further_region_uses_that_regions_attachment_and_no_other_regions_board(
    stack: StackOutputs,
) -> None:
    job = compile_job(template("us-east4"), stack, RUN_ID)
    spec = job.rest["jobSpec"]
    assert spec["pscInterfaceConfig"]["networkAttachment"] == EAST
    assert "tensorboard" not in spec  # the stack's instance lives in us-central1
    assert job.stack.region == "us-east4"
    assert job.facts.region == "us-east4"
    assert plan_job(job).cost.region == "us-east4"
    # Same buckets, same run: the output prefix does not depend on the region.
    assert job.output_prefix == compile_job(template(None), stack, RUN_ID).output_prefix


def test_a_job_in_the_stacks_own_region_is_unchanged(stack: StackOutputs) -> None:
    own = compile_job(template("us-central1"), stack, RUN_ID)
    assert own.stack is stack
    assert own.rest == compile_job(template(None), stack, RUN_ID).rest


def test_a_region_the_stack_was_not_given_is_refused_with_the_config_key_to_add(
    stack: StackOutputs,
) -> None:
    with pytest.raises(CompileError) as caught:
        compile_job(template("europe-west4"), stack, RUN_ID)
    [problem] = caught.value.problems
    assert problem.path == "region"
    assert "runs jobs in us-central1, us-east4, not europe-west4" in problem.message
    assert "capacity_regions" in (problem.hint or "")


@pytest.mark.parametrize(
    ("own", "regional", "what"),
    [
        ({}, RegionOutputs(), "a PSC network attachment"),
        ({"kms_key": "projects/p/locations/us-central1/keyRings/k/cryptoKeys/k"},
         RegionOutputs(network_attachment=EAST), "a CMEK key"),
    ],
)  # fmt: skip
def test_a_further_region_missing_the_private_path_or_key_of_the_stacks_own_is_refused(
    stack: StackOutputs, own: dict[str, Any], regional: RegionOutputs, what: str
) -> None:
    lacking = stack.model_copy(update={**own, "regions": {"us-east4": regional}})
    with pytest.raises(CompileError) as caught:
        compile_job(template("us-east4"), lacking, RUN_ID)
    [problem] = caught.value.problems
    assert f"has {what} in us-central1 but none in us-east4" in problem.message


def test_a_regional_key_is_the_jobs_key(stack: StackOutputs) -> None:
    keyed = stack.model_copy(
        update={
            "kms_key": "projects/p/locations/us-central1/keyRings/k/cryptoKeys/k",
            "regions": {"us-east4": RegionOutputs(network_attachment=EAST, kms_key=EAST_KEY)},
        }
    )
    job = compile_job(template("us-east4"), keyed, RUN_ID)
    assert job.rest["encryptionSpec"] == {"kmsKeyName": EAST_KEY}


def test_jobs_are_read_at_their_own_regions_endpoint(stack: StackOutputs) -> None:
    name = "projects/123456789012/locations/us-east4/customJobs/7"
    assert region_of(name) == "us-east4"
    assert VertexRest(stack, session=object()).url(name) == (
        f"https://us-east4-aiplatform.googleapis.com/v1/{name}"
    )
    assert stack.job_regions == ["us-central1", "us-east4"]
