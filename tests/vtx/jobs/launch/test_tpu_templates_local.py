"""The shipped TPU templates launched on the local platform as jobs/templates/README.md ("TPUs")
says to rehearse them: `vtx launch TEMPLATE --stack local --set args.0=...` swaps MaxText (not
installed here) for jobs/local/custom_jobs/tpu_host_check.py and keeps everything else. Every host
of the slice runs it, checks its TPU variables and CLUSTER_SPEC and reaches host 0, so the job
succeeds only when the slice ran as one process per host with a consistent environment."""

from __future__ import annotations

import shlex

import pytest
from typer.testing import CliRunner

from jobs.core.stack import StackOutputs
from jobs.vertex.rest import VertexRest
from tests.conftest import REPO
from tests.jobs.local.local_helpers import replica_output
from vtx.cli import app

README = REPO / "jobs" / "templates" / "README.md"
REHEARSAL = (
    "vtx launch jobs/templates/{template} --stack local --follow "
    "--set 'args.0=python3 -m jobs.local.custom_jobs.tpu_host_check --hosts {hosts}'"
)
"""The README's line for each template, as the user types it from the repository root."""


@pytest.mark.parametrize(
    ("template", "machine", "hosts"),
    [
        ("v5e-lora.yaml", "ct5lp-hightpu-4t", 1),  # 2x2: 4 chips on one VM
        ("v5e-slice.yaml", "ct5lp-hightpu-4t", 4),  # 4x4: 16 chips on 4 VMs
        ("tpu-v2-pod.yaml", "cloud-tpu", 4),  # 32 TPU v2 cores: 4 VMs of 8
    ],
)
def test_a_tpu_template_runs_its_slice_as_a_process_per_host_locally(
    local_platform: StackOutputs, template: str, machine: str, hosts: int
) -> None:
    command = REHEARSAL.format(template=template, hosts=hosts)
    assert command in README.read_text(), "the README's rehearsal line is what this test runs"
    run_id = f"rehearse-{template.removesuffix('.yaml')}"
    _, launch, path, *rest = shlex.split(command)  # the path is the repository root's
    argv = [launch, str(REPO / path), *rest, "--yes", "--run-id", run_id, "--poll-s", "0.2"]
    result = CliRunner(env={"COLUMNS": "200"}).invoke(app, argv)
    assert result.exit_code == 0, result.output
    assert "JOB_STATE_SUCCEEDED" in result.output

    [job] = VertexRest(local_platform).list(run_id)
    assert job.state == "JOB_STATE_SUCCEEDED"
    # Only the program changed: the template's machine and its one replica went to the platform.
    [pool] = job.rest["jobSpec"]["workerPoolSpecs"]
    assert (pool["machineSpec"]["machineType"], int(pool["replicaCount"])) == (machine, 1)
    assert pool["containerSpec"]["command"] == ["bash", "-c"]
    for worker in range(hosts):
        said = replica_output(local_platform, job.name, f"workerpool0-{worker}")
        assert f"TPU host {worker} of {hosts}: environment checked" in said, said
    assert not replica_output(local_platform, job.name, f"workerpool0-{hosts}")
    assert "TPU host 0: every host of" in "\n".join(
        replica_output(local_platform, job.name, "workerpool0-0")
    )
