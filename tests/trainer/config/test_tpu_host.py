"""`python -m trainer` is PyTorch on CUDA GPUs: on a TPU host it stops at once and says what to
run instead, rather than start a CPU-only run the job would be billed TPU prices for."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import HANG_S, REPO
from trainer.config.env import tpu_host


def cluster_spec(machine: dict) -> str:
    job = {"workerPoolSpecs": [{"machineSpec": machine, "replicaCount": "1"}]}
    task = {"type": "workerpool0", "index": 0}
    return json.dumps({"cluster": {"workerpool0": ["h:1"]}, "task": task, "job": json.dumps(job)})


V5E = {"machineType": "ct5lp-hightpu-4t", "tpuTopology": "2x2"}


@pytest.mark.parametrize(
    ("environ", "reason"),
    [
        ({"TPU_WORKER_ID": "0"}, "TPU_WORKER_ID is set"),
        (
            {"CLUSTER_SPEC": cluster_spec(V5E)},
            "its pool's machine is ct5lp-hightpu-4t",
        ),
        (
            {"CLUSTER_SPEC": cluster_spec({"machineType": "cloud-tpu", "acceleratorCount": 8})},
            "its pool's machine is cloud-tpu",
        ),
        ({"CLUSTER_SPEC": cluster_spec({"machineType": "g2-standard-8"})}, None),
        ({}, None),
    ],
)  # fmt: skip
def test_a_tpu_host_is_told_by_its_variables_or_its_pools_machine(
    environ: dict, reason: str | None
) -> None:
    assert tpu_host(environ) == reason


@pytest.mark.parametrize("module", ["trainer", "trainer.launch"])
def test_the_trainer_stops_on_a_tpu_host_and_names_what_to_run(module: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TPU_", "CLUSTER_SPEC"))}
    env |= {"TPU_WORKER_ID": "0", "TPU_WORKER_HOSTNAMES": "h0,h1", "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-m", module, "--config", "trainer/examples/tiny-lora.yaml"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=HANG_S, check=False,
    )  # fmt: skip
    said = done.stderr + done.stdout  # trainer.launch logs its JSON lines to stdout
    assert done.returncode == 2, said
    assert "this is a TPU host (TPU_WORKER_ID is set)" in said
    assert "no TPU (XLA) path" in said and "MaxText" in said
