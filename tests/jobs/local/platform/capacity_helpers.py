"""A local platform with a capacity model, and its jobs: for the capacity tests and the CLI's."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from jobs.core.stack import StackOutputs
from jobs.local.plumbing.client import set_capacity
from tests.jobs.local.local_helpers import (
    capacity_platform,
    custom_job,
    replica_output,
)

PENDING, SUCCEEDED, FAILED = 2, 4, 5  # JobState numbers, as the SDK reads them

REGION = "us-central1"


L4 = "aiplatform.googleapis.com/custom_model_training_nvidia_l4_gpus"


START = {"regions": {REGION: {"quotas": {L4: 2}}}}
"""The model the platform starts with: an on-demand L4 quota of 2, nothing else limited."""


G2_WITH_L4S = {1: "g2-standard-4", 2: "g2-standard-24", 4: "g2-standard-48"}


def l4_job(name: str, code: str, gpus: int = 1, scheduling: dict | None = None):
    """One replica on a G2 machine with ``gpus`` L4s."""
    pool = {
        "machine_spec": {
            "machine_type": G2_WITH_L4S[gpus],
            "accelerator_type": "NVIDIA_L4",
            "accelerator_count": gpus,
        },
        "replica_count": 1,
        "container_spec": {"image_uri": "local/test:1", "command": ["python", "-c", code]},
    }
    return custom_job(name, pool, scheduling=scheduling)


def service(platform: StackOutputs, name: str) -> list[str]:
    return replica_output(platform, name, "service")


def waiting(platform: StackOutputs, jobs, name: str) -> bool:
    """PENDING, and the service log says it waits for resources."""
    pending = jobs.get_custom_job(name=name).state == PENDING
    return pending and any("waiting for resources" in m for m in service(platform, name))


@pytest.fixture(scope="module")
def capacity_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("capacity") / "platform"


@pytest.fixture(scope="module")
def capacity_stack(gcs_emulator: str, capacity_dir: Path) -> Iterator[StackOutputs]:
    with capacity_platform(capacity_dir, gcs_emulator, START) as stack:
        yield stack


@pytest.fixture
def capacity(capacity_stack: StackOutputs) -> Iterator[object]:
    """Sets the platform's capacity for one test, and puts the starting model back after it."""

    def put(model: dict) -> dict:
        return set_capacity(
            capacity_stack.vertex_endpoint or "", capacity_stack.local_token or "", model
        )

    yield put
    put(START)
