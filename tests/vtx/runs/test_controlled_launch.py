"""Launching on a stack with a controller (vtx.flows.controlled), at the moments a pass can
land: `--follow` shows the attempt's logs and final state even when the controller recorded
the run's end before the follower first looked, and a relaunch is not refused when the
controller records the ended run's outcome between the launch's read and its write. The
records live in a bucket of the test's own, so the platform's own controller never touches
them; its passes are made here, by hand."""

from __future__ import annotations

import io
import uuid
from pathlib import Path

import pytest
import yaml
from rich.console import Console

from jobs.control.driver import Driver
from jobs.control.record import RunRecord
from jobs.control.records import Records
from jobs.core.stack import StackOutputs
from jobs.launch.plan import LaunchOptions, LaunchPlan, plan_launch
from jobs.spec.gcloud import load_template
from jobs.vertex.rest import VertexRest
from tests.jobs.local.local_helpers import wait_for
from vtx.flows.controlled import _write_new, follow_controlled

QUICK = {
    "name": "quick",
    "image": "trainer",
    "command": ["python", "-c", "print('quick job says hello')"],
    "pools": {"chief": {"machine": "n1-standard-4"}},
    "scheduling": {"timeout": "10m"},
}


@pytest.fixture
def stack(local_platform: StackOutputs) -> StackOutputs:
    from jobs.vertex.google_session import storage_client

    bucket = f"vtx-follow-{uuid.uuid4().hex[:12]}"
    storage_client(local_platform).create_bucket(bucket)
    buckets = local_platform.buckets.model_copy(update={"checkpoints": bucket})
    return local_platform.model_copy(update={"buckets": buckets})


def _plan(stack: StackOutputs, tmp_path: Path, run_id: str) -> LaunchPlan:
    path = tmp_path / "quick.yaml"
    path.write_text(yaml.safe_dump(QUICK))
    plan = plan_launch(load_template(path), stack, str(path), LaunchOptions(run_id=run_id))
    assert not plan.problems, plan.problems
    return plan


def test_a_run_that_ended_before_the_follower_looked_still_shows_its_job(
    stack: StackOutputs, tmp_path: Path
) -> None:
    from jobs.control.record import record_of

    run_id = f"follow-late-{uuid.uuid4().hex[:6]}"
    plan = _plan(stack, tmp_path, run_id)
    records = Records(stack)
    records.create(record_of(plan))
    driver = Driver(stack)

    def ended() -> RunRecord | None:
        driver.run_pass()
        stored = records.read(run_id)
        return stored.record if stored and stored.record.outcome else None

    record = wait_for(ended)
    assert record.outcome is not None and record.outcome.succeeded
    buffer = io.StringIO()
    code = follow_controlled(Console(file=buffer, width=200), stack, plan, records, 0.05)
    shown = buffer.getvalue()
    assert code == 0
    assert "quick job says hello" in shown
    assert "JOB_STATE_SUCCEEDED" in shown
    assert shown.rstrip().endswith(f"run {run_id}: SUCCEEDED")


def test_a_relaunch_is_not_refused_when_the_controller_records_the_end_meanwhile(
    stack: StackOutputs, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from jobs.control.record import record_of

    run_id = f"relaunch-{uuid.uuid4().hex[:6]}"
    plan = _plan(stack, tmp_path, run_id)
    records, rest = Records(stack), VertexRest(stack)
    records.create(record_of(plan))
    driver = Driver(stack)
    driver.run_pass()  # submits the first attempt; no pass after it has seen its end
    wait_for(lambda: all(j.terminal for j in rest.list(run_id)) and rest.list(run_id))
    stored = records.read(run_id)
    assert stored is not None and stored.record.live  # ended, not yet recorded as ended

    write = records.write
    passes: list[int] = []

    def a_pass_lands_first(record: RunRecord, generation: int) -> int:
        if not passes:
            passes.append(driver.run_pass().conflicts)  # records the outcome: a new generation
        return write(record, generation)

    monkeypatch.setattr(records, "write", a_pass_lands_first)
    _write_new(records, rest, _plan(stack, tmp_path, run_id))
    stored = records.read(run_id)
    assert stored is not None and stored.record.live and not stored.record.attempts
    assert stored.record.earlier_attempts == 1
