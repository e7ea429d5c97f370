"""Launching against the local platform's capacity: stockouts and quota as the CLI shows them."""

from __future__ import annotations

from pathlib import Path

import yaml
from typer.testing import CliRunner

from jobs.core.stack import StackOutputs
from tests.jobs.local.local_helpers import (
    PARENT,
    client,
    wait_for,
    wait_terminal,
)
from tests.jobs.local.platform.capacity_helpers import (
    REGION,
    SUCCEEDED,
    l4_job,
    service,
    waiting,
)
from vtx.cli import app


def test_flex_start_waits_until_capacity_set_at_run_time_frees_it(
    capacity_stack: StackOutputs, capacity_dir: Path, capacity, tmp_path: Path
) -> None:
    capacity({"regions": {REGION: {"accelerators": {"NVIDIA_L4": {"on_demand": 0}}}}})
    jobs = client(capacity_stack.vertex_endpoint)
    flex = {"strategy": "FLEX_START", "max_wait_duration": "0s"}  # 0: wait indefinitely
    job = jobs.create_custom_job(
        parent=PARENT, custom_job=l4_job("flex", "print('ran')", scheduling=flex)
    )
    wait_for(lambda: waiting(capacity_stack, jobs, job.name))
    assert any("indefinitely" in m for m in service(capacity_stack, job.name))

    freed = tmp_path / "capacity.yaml"
    freed.write_text(
        yaml.safe_dump({"regions": {REGION: {"accelerators": {"NVIDIA_L4": {"on_demand": 1}}}}})
    )
    result = CliRunner().invoke(
        app, ["local", "capacity", "set", str(freed), "--data-dir", str(capacity_dir)]
    )
    assert result.exit_code == 0, result.output
    assert "on_demand: 1" in result.output

    done = wait_terminal(jobs, job.name)
    assert done.state == SUCCEEDED, done.error
    assert "resources are available: starting" in service(capacity_stack, job.name)
