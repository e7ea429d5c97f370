"""A capacity ladder from a TPU slice to a GPU, end to end: `vtx launch` of
jobs/templates/v5e-or-l4.yaml through the real client against a local platform whose capacity
model stocks out Spot TPU v5e (or gives the project no v5e quota). The walk leaves the v5e rung
for the L4 rung, which runs, and `vtx status` / `vtx list` show both attempts under one run id,
each with what it ran on. Only the programs are swapped (`--set`), as jobs/templates/README.md
rehearses TPU templates: MaxText is not installed here, and the L4 rung's trainer would fetch a
model."""

from __future__ import annotations

import shlex
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from jobs.control.record import RunRecord
from jobs.control.records import Records
from jobs.core.stack import StackOutputs
from jobs.local.platform.settings import DATA_DIR_ENV
from jobs.local.plumbing.client import set_capacity
from jobs.vertex.job_records import JobRecord
from jobs.vertex.rest import VertexRest
from tests.conftest import TEMPLATES
from tests.jobs.local.local_helpers import capacity_platform, replica_output, wait_for
from vtx.cli import app

SPOT_V5E = "aiplatform.googleapis.com/custom_model_training_preemptible_tpu_v5e"
STOCKED_OUT = {
    "regions": {"us-central1": {"accelerators": {"TPU_V5_LITEPOD": {"spot_stockout": True}}}}
}
"""Spot TPU v5e stocks out in the region the platform runs; L4s are there."""
NO_QUOTA = {"regions": {"us-central1": {"quotas": {SPOT_V5E: 0}}}}
"""The project never asked for Spot v5e chips in the region."""
README = (TEMPLATES / "README.md").read_text()


def rehearsal_sets() -> list[str]:
    """The `--set` options of the README's `vtx launch jobs/templates/v5e-or-l4.yaml` block:
    rung 1 runs the TPU host check, rung 2 (set through the ladder, since `--set` changes the
    base every rung starts from) a program that prints whether it sees a TPU variable."""
    block = README.split("vtx launch jobs/templates/v5e-or-l4.yaml", 1)[1].split("```", 1)[0]
    words = shlex.split(block.replace("\\\n", " "))
    sets = [w for i, w in enumerate(words) if "--set" in (w, words[i - 1])]
    assert sets[::2] == ["--set"] * 3, block
    return sets


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("tpu-ladder") / "platform"


@pytest.fixture(scope="module")
def platform(gcs_emulator: str, data_dir: Path) -> Iterator[StackOutputs]:
    with capacity_platform(data_dir, gcs_emulator, STOCKED_OUT) as stack:
        yield stack


def vtx(data_dir: Path, *args: str) -> tuple[int, str]:
    env = {"COLUMNS": "200", DATA_DIR_ENV: str(data_dir)}
    result = CliRunner().invoke(app, list(args), env=env)
    return result.exit_code, result.output


def launch(data_dir: Path, run_id: str) -> tuple[int, str]:
    return vtx(
        data_dir, "launch", str(TEMPLATES / "v5e-or-l4.yaml"), "--stack", "local", "--yes",
        "--run-id", run_id, "--poll-s", "0.2", *rehearsal_sets(),
    )  # fmt: skip


def ended(platform: StackOutputs, run_id: str) -> RunRecord:
    """The run's record once the platform's controller has recorded its end (it walks the
    ladder: the launch returns after the first attempt)."""
    records = Records(platform)
    return wait_for(lambda: (s := records.read(run_id)) and s.record.outcome and s.record)


def ended_attempts(platform: StackOutputs, run_id: str) -> list[JobRecord]:
    """The run's attempts, newest first, once the run and each of them have ended."""
    ended(platform, run_id)
    rest = VertexRest(platform)
    wait_for(lambda: all(j.terminal for j in rest.list(run_id)))
    return rest.list(run_id)


def test_a_stocked_out_v5e_slice_falls_back_to_an_l4_which_runs(
    platform: StackOutputs, data_dir: Path
) -> None:
    run_id = "v5e-or-l4-stockout"
    code, out = launch(data_dir, run_id)
    assert code == 0, out
    assert "rung 1 us-central1 4xTPU_V5_LITEPOD SPOT: submitted" in out  # then it returns
    record = ended(platform, run_id)
    assert record.outcome is not None and record.outcome.succeeded
    moves = [m.what for m in record.moves]
    assert (
        "submit rung 2 us-central1 1xL4 STANDARD as attempt a2: "
        "rung 1 us-central1 4xTPU_V5_LITEPOD SPOT: STOCKOUT after 0 s"
    ) in moves, moves

    on_l4, on_v5e = ended_attempts(platform, run_id)
    assert (on_l4.state, on_v5e.state) == ("JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED")
    assert "STOCKOUT: Spot capacity for TPU_V5_LITEPOD" in (on_v5e.error or "")
    assert on_l4.output_prefix == on_v5e.output_prefix  # one run, one prefix
    # The rung changed accelerator family: an L4 machine, no topology, vtx's trainer image.
    [pool] = on_l4.rest["jobSpec"]["workerPoolSpecs"]
    assert pool["machineSpec"] == {
        "machineType": "g2-standard-8", "acceleratorType": "NVIDIA_L4", "acceleratorCount": 1,
    }  # fmt: skip
    assert pool["containerSpec"]["imageUri"].endswith("/trainer:latest")
    said = replica_output(platform, on_l4.name, "workerpool0-0")
    assert "L4 rung, TPU_WORKER_ID: None" in said, said

    # `vtx status` and `vtx list` show the move, the slice read as the GPU is.
    code, shown = vtx(data_dir, "status", run_id, "--stack", "local")
    assert code == 0, shown
    attempts = shown.split("attempts (one CustomJob each)", 1)[1]
    assert "1 x ct5lp-hightpu-4t + 4 x TPU_V5_LITEPOD" in attempts
    assert "1 x g2-standard-8 + 1 x NVIDIA_L4" in attempts
    code, listed = vtx(data_dir, "list", "--run-id", run_id, "--stack", "local")
    assert code == 0, listed
    assert "1 x ct5lp-hightpu-4t + 4 x TPU_V5_LITEPOD" in listed


def test_a_v5e_slice_without_quota_is_skipped_for_the_l4(
    platform: StackOutputs, data_dir: Path
) -> None:
    run_id = "v5e-or-l4-no-quota"
    endpoint, token = platform.vertex_endpoint or "", platform.local_token or ""
    set_capacity(endpoint, token, NO_QUOTA)
    try:
        code, out = launch(data_dir, run_id)
    finally:
        set_capacity(endpoint, token, STOCKED_OUT)
    assert code == 0, out
    assert (
        "rung 1 us-central1 4xTPU_V5_LITEPOD SPOT: skipped: zero quota for "
        "custom_model_training_preemptible_tpu_v5e in us-central1 (needs 4)"
    ) in out
    assert "rung 1 us-central1 4xTPU_V5_LITEPOD SPOT: submitting" not in out
    [on_l4] = ended_attempts(platform, run_id)
    assert on_l4.state == "JOB_STATE_SUCCEEDED"
    assert on_l4.pools[0].accelerator == "NVIDIA_L4"
