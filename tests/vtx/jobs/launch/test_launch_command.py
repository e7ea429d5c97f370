"""`vtx launch`: plan, confirm, submit through the CLI."""

from __future__ import annotations

import json
import time
from pathlib import Path

import yaml
from typer.testing import CliRunner

from jobs.core.stack import StackOutputs
from jobs.vertex.client import Vertex, is_terminal, state_name
from tests.conftest import HANG_S
from vtx.cli import app

runner = CliRunner(env={"COLUMNS": "200"})


def write_template(tmp_path: Path, name: str, code: str) -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "name": name,
                "image": "trainer",
                "command": ["python", "-c", code],
                "pools": {"chief": {"machine": "n1-standard-4"}},
                "scheduling": {"timeout": "10m"},
            }
        )
    )
    return path


def vtx(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.output


def wait_terminal(vertex: Vertex, run_id: str) -> str:
    deadline = time.monotonic() + HANG_S  # only catches a hang
    while time.monotonic() < deadline:
        jobs = vertex.list(run_id)
        if jobs and is_terminal(jobs[0]):
            return state_name(jobs[0])
        time.sleep(0.2)
    raise AssertionError(f"run {run_id} did not end")


def test_launch_follow_prints_job_run_id_logs_and_final_state(
    local_platform: StackOutputs, tmp_path: Path
) -> None:
    template = write_template(tmp_path, "hello", "print('hello from vtx')")
    code, out = vtx(
        "launch",
        str(template),
        "--stack",
        "local",
        "-y",
        "--follow",
        "--run-id",
        "hello-run-1",
        "--poll-s",
        "0.2",
    )
    assert code == 0, out
    assert "submitted projects/" in out and "/customJobs/" in out
    assert "run id: hello-run-1" in out
    assert "hello from vtx" in out
    assert "JOB_STATE_SUCCEEDED" in out
    job = Vertex(local_platform).list("hello-run-1")[0]
    assert job.labels["vtx-template"] == "hello"
    assert job.labels["vtx-environment"] == "local"
    prefix = job.job_spec.base_output_directory.output_uri_prefix
    assert prefix == "gs://vtx-local-checkpoints/runs/hello-run-1/"
    # Following an ended run prints its logs and its final state, by run id or by job name.
    for ref in ("hello-run-1", job.name):
        code, out = vtx("logs", ref, "--stack", "local", "--follow", "--poll-s", "0.2")
        assert code == 0, out
        assert "hello from vtx" in out and "JOB_STATE_SUCCEEDED" in out


def test_dry_run_prints_plan_and_submits_nothing(
    local_platform: StackOutputs, tmp_path: Path
) -> None:
    template = write_template(tmp_path, "dry", "print('never')")
    code, out = vtx("launch", str(template), "--stack", "local", "--dry-run", "--run-id", "dry-1")
    assert code == 0, out
    assert "n1-standard-4" in out and "custom_model_training_cpus" in out
    assert "dry run: nothing submitted" in out
    assert Vertex(local_platform).list("dry-1") == []


def test_declined_confirmation_submits_nothing(
    local_platform: StackOutputs, tmp_path: Path
) -> None:
    template = write_template(tmp_path, "declined", "print('never')")
    result = runner.invoke(
        app, ["launch", str(template), "--stack", "local", "--run-id", "declined-1"], input="n\n"
    )
    assert result.exit_code == 1
    assert "not submitted" in result.output
    assert Vertex(local_platform).list("declined-1") == []


def test_invalid_template_is_rejected_before_the_api(
    local_platform: StackOutputs, tmp_path: Path
) -> None:
    template = write_template(tmp_path, "bad", "print('never')")
    code, out = vtx(
        "launch",
        str(template),
        "--stack",
        "local",
        "-y",
        "--run-id",
        "bad-1",
        "--set",
        "pools.chief.replicas=2",
        "--set",
        "env.API_TOKEN=plain",
    )
    assert code == 1
    assert "pools.chief.replicas" in out and "env.API_TOKEN" in out
    assert Vertex(local_platform).list("bad-1") == []


def test_resubmission_reuses_run_id_and_output_prefix(
    local_platform: StackOutputs, tmp_path: Path
) -> None:
    template = write_template(tmp_path, "again", "print('attempt')")
    vertex = Vertex(local_platform)
    for attempt in (1, 2):
        code, out = vtx("launch", str(template), "--stack", "local", "-y", "--run-id", "again-1")
        assert code == 0, out
        assert ("attempt 2" in out) == (attempt == 2)
        wait_terminal(vertex, "again-1")
    attempts = vertex.list("again-1")
    assert len(attempts) == 2
    # The second launch's attempts number on from the first's: each marker names one job.
    assert sorted(j.labels["vtx-attempt"] for j in attempts) == ["a1", "a2"]
    prefixes = {j.job_spec.base_output_directory.output_uri_prefix for j in attempts}
    assert prefixes == {"gs://vtx-local-checkpoints/runs/again-1/"}
    code, out = vtx("logs", "again-1", "--stack", "local", "--format", "json")
    assert code == 0, out
    # Both attempts' output is in the run's log stream, each numbered as `vtx status` numbers it.
    rows = [json.loads(line) for line in out.splitlines()]
    assert [r["attempt"] for r in rows if r.get("textPayload") == "attempt"] == [1, 2]
    code, out = vtx("logs", "again-1", "--stack", "local", "--format", "text")
    assert code == 0, out
    printed = [line.split()[1:3] for line in out.splitlines() if line.endswith(" attempt")]
    assert printed == [["workerpool0-0", "a1"], ["workerpool0-0", "a2"]]


def test_status_list_and_cancel_a_running_job(local_platform: StackOutputs, tmp_path: Path) -> None:
    template = write_template(
        tmp_path, "sleeper", "import time; print('up', flush=True); time.sleep(120)"
    )
    code, out = vtx("launch", str(template), "--stack", "local", "-y", "--run-id", "sleeper-1")
    assert code == 0, out
    code, out = vtx("list", "--stack", "local")
    assert code == 0 and "sleeper-1" in out
    # A second attempt while the first runs would share its checkpoints: refused.
    code, out = vtx("launch", str(template), "--stack", "local", "-y", "--run-id", "sleeper-1")
    assert code == 1 and "still active" in out
    assert len(Vertex(local_platform).list("sleeper-1")) == 1
    code, out = vtx("cancel", "sleeper-1", "--stack", "local")
    assert code == 0 and "cancel requested" in out, out
    assert wait_terminal(Vertex(local_platform), "sleeper-1") == "JOB_STATE_CANCELLED"
    code, out = vtx("status", "sleeper-1", "--stack", "local")
    assert code == 0 and "JOB_STATE_CANCELLED" in out, out


def test_unknown_run_id_is_an_error(local_platform: StackOutputs) -> None:
    code, out = vtx("status", "no-such-run", "--stack", "local")
    assert code == 1 and "no job with run id" in out


def test_logs_of_a_job_launched_without_vtx_show_that_job(local_platform: StackOutputs) -> None:
    from google.cloud import aiplatform_v1

    pool = {
        "machine_spec": {"machine_type": "n1-standard-4"},
        "replica_count": 1,
        "container_spec": {"image_uri": "img", "command": ["python", "-c", "print('no run id')"]},
    }
    vertex = Vertex(local_platform)
    job = vertex.create(
        aiplatform_v1.CustomJob(display_name="plain", job_spec={"worker_pool_specs": [pool]})
    )
    deadline = time.monotonic() + HANG_S  # only catches a hang
    while not is_terminal(vertex.get(job.name)) and time.monotonic() < deadline:
        time.sleep(0.2)
    code, out = vtx("logs", job.name, "--stack", "local")
    assert code == 0 and "no run id" in out, out
    # Following an ended job returns (it used to wait for a run id that never comes).
    job_id = job.name.rsplit("/", 1)[-1]
    code, out = vtx("logs", job_id, "--stack", "local", "--follow", "--poll-s", "0.2")
    assert code == 0, out
    assert "no run id" in out
    assert f"{job.name}: JOB_STATE_SUCCEEDED" in out


def _rows(table_text: str) -> dict[str, str]:
    """A two-column rich table as {field: value}, wrapped value lines joined."""
    rows: dict[str, str] = {}
    field = ""
    for line in table_text.splitlines():
        cells = [c.strip() for c in line.split("│")[1:-1]]
        if len(cells) == 2:
            field = cells[0] or field
            rows[field] = f"{rows.get(field, '')} {cells[1]}".strip()
    return rows


def test_status_on_a_narrow_terminal_keeps_field_names_and_the_whole_error(
    local_platform: StackOutputs, tmp_path: Path
) -> None:
    template = write_template(tmp_path, "fails", "raise SystemExit(3)")
    vtx("launch", str(template), "--stack", "local", "-y", "--run-id", "fails-1")
    assert wait_terminal(Vertex(local_platform), "fails-1") == "JOB_STATE_FAILED"
    result = CliRunner(env={"COLUMNS": "80"}).invoke(app, ["status", "fails-1", "--stack", "local"])
    assert result.exit_code == 0, result.output
    rows = _rows(result.output)
    assert rows["state"] == "JOB_STATE_FAILED"
    assert rows["run id"] == "fails-1"
    assert "non-zero status of 3" in rows["error"]
    assert rows["error"].endswith("--stack local"), rows["error"]
