"""Goodput on the local platform: the tiny example preempted twice through the platform's own
preemption (as `vtx local preempt` and bench/goodput.py deliver it) reads back from `vtx status`
as phases that tile the wall time, with no step computed again, and with figures that match
the platform's record of the job; a capacity ladder whose first rung stocks out shows that
rung, the move and the next rung's queue as waiting for capacity. `vtx report` writes the page
and refuses a path that is not a regular file's."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import datetime
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from jobs.control.records import Records
from jobs.core.stack import StackOutputs
from jobs.local.plumbing.client import (
    LocalApiError,
    preempt_replica,
    read_capacity,
    read_logs,
    set_capacity,
)
from jobs.vertex.rest import VertexRest
from tests.conftest import HANG_S
from tests.jobs.local.local_helpers import wait_for
from vtx.cli import app

runner = CliRunner(env={"COLUMNS": "200"})
STEPS = 150


def vtx(*args: str) -> str:
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def seconds(start: str, end: str) -> float:
    return (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds()


def phases(goodput: dict[str, Any]) -> list[dict[str, Any]]:
    return [p for a in goodput["attempts"] for p in a["phases"]]


def assert_tiles(goodput: dict[str, Any]) -> None:
    found = phases(goodput)
    assert found[0]["start"] == goodput["submitted"] and found[-1]["end"] == goodput["ended"]
    for before, after in pairwise(found):
        assert before["end"] == after["start"]
    assert abs(sum(p["seconds"] for p in found) - goodput["wall_s"]) < 1.0


def category(goodput: dict[str, Any], key: str) -> dict[str, Any]:
    return next(c for c in goodput["categories"] if c["category"] == key)


def rank0_steps(entries: list[dict[str, Any]], restart: int) -> list[int]:
    steps = []
    for e in entries:
        if e["replica"] != "workerpool0-0" or e.get("restart") != restart:
            continue
        try:
            line = json.loads(e["message"])
        except ValueError:
            continue
        if isinstance(line, dict) and line.get("message") == "train":
            steps.append(line["step"])
    return steps


def preempt_twice(stack: StackOutputs, run_id: str) -> int:
    """Preempt the run's job 5 steps into its first start, then 5 steps into its second."""
    endpoint, token = stack.vertex_endpoint or "", stack.local_token or ""
    entries: list[dict[str, Any]] = []
    cursor, delivered = 0, 0
    deadline = time.monotonic() + HANG_S  # only catches a hang
    while delivered < 2 and time.monotonic() < deadline:
        page = read_logs(endpoint, token, run_id=run_id, cursor=cursor)
        entries += page["entries"]
        cursor = page["cursor"]
        steps = rank0_steps(entries, restart=delivered)
        if len(steps) >= 5:
            assert steps[-1] < STEPS, "the job ended before its preemption"
            try:
                preempt_replica(endpoint, token, entries[-1]["job"])
                delivered += 1
            except LocalApiError as exc:
                if exc.status != "ABORTED":  # ABORTED: still in the previous preemption
                    raise
        time.sleep(0.2)
    return delivered


@pytest.mark.slow(cost_s=120)
def test_a_run_preempted_twice_tiles_its_wall_time_and_loses_no_step(
    local_platform: StackOutputs, tmp_path: Path
) -> None:
    run_id = "goodput-twice"
    command = ["python", "-m", "trainer", "--config", "trainer/examples/tiny.yaml"]
    for override in (f"max_steps={STEPS}", "save_steps=50", "logging_steps=1"):
        command += ["--set", override]
    template = tmp_path / "tiny.yaml"
    template.write_text(
        yaml.safe_dump(
            {
                "name": run_id,
                "image": "trainer",
                "command": command,
                "pools": {"chief": {"machine": "n1-standard-4"}},
                "scheduling": {"timeout": "10m"},
            }
        )
    )
    vtx("launch", str(template), "--stack", "local", "-y", "--run-id", run_id)
    assert preempt_twice(local_platform, run_id) == 2
    rest = VertexRest(local_platform)
    wait_for(lambda: all(j.terminal for j in rest.list(run_id)))

    found = json.loads(vtx("status", run_id, "--stack", "local", "--format", "json"))
    assert found["state"] == "JOB_STATE_SUCCEEDED", found["error"]
    goodput = found["goodput"]
    assert_tiles(goodput)
    assert (goodput["unique_steps"], goodput["steps_lost"]) == (STEPS, 0)
    assert category(goodput, "lost")["seconds"] == 0
    (attempt,) = goodput["attempts"]
    assert len(attempt["preemptions"]) == len(goodput["to_first_step_s"]) == 2

    # Against the platform's own record of the job: its times, its preemptions.
    record = found["attempts"][0]
    assert abs(goodput["wall_s"] - seconds(record["created"], record["ended"])) < 1.0
    assert abs(goodput["paid_s"] - seconds(record["started"], record["ended"])) < 1.0
    waited = seconds(record["created"], record["started"])
    assert abs(category(goodput, "waiting")["seconds"] - waited) < 1.0
    (replica,) = found["pools"][0]["replicas"]
    assert replica["restarts"] == 2
    productive = category(goodput, "productive")["seconds"]
    assert goodput["goodput"] == pytest.approx(productive / goodput["wall_s"], abs=1e-4)
    assert goodput["paid_goodput"] == pytest.approx(productive / goodput["paid_s"], abs=1e-4)
    for key in ("startup", "restore", "recovery", "save", "eval", "provisioning"):
        assert category(goodput, key)["seconds"] > 0, key  # each read from its own lines
    assert goodput["tokens"] > 0
    assert (goodput["tokens_per_usd"] is None) == (goodput["usd"] is None)
    for figure in goodput["categories"]:
        assert (figure["usd"] is None) == (figure["usd_unknown_because"] is not None)

    table = vtx("status", run_id, "--stack", "local", "--timeline")
    assert "goodput: " in table and "0 step(s) computed again" in table
    rows = [line for line in table.splitlines() if line.startswith("a1 ")]
    assert len(rows) == 1 and "#" in rows[0] and "X" in rows[0]
    assert "legend: # productive steps" in table

    page = tmp_path / "report.html"
    assert "wrote" in vtx("report", run_id, "--stack", "local", "--output", str(page))
    html = page.read_text()
    assert html.count('class="lane"') == 1 and html.count('class="preemption"') == 2
    assert "<script" not in html and "http://" not in html.replace("http://www.w3.org/2000/svg", "")


def test_report_refuses_an_output_that_is_not_a_regular_file_path(tmp_path: Path) -> None:
    for path, said in ((tmp_path, "is a directory"), (Path("/dev/null"), "character device")):
        result = runner.invoke(
            app, ["report", "some-run", "--stack", "local", "--output", str(path)]
        )
        assert result.exit_code == 2, result.output
        assert said in result.output and "Traceback" not in result.output


STOCKED_OUT = {
    "regions": {"us-central1": {"accelerators": {"NVIDIA_TESLA_T4": {"spot_stockout": True}}}}
}
LINES = [
    {"message": "training", "rank": 0, "step": 0, "total_steps": 4},
    {"message": "train", "rank": 0, "step": 4, "loss": 2.0, "tokens_per_s": 10.0, "tokens": 40},
    {"message": "done", "rank": 0, "step": 4},
]
"""Trainer-shaped lines: the ladder's test needs where the run waited, not a model."""


@pytest.fixture
def stocked_out(local_platform: StackOutputs) -> Iterator[StackOutputs]:
    """The session's platform with its Spot T4s stocked out in us-central1 for one test (its
    capacity model replaced while it runs, as `vtx local capacity set` does), then put back: no
    control plane of its own to start."""
    endpoint, token = local_platform.vertex_endpoint or "", local_platform.local_token or ""
    before = read_capacity(endpoint, token)["capacity"]
    set_capacity(endpoint, token, STOCKED_OUT)
    try:
        yield local_platform
    finally:
        set_capacity(endpoint, token, before)


@pytest.mark.slow
def test_a_first_rung_that_stocks_out_shows_as_waiting_for_capacity(
    stocked_out: StackOutputs, tmp_path: Path
) -> None:
    stack = stocked_out
    run_id = "goodput-ladder"
    code = "import json\n" + "".join(f"print(json.dumps({line!r}))\n" for line in LINES)
    template = tmp_path / "ladder.yaml"
    template.write_text(
        yaml.safe_dump(
            {
                "name": run_id,
                "image": "trainer",
                "command": ["python", "-c", code],
                "pools": {"chief": {"machine": "n1-standard-4",
                                    "accelerator": "NVIDIA_TESLA_T4"}},
                "scheduling": {"strategy": "spot", "timeout": "10m"},
                "capacity": {"ladder": [{"region": "us-east4"}]},
            }
        )
    )  # fmt: skip
    launched = vtx("launch", str(template), "--stack", "local", "--yes", "--run-id", run_id,
                   "--poll-s", "0.2")  # fmt: skip
    assert "rung 1 us-central1 1xT4 SPOT: submitted" in launched  # the controller walks on
    records = Records(stack)
    done = wait_for(lambda: (s := records.read(run_id)) and s.record.outcome and s.record)
    assert "STOCKOUT" in " ".join(m.what for m in done.moves)
    rest = VertexRest(stack)
    wait_for(lambda: all(j.terminal for j in rest.list(run_id)))

    found = json.loads(vtx("status", run_id, "--stack", "local", "--format", "json"))
    goodput = found["goodput"]
    assert_tiles(goodput)
    first, second = goodput["attempts"]
    assert (first["region"], second["region"]) == ("us-central1", "us-east4")
    assert first["moved_on"] and {p["category"] for p in first["phases"]} == {"waiting"}
    assert second["phases"][0]["category"] == "waiting"
    one, two = found["attempts"]  # the platform's records, oldest first
    waited = seconds(one["created"], two["created"]) + seconds(two["created"], two["started"])
    assert abs(category(goodput, "waiting")["seconds"] - waited) < 1e-3
    assert category(goodput, "waiting")["usd"] == 0  # queued and stocked out: not billed

    table = vtx("status", run_id, "--stack", "local", "--timeline")
    row = next(line for line in table.splitlines() if line.startswith("a1 "))
    bar = row.split("|")[1]
    assert set(bar.strip()) == {"W"} and "waiting for capacity" in table
