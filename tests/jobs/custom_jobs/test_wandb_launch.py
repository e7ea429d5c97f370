"""`vtx render --format wandb-launch`: a template as the Vertex resource args of a W&B Launch
queue. Checked against the installed wandb's Vertex runner (the keys it reads) and the real
CustomJobSpec proto (the pools it hands to the SDK); what the runner cannot carry is named."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

from jobs.core.stack import StackOutputs
from jobs.custom_jobs.compile import compile_job
from jobs.custom_jobs.wandb_launch import IMAGE_MACRO, launch_queue_config
from jobs.spec.gcloud import load_template
from tests.conftest import TEMPLATES

RUN_ID = "wandb-launch-run"


def _runner_keys() -> tuple[set[str], set[str]]:
    """The keys wandb's Vertex runner reads from the queue config's ``spec`` and ``run``."""
    # Read, not imported: importing it wants wandb[launch]'s google-cloud-compute.
    spec = importlib.util.find_spec("wandb")
    assert spec is not None and spec.origin is not None
    source = (Path(spec.origin).parent / "sdk/launch/runner/vertex_runner.py").read_text()
    spec_keys = set(re.findall(r'spec_args\.get\(\s*"(\w+)"', source))
    run_keys = set(re.findall(r'run_args\.get\(\s*"(\w+)"', source))
    return spec_keys, run_keys


@pytest.mark.parametrize("name", ["l4-spot-lora.yaml", "a100x16-fsdp.yaml", "smoke-cpu.yaml"])
def test_the_queue_config_uses_only_keys_wandbs_vertex_runner_reads(
    stack: StackOutputs, name: str
) -> None:
    from google.cloud import aiplatform_v1

    job = compile_job(load_template(TEMPLATES / name), stack, RUN_ID)
    config = launch_queue_config(job.rest, stack).config
    spec_keys, run_keys = _runner_keys()
    assert {"worker_pool_specs", "staging_bucket", "labels"} <= spec_keys  # the parse found them
    assert set(config["spec"]) <= spec_keys
    assert set(config["run"]) <= run_keys
    # The pools are what the SDK's CustomJob takes: the real proto accepts them as written.
    spec = aiplatform_v1.CustomJobSpec(worker_pool_specs=config["spec"]["worker_pool_specs"])
    compiled = job.rest["jobSpec"]["workerPoolSpecs"]
    assert len(spec.worker_pool_specs) == len(compiled)
    first = spec.worker_pool_specs[0]
    assert first.machine_spec.machine_type == compiled[0]["machineSpec"]["machineType"]
    assert first.replica_count == int(compiled[0]["replicaCount"])
    assert first.container_spec.image_uri == IMAGE_MACRO
    assert not first.container_spec.command and not first.container_spec.args


def test_what_the_runner_cannot_carry_is_named(stack: StackOutputs) -> None:
    job = compile_job(load_template(TEMPLATES / "l4-spot-lora.yaml"), stack, RUN_ID)
    queue = launch_queue_config(job.rest, stack)
    notes = " ".join(queue.notes)
    assert "scheduling.strategy SPOT is not passed" in notes
    assert "PSC interface (network attachment) is not passed" in notes
    assert f"vtx run {RUN_ID}" in notes
    assert queue.config["run"]["service_account"] == stack.trainer_service_account
    assert queue.config["spec"]["base_output_dir"].endswith(f"/runs/{RUN_ID}/")
