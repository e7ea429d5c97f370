"""`vtx local preempt` on a platform of its own whose grace period (300 s) outlasts the test, so
the window after a preemption is still open when the second one is asked for, whatever the
machine's load: the second is refused with a warning naming the first, and exit 1."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from jobs.core.stack import StackOutputs
from jobs.local.platform.settings import LocalSettings
from jobs.local.platform.state import stack_outputs_for
from jobs.local.plumbing.ports import free_port
from jobs.local.plumbing.processes import start_fresh, stop_platform
from tests.conftest import REPO
from tests.jobs.local.local_helpers import (
    PARENT,
    client,
    custom_job,
    pool,
    replica_output,
    wait_for,
)
from vtx.cli import app

SLEEP = "import time; print('up', flush=True); time.sleep(600)"


@pytest.fixture
def slow_grace_platform(gcs_emulator: str, tmp_path: Path) -> Iterator[StackOutputs]:
    repo = REPO
    settings = LocalSettings(
        data_dir=tmp_path / "platform", cwd=repo, port=free_port(), grace_s=300.0
    )
    state = start_fresh(settings, gcs_endpoint=gcs_emulator)
    try:
        yield stack_outputs_for(state)
    finally:
        stop_platform(settings.data_dir)  # the sleepers die on SIGTERM: no grace is waited


def _preempt(platform_dir: Path, *args: str):
    result = CliRunner().invoke(app, ["local", "preempt", *args, "--data-dir", str(platform_dir)])
    assert "Traceback" not in result.output
    return result, " ".join(result.output.split())


def test_a_second_preemption_during_the_first_is_refused_with_a_warning(
    slow_grace_platform: StackOutputs, tmp_path: Path
) -> None:
    jobs = client(slow_grace_platform.vertex_endpoint)
    job = jobs.create_custom_job(
        parent=PARENT, custom_job=custom_job("twice", pool(SLEEP), pool(SLEEP))
    )
    wait_for(lambda: replica_output(slow_grace_platform, job.name, "workerpool1-0"))
    platform_dir = tmp_path / "platform"

    first, out = _preempt(platform_dir, job.name)  # no --replica: the last one
    assert first.exit_code == 0, out
    assert "preempting workerpool1-0" in out

    wrong, out = _preempt(platform_dir, job.name, "--replica", "workerpool9-0")
    assert wrong.exit_code == 1  # a wrong name is said before the job's state
    assert "no replica 'workerpool9-0'" in out
    second, out = _preempt(platform_dir, job.name, "--replica", "workerpool0-0")
    assert second.exit_code == 1, out
    assert "warning: not preempted" in out
    assert "still going through the preemption of workerpool1-0" in out
    assert "try again in" in out
    service = replica_output(slow_grace_platform, job.name, "service")
    assert [line for line in service if line.startswith("preempting")] == [
        "preempting workerpool1-0 (requested): SIGTERM now, SIGKILL in 300 s"
    ]
