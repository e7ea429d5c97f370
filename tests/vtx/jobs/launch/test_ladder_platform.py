"""A capacity ladder end to end: `vtx launch` through the real client against a local platform
with a capacity model (as `vtx local up --capacity FILE` starts one). The first rung asks for a
region whose Spot L4 quota is zero (skipped before anything is sent), the second for Spot L4s
that the model stocks out, the third for on-demand L4s, which run. The run keeps one run id
across its attempts. Replicas are one-line programs; waits are on states, never on time."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from jobs.control.records import Records
from jobs.core.stack import StackOutputs
from jobs.local.platform.settings import DATA_DIR_ENV
from jobs.local.plumbing.client import preempt_replica, set_capacity
from jobs.vertex.job_records import JobRecord
from jobs.vertex.rest import VertexRest
from tests.conftest import HANG_S
from tests.jobs.local.local_helpers import capacity_platform, wait_for
from vtx.cli import app

SPOT_L4 = "aiplatform.googleapis.com/custom_model_training_preemptible_nvidia_l4_gpus"
MODEL = {
    "regions": {
        "us-central1": {
            "accelerators": {"NVIDIA_L4": {"spot_stockout": True}},
            "quotas": {SPOT_L4: 1},
        }
    }
}
"""Spot L4s stock out, and the Spot L4 quota is one GPU, in the region the platform runs."""
RUN_ID = "ladder-e2e-run"
TEMPLATE = {
    "name": "ladder-e2e",
    "image": "trainer",
    "command": ["python", "-c", "print('ran on the last rung')"],
    "pools": {"chief": {"machine": "g2-standard-24"}},
    "scheduling": {"strategy": "spot", "timeout": "10m"},
    "capacity": {
        "max_wait": "10m",
        "ladder": [
            {"set": {"pools.chief.machine": "g2-standard-4"}},
            {"set": {"pools.chief.machine": "g2-standard-4", "scheduling.strategy": "standard"}},
        ],
    },
}
"""Rung 1: two Spot L4s, over the quota (skipped); rung 2: one Spot L4 (stocks out); rung 3:
one on-demand L4 (runs)."""


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("ladder") / "platform"


@pytest.fixture(scope="module")
def platform(gcs_emulator: str, data_dir: Path) -> Iterator[StackOutputs]:
    with capacity_platform(data_dir, gcs_emulator, MODEL) as stack:
        yield stack


def vtx(*args: str, data_dir: Path | None = None) -> tuple[int, str]:
    env = {"COLUMNS": "200", **({DATA_DIR_ENV: str(data_dir)} if data_dir else {})}
    result = CliRunner().invoke(app, list(args), env=env)
    return result.exit_code, result.output


def _files(platform: StackOutputs, tmp_path: Path, template: dict) -> tuple[str, str]:
    stack_file = tmp_path / "stack.json"
    stack_file.write_text(platform.model_dump_json())
    path = tmp_path / "ladder.yaml"
    path.write_text(yaml.safe_dump(template))
    return str(path), str(stack_file)


def test_a_ladder_skips_an_over_quota_rung_moves_past_a_stockout_and_succeeds(
    platform: StackOutputs, tmp_path: Path
) -> None:
    template, stack_file = _files(platform, tmp_path, TEMPLATE)
    code, out = vtx(
        "launch", template, "--stack-file", stack_file, "--yes", "--run-id", RUN_ID,
        "--poll-s", "0.2",
    )  # fmt: skip
    assert code == 0, out
    assert "Capacity ladder" in out
    assert "rung 1 us-central1 2xL4 SPOT: skipped: quota limit 1 for" in out
    assert "rung 2 us-central1 1xL4 SPOT: submitted" in out  # then the launch returns
    assert "the stack's controller walks the run" in out

    # Nobody follows: the platform's controller moves past the stockout to rung 3.
    records = Records(platform)
    done = wait_for(lambda: (s := records.read(RUN_ID)) and s.record.outcome and s.record)
    assert done.outcome.state == "SUCCEEDED"
    moves = " ".join(m.what for m in done.moves)
    assert "submit rung 3 us-central1 1xL4 STANDARD as attempt a2: rung 2" in moves
    assert "STOCKOUT after" in moves
    rest = VertexRest(platform)
    wait_for(lambda: all(j.terminal for j in rest.list(RUN_ID)))
    attempts = rest.list(RUN_ID)  # newest first
    assert [j.state for j in attempts] == ["JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED"]
    assert "STOCKOUT" in (attempts[1].error or "")
    assert {j.run_id for j in attempts} == {RUN_ID}
    [prefix] = {j.output_prefix for j in attempts}
    assert prefix and f"/runs/{RUN_ID}/" in prefix

    code, listed = vtx("list", "--stack-file", stack_file, "--run-id", RUN_ID)
    assert code == 0, listed
    assert ("SUCCEEDED" in listed, "FAILED" in listed) == (True, True)


def test_a_ladder_whose_every_rung_is_over_quota_is_refused_naming_each(
    platform: StackOutputs, tmp_path: Path
) -> None:
    two_spot_l4s = {"set": {"scheduling.timeout": "20m"}}  # still 2 Spot L4s: over the quota
    template, stack_file = _files(
        platform, tmp_path, {**TEMPLATE, "name": "hopeless", "capacity": {"ladder": [two_spot_l4s]}}
    )
    code, out = vtx("launch", template, "--stack-file", stack_file, "--yes")
    assert code == 1, out
    assert "every rung is over a quota limit: rung 1: quota limit 1 for" in out
    assert "rung 2: quota limit 1 for" in out
    assert not [j for j in VertexRest(platform).list() if j.display_name.startswith("hopeless")]


REGION_TEMPLATE = {
    **TEMPLATE,
    "name": "ladder-regions",
    "pools": {"chief": {"machine": "g2-standard-4"}},
    "capacity": {"max_wait": "10m", "ladder": [{"region": "us-east4"}]},
}
"""One Spot L4 in us-central1 (stocked out), then the same in us-east4, which has Spot L4s."""


def test_a_ladder_moves_to_another_region_and_the_run_spans_both(
    platform: StackOutputs, data_dir: Path, tmp_path: Path
) -> None:
    run_id = "ladder-regions-run"
    template, stack_file = _files(platform, tmp_path, REGION_TEMPLATE)
    code, out = vtx(
        "launch", template, "--stack-file", stack_file, "--yes", "--run-id", run_id,
        "--poll-s", "0.2",
    )  # fmt: skip
    assert code == 0, out
    assert "rung 1 us-central1 1xL4 SPOT: submitted" in out  # the controller walks on
    records = Records(platform)
    done = wait_for(lambda: (s := records.read(run_id)) and s.record.outcome and s.record)
    assert "submit rung 2 us-east4 1xL4 SPOT as attempt a2: rung 1" in " ".join(
        m.what for m in done.moves
    )
    rest = VertexRest(platform)
    wait_for(lambda: all(j.terminal for j in rest.list(run_id)))
    attempts = rest.list(run_id)  # newest first, from every region of the stack
    assert [(j.region, j.state) for j in attempts] == [
        ("us-east4", "JOB_STATE_SUCCEEDED"),
        ("us-central1", "JOB_STATE_FAILED"),
    ]
    assert len({j.output_prefix for j in attempts}) == 1  # one run, one prefix
    # The platform keeps each region's jobs apart, as Vertex's regional endpoints do.
    central = rest.pages("us-central1", "customJobs", {"filter": f'labels.vtx-run-id="{run_id}"'})
    assert [JobRecord.from_rest(j).region for j in central] == ["us-central1"]

    # `vtx status` finds the run's attempts in both regions (the local stack's token comes from
    # the platform's data directory: a stack file never holds it).
    code, shown = vtx("status", run_id, "--stack", "local", data_dir=data_dir)
    assert code == 0, shown
    assert "us-east4" in shown and "us-central1" in shown
    code, by_id = vtx("status", attempts[0].job_id, "--stack", "local", data_dir=data_dir)
    assert code == 0 and run_id in by_id, by_id


STOCKED_OUT_LATER = {
    "name": "ladder-later",
    "image": "trainer",
    "command": ["python", "-c", "import os, time; time.sleep(float(os.environ['NAP']))"],
    "env": {"NAP": "300"},  # past any wait for its stockout: it never ends by itself
    "pools": {"chief": {"machine": "n1-standard-4", "accelerator": "NVIDIA_TESLA_T4"}},
    "scheduling": {"strategy": "spot", "timeout": "10m"},
    "capacity": {"max_wait": "10m", "ladder": [{"region": "us-east4", "set": {"env.NAP": "0"}}]},
}
"""A Spot T4 in us-central1 that runs until Spot T4s stock out under it; then us-east4."""


def test_a_running_spot_attempt_that_stocks_out_moves_down_the_ladder_when_followed(
    platform: StackOutputs, data_dir: Path, tmp_path: Path
) -> None:
    run_id = "ladder-later-run"
    template, _ = _files(platform, tmp_path, STOCKED_OUT_LATER)
    endpoint, token = platform.vertex_endpoint or "", platform.local_token or ""
    launched: dict[str, tuple[int, str]] = {}
    launch = threading.Thread(
        target=lambda: launched.setdefault(
            "result",
            vtx("launch", template, "--stack", "local", "--yes", "--run-id", run_id,
                "--poll-s", "0.2", "--follow", data_dir=data_dir),
        )
    )  # fmt: skip
    launch.start()
    rest = VertexRest(platform)
    try:
        running = wait_for(
            lambda: [j for j in rest.list(run_id) if j.state == "JOB_STATE_RUNNING"]
        )[0]
        stocked_out = {"NVIDIA_TESLA_T4": {"spot_stockout": True}}
        set_capacity(endpoint, token, {"regions": {"us-central1": {
            **MODEL["regions"]["us-central1"],
            "accelerators": {**MODEL["regions"]["us-central1"]["accelerators"], **stocked_out},
        }}})  # fmt: skip
        preempt_replica(endpoint, token, running.name, wait_s=30)
        launch.join(timeout=HANG_S)
    finally:
        set_capacity(endpoint, token, MODEL)
    code, out = launched["result"]
    assert code == 0, out
    # The controller walks the ladder; --follow prints its moves as the run's record gains them.
    assert "rung 1 us-central1 1xT4 SPOT: submitted" in out
    assert (
        "controller: submit rung 2 us-east4 1xT4 SPOT as attempt a2: "
        "rung 1 us-central1 1xT4 SPOT: STOCKOUT while running" in out
    )
    assert "controller: submitted projects/424242424242/locations/us-east4/" in out
    assert "controller: the run ended SUCCEEDED" in out
    assert f"run {run_id}: SUCCEEDED" in out
    attempts = rest.list(run_id)
    assert [(j.region, j.state) for j in attempts] == [
        ("us-east4", "JOB_STATE_SUCCEEDED"),
        ("us-central1", "JOB_STATE_FAILED"),
    ]
    assert "STOCKOUT" in (attempts[1].error or "")


HELD = {
    "regions": {
        "us-central1": {
            "accelerators": {"NVIDIA_L4": {"spot": 0}},
            "quotas": MODEL["regions"]["us-central1"]["quotas"],
        }
    }
}
"""No Spot L4 free (nor stocked out): rung 2 waits PENDING until the model says otherwise."""


def test_a_ladder_whose_launcher_is_killed_after_the_submit_is_walked_by_the_controller(
    platform: StackOutputs, tmp_path: Path
) -> None:
    """`vtx launch --follow` as a real process, killed with SIGKILL once the run's record names
    its first attempt's job: the platform's own controller, not the launcher, walks the run to
    its last rung. Rung 2 is held PENDING until the launcher is dead, so the stockout the
    controller moves past comes only after the kill, whatever the machine's speed."""
    run_id = "ladder-killed-run"
    template, stack_file = _files(platform, tmp_path, {**TEMPLATE, "name": "ladder-killed"})
    endpoint, token = platform.vertex_endpoint or "", platform.local_token or ""
    records = Records(platform)
    set_capacity(endpoint, token, HELD)
    try:
        with (tmp_path / "launch.out").open("w") as output:
            launcher = subprocess.Popen(
                [sys.executable, "-m", "vtx", "launch", template, "--stack-file", stack_file,
                 "--yes", "--run-id", run_id, "--poll-s", "0.2", "--follow"],
                stdout=output, stderr=subprocess.STDOUT, env={**os.environ, "COLUMNS": "200"},
            )  # fmt: skip
            try:
                submitted = wait_for(
                    lambda: (s := records.read(run_id)) and s.record.attempts
                    and s.record.attempts[0].job and s.record
                )  # fmt: skip
            finally:
                launcher.kill()  # SIGKILL: no handler, no cleanup
                launcher.wait(timeout=HANG_S)
        assert launcher.returncode == -signal.SIGKILL
        first = submitted.attempts[0].job
        rest = VertexRest(platform)
        assert rest.get(first).state == "JOB_STATE_PENDING"
        killed = records.read(run_id)
        assert killed is not None and killed.record.outcome is None
        assert [a.marker for a in killed.record.attempts] == ["a1"]
    finally:
        set_capacity(endpoint, token, MODEL)  # Spot L4s stock out: rung 2 fails now
    done = wait_for(lambda: (s := records.read(run_id)) and s.record.outcome and s.record)
    assert done.outcome.state == "SUCCEEDED", (done.outcome, (tmp_path / "launch.out").read_text())
    moves = " ".join(m.what for m in done.moves)
    assert "submit rung 3 us-central1 1xL4 STANDARD as attempt a2: rung 2" in moves
    assert "STOCKOUT" in moves
    wait_for(lambda: all(j.terminal for j in rest.list(run_id)))
    attempts = rest.list(run_id)  # newest first: one job per rung tried
    assert [j.state for j in attempts] == ["JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED"]
    assert attempts[1].name == first
    assert [a.marker for a in done.attempts] == ["a1", "a2"]
