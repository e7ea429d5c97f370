"""A run's budget end to end on the local platform: `vtx cost` and the launch plan warn when the
timeout cap's cost is over it, the controller beside the platform (never the platform itself,
as Vertex never does) cancels the run once its meter crosses it with nobody following, and
`vtx status` and `vtx list` show the meter, the budget, why the run was stopped and the
controller's last pass."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import yaml
from typer.testing import CliRunner

from jobs.control.records import Records
from jobs.core.stack import StackOutputs
from tests.conftest import HANG_S, TEMPLATES
from tests.jobs.core.price_tables import stand_in_for_the_platform
from tests.jobs.local.local_helpers import wait_for
from vtx.cli import app

runner = CliRunner(env={"COLUMNS": "200"})
RUN_ID = "budget-e2e-1"
TWO_DOLLARS_AN_HOUR = {"us-central1": (2.0, 0.5)}  # n1-standard-4, on-demand and Spot


def vtx(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.output


def flat(text: str) -> str:
    return " ".join(text.replace("│", " ").split())


def budgeted(tmp_path: Path, max_cost_usd: float, sleep_s: int = 600) -> Path:
    path = tmp_path / "spendy.yaml"
    template = {
        "name": "spendy",
        "image": "trainer",
        "command": ["python", "-c", f"import time; print('up', flush=True); time.sleep({sleep_s})"],
        "pools": {"chief": {"machine": "n1-standard-4"}},
        "scheduling": {"timeout": "1h"},
        "budget": {"max_cost_usd": max_cost_usd},
    }
    path.write_text(yaml.safe_dump(template))
    return path


def status_document(run_id: str) -> dict:
    code, out = vtx("status", run_id, "--stack", "local", "--format", "json")
    assert code == 0, out
    return json.loads(out)


def test_a_run_over_its_budget_is_cancelled_and_status_says_why(
    local_platform: StackOutputs, tmp_path: Path
) -> None:
    template = str(budgeted(tmp_path, 0.000003))
    with stand_in_for_the_platform(TWO_DOLLARS_AN_HOUR, "2099-01-02"):
        code, out = vtx("cost", template, "--stack", "local")
        assert code == 0, out
        assert (
            "budget.max_cost_usd $0.000003 is under the cost at the timeout cap (1h): $2.00 at "
            "$2.00/h" in flat(out)
        )
        assert "no timeout fits it: raise the budget" in flat(out)
        code, out = vtx("launch", template, "--stack", "local", "-y", "--run-id", RUN_ID)
        assert code == 0, out
        assert "budget.max_cost_usd $0.000003 is under the cost" in flat(out)
        deadline = time.monotonic() + HANG_S  # only catches a hang
        while not ((document := status_document(RUN_ID)).get("controller") or {}).get("outcome"):
            assert time.monotonic() < deadline, document
            time.sleep(0.2)
        code, out = vtx("status", RUN_ID, "--stack", "local")
        listed = vtx("list", "--stack", "local", "--run-id", RUN_ID, "--format", "json")[1]
        logged = vtx("logs", RUN_ID, "--stack", "local", "--format", "text")[1]
    assert "crossed budget.max_cost_usd $0.000003" in document["controller"]["stopped_by_budget"]
    assert document["controller"]["outcome"]["state"] == "CANCELLED"
    assert "crossed budget.max_cost_usd $0.000003" in document["cost"]["stopped_by_budget"]
    cost = document["cost"]
    assert cost["budget_usd"] == 0.000003 and cost["usd_unknown_because"] is None
    assert cost["price_table"] == "billing-local-training-us-central1-2099-01-02"
    assert cost["usd"] is not None and cost["usd"] > 0
    text = flat(out)
    assert "budget $0.000003 (budget.max_cost_usd)" in text
    assert "stopped by its budget" in text and "crossed budget.max_cost_usd $0.000003" in text
    assert "controller: last pass" in text and "the run ended CANCELLED" in text
    (row,) = json.loads(listed)
    assert row["budget_usd"] == 0.000003 and row["usd"] is not None
    # A cancel carries no reason on Vertex: the logs, the controller's own log line and the
    # run's record name the budget instead.
    assert "stopped by its budget: the run's cost so far" in flat(logged)
    assert "crossed budget.max_cost_usd $0.000003" in flat(logged)
    controller_log = Path(os.environ["VTX_LOCAL_DIR"]) / "controller.log"
    (line,) = [x for x in controller_log.read_text().splitlines() if f"{RUN_ID}: cancel " in x]
    assert "to stop the run: the run's cost so far" in line
    assert "crossed budget.max_cost_usd $0.000003" in line
    stored = Records(local_platform).read(RUN_ID)
    assert stored is not None and stored.record.outcome is not None
    assert "crossed budget.max_cost_usd $0.000003" in (stored.record.outcome.reason or "")
    assert "crossed budget.max_cost_usd $0.000003" in (stored.record.stopping or "")


def test_launch_says_a_budget_without_a_price_is_not_enforced(
    local_platform: StackOutputs, tmp_path: Path
) -> None:
    template = budgeted(tmp_path, 5)
    doc = yaml.safe_load(template.read_text())
    template.write_text(yaml.safe_dump({**doc, "region": "europe-west4"}))
    code, out = vtx("launch", str(template), "--stack", "local", "--dry-run", "--run-id", "b-dry")
    assert code == 0, out
    assert (
        "budget.max_cost_usd $5.00 is not enforced: no on-demand price for n1-standard-4"
        in flat(out)
    )


def test_the_follower_prints_the_controllers_moves_as_it_stops_a_run_at_its_budget(
    local_platform: StackOutputs, tmp_path: Path
) -> None:
    """`vtx launch --follow` only watches: the controller cancels the run (in europe-west4,
    a further region of the ladder's kind), and the follower says so as the record gains it."""
    # Ends by itself within a minute should no one cancel it: a failure, not a hung test.
    template = budgeted(tmp_path, 0.000003, sleep_s=45)
    doc = yaml.safe_load(template.read_text())
    template.write_text(yaml.safe_dump({**doc, "region": "europe-west4"}))
    run_id = "budget-follow-1"
    launch = ["launch", str(template), "--stack", "local", "-y", "--run-id", run_id]
    with stand_in_for_the_platform({"europe-west4": (2.0, 0.5)}, "2099-01-03"):
        code, out = vtx(*launch, "--follow", "--poll-s", "0.2")
        assert code == 1, out
        document = status_document(run_id)
        _code, status_out = vtx("status", run_id, "--stack", "local")
    text = flat(out)
    assert "controller: cancel" in text and "crossed budget.max_cost_usd $0.000003" in text
    assert f"run {run_id}: CANCELLED: the run's cost so far" in text
    assert document["state"] == "JOB_STATE_CANCELLED"
    assert "crossed budget.max_cost_usd $0.000003" in document["cost"]["stopped_by_budget"]
    assert "stopped by its budget: the run's cost so far" in flat(status_out)


def test_the_launch_plan_says_each_ladder_rungs_budget_at_its_own_price(
    local_platform: StackOutputs, tmp_path: Path
) -> None:
    template = budgeted(tmp_path, 0.01)
    doc = yaml.safe_load(template.read_text())
    ladder = {"capacity": {"ladder": [{"region": "europe-west4"}]}}
    template.write_text(yaml.safe_dump({**doc, **ladder}))
    code, out = vtx("launch", str(template), "--stack", "local", "--dry-run", "--run-id", "b-lad")
    assert code == 0, out
    text = flat(out)
    assert "warning: budget.max_cost_usd $0.01 is under the cost at the timeout cap (1h)" in text
    rung_2 = "rung 2 europe-west4 1xn1-standard-4 STANDARD: warning: budget.max_cost_usd $0.01"
    assert f"{rung_2} is not enforced: no on-demand price for n1-standard-4" in text


def test_a_study_over_its_budget_is_cancelled_by_the_controller_with_nobody_following(
    local_platform: StackOutputs, tmp_path: Path
) -> None:
    """The launch returns once the study is submitted; the platform's controller meters its
    trials' jobs and cancels the study once they cross the study's budget."""
    doc = yaml.safe_load((TEMPLATES / "tiny-tune.yaml").read_text())
    # Trials that would run ten minutes: only the budget ends them before the test's deadline.
    doc |= {"command": ["python", "-c", "import time; time.sleep(600)"], "args": []}
    doc |= {"budget": {"max_cost_usd": 0.000003}}
    template = tmp_path / "spendy-study.yaml"
    template.write_text(yaml.safe_dump(doc))
    run_id = "budget-study-1"
    with stand_in_for_the_platform(TWO_DOLLARS_AN_HOUR, "2099-01-07"):
        code, out = vtx("launch", str(template), "--stack", "local", "-y", "--run-id", run_id)
        assert code == 0, out
        assert "/hyperparameterTuningJobs/" in out
        records = Records(local_platform)
        done = wait_for(lambda: (s := records.read(run_id)) and s.record.outcome and s.record)
    assert done.outcome is not None and done.outcome.state == "CANCELLED"
    assert "crossed budget.max_cost_usd $0.000003" in (done.outcome.reason or "")
    moves = " ".join(m.what for m in done.moves)
    assert "cancel study" in moves
    code, shown = vtx("status", run_id, "--stack", "local")
    assert code == 0, shown
    assert "stopped by its budget" in flat(shown)
