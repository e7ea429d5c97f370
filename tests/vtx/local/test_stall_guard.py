"""Progress guards end to end on the local platform: the real trainer's heartbeat, `vtx local
stall` (its replica SIGSTOPped: alive, no more steps), the controller beside the platform
cancelling the run with nobody following, and `vtx status` saying why; and a run that is only
starting or restoring for longer than the guard's span, left alone."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml

from jobs.control.records import Records
from jobs.core.heartbeat import HEARTBEAT_OBJECT, Heartbeat, Phase
from jobs.core.stack import RUNS_PREFIX, StackOutputs
from jobs.local.plumbing.processes import CONTROLLER_INTERVAL_S
from jobs.vertex.google_session import storage_client
from jobs.vertex.rest import VertexRest
from tests.vtx.local.guard_helpers import record, runner, until, vtx
from vtx.cli import app

pytestmark = pytest.mark.slow(cost_s=60)  # two runs on the local platform, about a minute
WINDOW_S = 3


def launch(tmp_path: Path, run_id: str, command: list[str]) -> None:
    template = tmp_path / f"{run_id}.yaml"
    template.write_text(yaml.safe_dump({
        "name": "guarded",
        "image": "trainer",
        "command": command,
        # One thread: two threads spinning on a shared 2-core machine train 20x slower.
        "env": {"OMP_NUM_THREADS": "1"},
        "pools": {"chief": {"machine": "n1-standard-4"}},
        "scheduling": {"timeout": "30m"},
        "guard": {"no_progress": f"{WINDOW_S}s", "action": "cancel"},
    }))  # fmt: skip
    out = vtx("launch", str(template), "--stack", "local", "-y", "--run-id", run_id)
    assert f"no step for {WINDOW_S}s -> cancel" in out


def test_a_stalled_replica_is_cancelled_by_the_controller_and_status_says_why(
    local_platform: StackOutputs, tmp_path: Path
) -> None:
    run_id = f"stall-{uuid.uuid4().hex[:6]}"
    command = ["python", "-m", "trainer", "--config", "trainer/examples/tiny.yaml"]
    for override in ("max_steps=100000", "save_steps=null", "eval_steps=null", "logging_steps=50"):
        command += ["--set", override]
    launch(tmp_path, run_id, command)
    records, rest = Records(local_platform), VertexRest(local_platform)

    def training() -> Heartbeat | None:
        beat = records.heartbeat(run_id)
        if beat and beat.phase is Phase.TRAINING and beat.stepped_at:
            return beat
        jobs = rest.list(run_id)
        if jobs and jobs[0].terminal:  # said at once, not after the hang deadline
            logs = runner.invoke(app, ["logs", run_id, "--stack", "local"]).output
            raise AssertionError(f"{jobs[0].state} before a beat ({beat}):\n{logs[-3000:]}")
        return None

    beat = until("the trainer's first step", training)
    assert beat.job is not None and beat.tokens > 0
    out = " ".join(vtx("local", "stall", run_id).split())  # a narrow console wraps it
    assert "stalled (SIGSTOP: alive, no more steps)" in out
    ended = until("the guard's cancel", lambda: record(local_platform, run_id).outcome)
    assert ended.state == "CANCELLED"
    assert ended.reason and ended.reason.startswith("guard.no_progress: no training step for")
    breaches = record(local_platform, run_id).breaches
    assert breaches == [f"cancel: {ended.reason}"]
    text = vtx("status", run_id, "--stack", "local")
    assert f"guard breached: cancel: {ended.reason}" in " ".join(text.split())
    logs = " ".join(vtx("logs", run_id, "--stack", "local").split())
    assert logs.endswith(f"guard breached: cancel: {ended.reason}")  # after the job's lines
    document = json.loads(vtx("status", run_id, "--stack", "local", "--format", "json"))
    assert document["controller"]["guard_breaches"] == breaches
    assert document["controller"]["stopped_by_budget"] is None
    (stall,) = [c for c in document["goodput"]["categories"] if c["category"] == "stall"]
    assert stall["seconds"] > 0 and stall["source"] == "controller"


def test_a_run_starting_or_restoring_longer_than_the_guard_is_left_alone(
    local_platform: StackOutputs, tmp_path: Path
) -> None:
    run_id = f"slowstart-{uuid.uuid4().hex[:6]}"
    launch(tmp_path, run_id, ["python", "-c", "import time; time.sleep(600)"])
    rest = VertexRest(local_platform)
    job = until("the job running", lambda: next(
        (j for j in rest.list(run_id) if j.state == "JOB_STATE_RUNNING"), None))  # fmt: skip

    def placed() -> bool:
        current = record(local_platform, run_id).current
        return current is not None and current.placed

    until("the controller placing it", placed)
    # No heartbeat at all (starting), then one that restores for long, from before the window.
    _passes_after(local_platform, run_id, datetime.now(UTC))
    long_ago = datetime.now(UTC) - timedelta(seconds=10 * WINDOW_S)
    restoring = Heartbeat(job=job.name.rsplit("/", 1)[-1], phase=Phase.RESTORING,
                          phase_since=long_ago, step=40, tokens=4000, time=long_ago)  # fmt: skip
    blob = (
        storage_client(local_platform)
        .bucket(local_platform.buckets.checkpoints)
        .blob(f"{RUNS_PREFIX}{run_id}/{HEARTBEAT_OBJECT}")
    )
    blob.upload_from_string(restoring.model_dump_json())
    _passes_after(local_platform, run_id, datetime.now(UTC))
    after = record(local_platform, run_id)
    assert after.outcome is None and after.breaches == [] and after.stopping is None
    assert not rest.get(job.name).terminal
    # Slowed down, then cancelled: the platform lets it go before its SIGTERM.
    assert "10x slower" in " ".join(vtx("local", "slow", run_id, "--factor", "10").split())
    vtx("cancel", run_id, "--stack", "local")
    ended = until("the cancel", lambda: rest.get(job.name).terminal and rest.get(job.name))
    assert ended.state == "JOB_STATE_CANCELLED"


def _passes_after(stack: StackOutputs, run_id: str, since: datetime) -> None:
    """Until the controller's passes reach past the guard's span and two passes more."""
    beyond = since + timedelta(seconds=WINDOW_S + 2 * CONTROLLER_INTERVAL_S)

    def passed() -> bool:
        last = Records(stack).last_pass()
        return last is not None and last.at > beyond

    until("the controller's passes past the window", passed)
