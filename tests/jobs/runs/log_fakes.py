"""Log entries and fake log sources, for the log tests and the CLI's."""

from __future__ import annotations

import secrets
import time

import pytest

from jobs.core.stack import StackOutputs
from jobs.vertex.client import Vertex, is_terminal
from tests.conftest import HANG_S

PRINTS = (
    "import json; "
    "print(json.dumps({'severity': 'INFO', 'message': 'training', 'rank': 0, 'total_steps': 9})); "
    "print(json.dumps({'severity': 'INFO', 'message': 'train', 'rank': 0, 'step': 3, "
    "'loss': 1.5, 'lr': 0.001, 'tokens_per_s': 2500.0})); "
    "print(json.dumps({'severity': 'WARNING', 'message': 'slow disk', 'rank': 0}))"
)


@pytest.fixture(scope="module")
def finished_run(local_platform: StackOutputs) -> str:
    """A run id whose one job printed the trainer's kind of lines and succeeded: one run per test
    module, since the modules that ask for it may share a platform (one xdist worker's)."""
    from google.cloud import aiplatform_v1

    pool = {
        "machine_spec": {"machine_type": "n1-standard-4"},
        "replica_count": 1,
        "container_spec": {"image_uri": "img", "command": ["python", "-c", PRINTS]},
    }
    run_id = f"logs-format-{secrets.token_hex(3)}"
    vertex = Vertex(local_platform)
    job = vertex.create(
        aiplatform_v1.CustomJob(
            display_name="fmt",
            job_spec={"worker_pool_specs": [pool]},
            labels={"vtx-run-id": run_id},
        )
    )
    deadline = time.monotonic() + HANG_S  # only catches a hang
    while not is_terminal(vertex.get(job.name)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return run_id
