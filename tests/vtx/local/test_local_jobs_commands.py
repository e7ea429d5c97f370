"""The local platform's jobs through the CLI: launch, status, cancel."""

from __future__ import annotations

from jobs.core.stack import StackOutputs
from tests.jobs.local.custom_jobs.executor_helpers import SLEEP, service_lines
from tests.jobs.local.local_helpers import (
    PARENT,
    client,
    custom_job,
    pool,
    replica_output,
    wait_for,
    wait_terminal,
)


def test_vtx_local_preempt_hits_the_named_replica(local_platform: StackOutputs) -> None:
    from typer.testing import CliRunner

    from vtx.cli import app

    jobs = client(local_platform.vertex_endpoint)
    job = jobs.create_custom_job(
        parent=PARENT, custom_job=custom_job("cli-preempt", pool(SLEEP), pool(SLEEP))
    )
    wait_for(lambda: replica_output(local_platform, job.name, "workerpool1-0"))
    result = CliRunner().invoke(app, ["local", "preempt", job.name, "--replica", "workerpool1-0"])
    assert result.exit_code == 0, result.output
    assert "preempting workerpool1-0" in result.output
    wrong = CliRunner().invoke(app, ["local", "preempt", job.name, "--replica", "workerpool9-0"])
    assert wrong.exit_code == 1
    assert "no replica 'workerpool9-0'" in " ".join(wrong.output.split())
    wait_for(
        lambda: (
            "workerpool1-0 preempted; restarting workerpool1-0"
            in service_lines(local_platform, job.name)
        )
    )
    jobs.cancel_custom_job(name=job.name)
    assert wait_terminal(jobs, job.name).state == 7
