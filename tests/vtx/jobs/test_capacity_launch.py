"""Launching against the local platform's capacity: stockouts and quota as the CLI shows them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from jobs.core.stack import StackOutputs
from jobs.local.platform.client import set_capacity
from tests.jobs.local.local_helpers import (
    PARENT,
    capacity_platform,
    client,
    wait_for,
    wait_terminal,
)
from tests.jobs.local.platform.capacity_helpers import (
    REGION,
    START,
    SUCCEEDED,
    l4_job,
    service,
    waiting,
)
from vtx.cli import app


@pytest.fixture(scope="module")
def platform_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("capacity") / "platform"


@pytest.fixture(scope="module")
def platform(gcs_emulator: str, platform_dir: Path) -> Iterator[StackOutputs]:
    with capacity_platform(platform_dir, gcs_emulator, START) as stack:
        yield stack


@pytest.fixture
def capacity(platform: StackOutputs) -> Iterator[object]:
    """Sets the platform's capacity for one test, and puts the starting model back after it."""

    def put(model: dict) -> dict:
        return set_capacity(platform.vertex_endpoint or "", platform.local_token or "", model)

    yield put
    put(START)


def test_flex_start_waits_until_capacity_set_at_run_time_frees_it(
    platform: StackOutputs, platform_dir: Path, capacity, tmp_path: Path
) -> None:
    capacity({"regions": {REGION: {"accelerators": {"NVIDIA_L4": {"on_demand": 0}}}}})
    jobs = client(platform.vertex_endpoint)
    flex = {"strategy": "FLEX_START", "max_wait_duration": "0s"}  # 0: wait indefinitely
    job = jobs.create_custom_job(
        parent=PARENT, custom_job=l4_job("flex", "print('ran')", scheduling=flex)
    )
    wait_for(lambda: waiting(platform, jobs, job.name))
    assert any("indefinitely" in m for m in service(platform, job.name))

    freed = tmp_path / "capacity.yaml"
    freed.write_text(
        yaml.safe_dump({"regions": {REGION: {"accelerators": {"NVIDIA_L4": {"on_demand": 1}}}}})
    )
    result = CliRunner().invoke(
        app, ["local", "capacity", "set", str(freed), "--data-dir", str(platform_dir)]
    )
    assert result.exit_code == 0, result.output
    assert "on_demand: 1" in result.output

    done = wait_terminal(jobs, job.name)
    assert done.state == SUCCEEDED, done.error
    assert "resources are available: starting" in service(platform, job.name)
