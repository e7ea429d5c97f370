"""`vtx status` and `vtx list` against the local platform (`local_platform` fixture): the real
trainer's log lines read as progress and checkpoints (this pins jobs.runs.watch's copy of the
trainer's messages and keys), a running job's ETA, attempts of one run numbered in order, and
the JSON/YAML documents."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from jobs.core.stack import StackOutputs
from jobs.local.plumbing.client import read_logs
from jobs.vertex.client import Vertex
from jobs.vertex.rest import VertexRest
from tests.jobs.local.local_helpers import wait_for
from vtx.cli import app

pytestmark = pytest.mark.slow
runner = CliRunner(env={"COLUMNS": "200"})


def vtx(*args: str) -> str:
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def launch(tmp_path: Path, name: str, command: list[str]) -> None:
    template = tmp_path / f"{name}.yaml"
    template.write_text(
        yaml.safe_dump(
            {
                "name": name,
                "image": "trainer",
                "command": command,
                "pools": {"chief": {"machine": "n1-standard-4"}},
                "scheduling": {"timeout": "10m"},
            }
        )
    )
    vtx("launch", str(template), "--stack", "local", "-y", "--run-id", name)


def status(run_id: str) -> dict[str, Any]:
    return json.loads(vtx("status", run_id, "--stack", "local", "--format", "json"))


# The waits below watch the event itself (the job's state, a log line) with a cheap request,
# then read `vtx status` once: polling the whole command would redo its work (jobs, logs,
# checkpoints, prices) a few times a second for the length of a run.


def ended(stack: StackOutputs, ref: str) -> dict[str, Any]:
    """`vtx status` of ``ref`` (a run id or job id) once its newest job has ended."""
    rest = VertexRest(stack)
    wait_for(lambda: rest.resolve(ref).terminal)
    return status(ref)


def logged(stack: StackOutputs, run_id: str, line: dict[str, Any]) -> bool:
    """Whether the run's replicas have printed ``line`` (as the store holds it)."""
    page = read_logs(stack.vertex_endpoint or "", stack.local_token or "", run_id=run_id)
    return any(e["message"].strip() == json.dumps(line) for e in page["entries"])


def test_the_real_trainers_progress_and_checkpoints_show_in_status_and_list(
    local_platform: StackOutputs, tmp_path: Path
) -> None:
    command = ["python", "-m", "trainer", "--config", "trainer/examples/tiny.yaml"]
    for override in ("max_steps=10", "save_steps=5", "logging_steps=5", "eval_steps=10"):
        command += ["--set", override]
    launch(tmp_path, "tiny-status", command)
    found = ended(local_platform, "tiny-status")
    assert found["attempts"][0]["ended"]

    assert found["state"] == "JOB_STATE_SUCCEEDED", found["error"]
    progress = found["progress"]
    assert (progress["step"], progress["total_steps"], progress["done"]) == (10, 10, True)
    assert progress["tokens_per_s"] > 0 and progress["loss"] > 0
    assert progress["eta_s"] is None  # it ended
    checkpoints = found["checkpoints"]
    assert (checkpoints["committed"], checkpoints["last_step"]) == (2, 10)
    root = "gs://vtx-local-checkpoints/runs/tiny-status/checkpoints"
    assert checkpoints["last_path"] == f"{root}/step-000000010"
    assert (checkpoints["root"], checkpoints["stored_steps"]) == (root, [5, 10])
    (pool,) = found["pools"]
    assert (pool["pool"], pool["role"], pool["machine"]) == (
        "workerpool0",
        "chief",
        "n1-standard-4",
    )
    (replica,) = pool["replicas"]
    assert replica["replica"] == "workerpool0-0" and replica["last_log"] is not None
    assert replica["restarts"] == 0
    assert found["running_s"] > 0

    table = vtx("status", "tiny-status", "--stack", "local")
    assert "10 of 10 (100%), done" in table
    assert "2 committed, latest step 10; in storage: step(s) 5, 10" in table
    rows = yaml.safe_load(vtx("list", "--stack", "local", "--format", "yaml"))
    (row,) = [r for r in rows if r["run_id"] == "tiny-status"]
    assert (row["attempt"], row["state"]) == (1, "JOB_STATE_SUCCEEDED")
    assert row["resources"] == "1 x n1-standard-4"


def test_a_running_job_has_an_eta_and_a_second_attempt_is_numbered_two(
    local_platform: StackOutputs, tmp_path: Path
) -> None:
    # Trainer-shaped lines: a start at step 0 of 100, a report at step 5 a second later.
    lines = [
        {"message": "training", "rank": 0, "step": 0, "total_steps": 100},
        {"message": "train", "rank": 0, "step": 5, "loss": 2.0, "tokens_per_s": 50.0},
    ]
    code = (
        "import json, time\n"
        f"print(json.dumps({lines[0]!r}), flush=True)\n"
        "time.sleep(1)\n"
        f"print(json.dumps({lines[1]!r}), flush=True)\n"
        "time.sleep(300)\n"
    )
    launch(tmp_path, "eta-run", ["python", "-c", code])
    wait_for(lambda: logged(local_platform, "eta-run", lines[1]))
    found = status("eta-run")
    assert found["progress"]["step"] == 5
    assert found["state"] == "JOB_STATE_RUNNING"
    assert found["progress"]["total_steps"] == 100
    assert found["progress"]["eta_s"] > 0  # 95 steps at the pace since the start
    assert "ETA" in vtx("status", "eta-run", "--stack", "local")

    assert "cancel requested" in vtx("cancel", "eta-run", "--stack", "local")
    assert ended(local_platform, "eta-run")["state"] == "JOB_STATE_CANCELLED"
    launch(tmp_path, "eta-run", ["python", "-c", "print('second')"])
    found = ended(local_platform, "eta-run")
    assert found["attempts"][-1]["ended"]
    assert [(a["attempt"], a["state"]) for a in found["attempts"]] == [
        (1, "JOB_STATE_CANCELLED"),
        (2, "JOB_STATE_SUCCEEDED"),
    ]
    assert found["job"] == found["attempts"][1]["job"]
    assert found["progress"]["step"] is None  # the newest attempt reported no progress
    newest = VertexRest(local_platform).resolve("eta-run")
    assert newest.name == found["job"]
    rows = json.loads(vtx("list", "--stack", "local", "--run-id", "eta-run", "--format", "json"))
    assert [r["attempt"] for r in rows] == [2, 1]  # newest first


def test_a_job_launched_without_vtx_is_shown_alone(local_platform: StackOutputs) -> None:
    from google.cloud import aiplatform_v1

    pool = {
        "machine_spec": {"machine_type": "n1-standard-4"},
        "replica_count": 1,
        "container_spec": {"image_uri": "img", "command": ["python", "-c", "print('plain')"]},
    }
    job = Vertex(local_platform).create(
        aiplatform_v1.CustomJob(display_name="plain", job_spec={"worker_pool_specs": [pool]})
    )
    job_id = job.name.rsplit("/", 1)[-1]
    found = ended(local_platform, job_id)
    assert found["attempts"][0]["ended"]
    assert (found["run_id"], found["job"], found["state"]) == (
        None,
        job.name,
        "JOB_STATE_SUCCEEDED",
    )
    assert [a["attempt"] for a in found["attempts"]] == [1]
    (replica,) = found["pools"][0]["replicas"]
    assert replica["last_log"] is not None  # its own logs, read by job
    assert found["checkpoints"]["stored_steps"] is None  # no output prefix, nothing to list
    listed = json.loads(vtx("list", "--stack", "local", "--format", "json"))
    assert job.name not in {r["job"] for r in listed}  # `vtx list` shows vtx's runs
