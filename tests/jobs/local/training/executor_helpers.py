"""Replica programs and service lines, for the executor tests and the CLI's."""

from __future__ import annotations

from jobs.core.stack import StackOutputs
from tests.jobs.local.local_helpers import (
    replica_output,
)

SLEEP = "import time; print('up', flush=True); time.sleep(600)"


def service_lines(platform: StackOutputs, job_name: str) -> list[str]:
    return replica_output(platform, job_name, "service")
