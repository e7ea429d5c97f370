"""A job's budget on the local platform: the executor prices the job as vtx does (the local
stand-in's tables) and cancels it once its meter crosses the budget its label carries."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from jobs.core.stack import StackOutputs
from jobs.local.platform.rpc_status import Code
from jobs.local.platform.settings import LocalSettings
from jobs.local.platform.state import LOCAL_REGION
from jobs.local.platform.store import Store
from jobs.local.training.executor import Executor
from jobs.local.training.pricing import job_price
from tests.jobs.core.price_tables import stand_in_for_the_platform, write_stand_in
from tests.jobs.local.local_helpers import PARENT, client, custom_job, pool, wait_for, wait_terminal
from tests.jobs.local.training.executor_helpers import SLEEP, service_lines
from tests.jobs.runs.run_records import rest_job

CANCELLED = 7  # JobState.JOB_STATE_CANCELLED
DOLLAR_AN_HOUR = {"us-central1": (1.0, 0.25)}


@pytest.fixture
def stand_in_prices(local_platform: StackOutputs) -> Iterator[list[Path]]:
    """The tables `vtx prices refresh --stack local` writes, where the platform reads them."""
    with stand_in_for_the_platform(DOLLAR_AN_HOUR, "2099-01-01") as written:
        yield written


def test_a_job_whose_meter_crosses_its_budget_is_cancelled_saying_why(
    local_platform: StackOutputs, stand_in_prices: list[Path]
) -> None:
    jobs = client(local_platform.vertex_endpoint)
    labels = {"vtx-run-id": "budget-crossed", "vtx-budget-usd": "0_000002"}
    job = jobs.create_custom_job(
        parent=PARENT, custom_job=custom_job("spendy", pool(SLEEP), labels=labels)
    )
    done = wait_terminal(jobs, job.name)
    assert done.state == CANCELLED
    assert done.error.code == 1  # CANCELLED, as Vertex sets on a cancelled job
    assert "crossed budget.max_cost_usd $0.000002" in done.error.message
    assert "on-demand $1.0000/h, billing-local-training-us-central1-2099-01-01" in (
        done.error.message
    )
    assert wait_for(
        lambda: any(
            "budget.max_cost_usd $0.000002" in s for s in service_lines(local_platform, job.name)
        )
    )


def test_a_broken_table_in_the_prices_folder_does_not_stop_job_creation(
    local_platform: StackOutputs, stand_in_prices: list[Path]
) -> None:
    # A list-shaped table and a FIFO beside the stand-in's: the platform answered 500 to every
    # job create (and a FIFO hung it). Each is left out; the good table still prices the job.
    folder = stand_in_prices[0].parent
    broken = [folder / "billing-training-us-east4-2099-01-02.yaml", folder / "fifo.yaml"]
    broken[0].write_text("- not\n- a table\n")
    os.mkfifo(broken[1])
    try:
        jobs = client(local_platform.vertex_endpoint)
        labels = {"vtx-run-id": "budget-broken-folder", "vtx-budget-usd": "0_000002"}
        job = jobs.create_custom_job(
            parent=PARENT, custom_job=custom_job("spendy", pool(SLEEP), labels=labels)
        )
        done = wait_terminal(jobs, job.name)
        assert done.state == CANCELLED
        assert "billing-local-training-us-central1-2099-01-01" in done.error.message
    finally:
        for path in broken:
            path.unlink(missing_ok=True)


def test_without_a_price_the_budget_is_not_enforced_and_the_log_says_so(
    local_platform: StackOutputs,
) -> None:
    jobs = client(local_platform.vertex_endpoint)
    labels = {"vtx-run-id": "budget-unpriced", "vtx-budget-usd": "0_000001"}
    europe = PARENT.replace(LOCAL_REGION, "europe-west4")  # no figure in its shipped table
    job = jobs.create_custom_job(
        parent=europe, custom_job=custom_job("unpriced", pool("print('done')"), labels=labels)
    )
    done = wait_terminal(jobs, job.name)
    assert done.state == 4  # SUCCEEDED: no figure is made up to stop it
    assert any(
        "budget.max_cost_usd $0.000001 not enforced: no on-demand price for n1-standard-4" in s
        for s in service_lines(local_platform, job.name)
    )


def test_the_runs_earlier_attempts_count_toward_its_budget(
    local_platform: StackOutputs,
) -> None:
    jobs = client(local_platform.vertex_endpoint)
    run = {"vtx-run-id": "budget-two-attempts"}
    with stand_in_for_the_platform({"us-central1": (36.0, 9.0)}, "2099-01-04"):  # 1 cent a second
        first = jobs.create_custom_job(
            parent=PARENT,
            custom_job=custom_job("first", pool("import time; time.sleep(3)"), labels=run),
        )
        ended = wait_terminal(jobs, first.name)
        assert ended.state == 4
        first_usd = 36.0 * (ended.end_time - ended.start_time).total_seconds() / 3600  # >= $0.03
        labels = {**run, "vtx-budget-usd": "0_02"}
        second = jobs.create_custom_job(
            parent=PARENT, custom_job=custom_job("second", pool(SLEEP), labels=labels)
        )
        done = wait_terminal(jobs, second.name)
    assert done.state == CANCELLED
    spent_usd = re.search(r"the run's cost so far \$([0-9.]+)", done.error.message)
    assert spent_usd is not None, done.error.message
    # Not this attempt's alone (it crossed $0.02 at once): the first attempt's too.
    assert float(spent_usd[1]) >= round(first_usd, 6)


def test_a_flex_start_job_is_held_to_its_budget_at_the_flex_start_figure(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("VTX_PRICES_DIR", str(tmp_path))
    write_stand_in(tmp_path, {"us-central1": (1.0, 0.25, 0.5)})
    resource = rest_job("1", 0, strategy="FLEX_START")  # three n1-standard-4
    price = job_price(resource)
    assert (price.usd_per_h, price.kind) == (1.5, "FLEX_START")  # not 3.0 on-demand, 0.75 Spot
    # A newer table without the FLEX_START figure: unknown, so no budget is enforced on a guess.
    write_stand_in(tmp_path, {"us-central1": (1.0, 0.25)}, "2026-11-28")
    unknown = job_price(resource)
    assert unknown.usd_per_h is None
    assert unknown.unknown_because == (
        "no FLEX_START price for n1-standard-4 in billing-local-training-us-central1-2026-11-28"
    )


def test_a_study_trial_counts_the_trials_running_beside_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A study's trials share its run id: a trial's meter holds the others' running time too,
    not only the ended ones'."""
    monkeypatch.setenv("VTX_PRICES_DIR", str(tmp_path))
    write_stand_in(tmp_path, {"us-central1": (1.0, 0.25)})  # n1-standard-4: $1/h
    store = Store(tmp_path / "jobs.sqlite")
    executor = Executor(
        store, LocalSettings(data_dir=tmp_path, cwd=tmp_path, gcs_port=1, grace_s=1.0)
    )
    labels = {"vtx-run-id": "study-1", "vtx-budget-usd": "0_5"}
    beside = {  # a trial started an hour ago, still running: $1 so far
        **trial_job("1", labels),
        "state": "JOB_STATE_RUNNING",
        "startTime": (datetime.now(UTC) - timedelta(hours=1)).isoformat(),
    }
    store.put_job("1", beside, {})
    executor.submit(trial_job("2", labels))
    crossed = executor._over_budget(executor._jobs["2"], running_s=0.0)
    assert crossed is not None and crossed.code is Code.CANCELLED
    assert "the run's cost so far $1.00" in crossed.message
    assert "crossed budget.max_cost_usd $0.50" in crossed.message


def trial_job(job_id: str, labels: dict[str, str]) -> dict:
    return {
        "name": f"{PARENT}/customJobs/{job_id}",
        "displayName": f"trial {job_id}",
        "state": "JOB_STATE_QUEUED",
        "labels": labels,
        "jobSpec": {
            "workerPoolSpecs": [
                {
                    "machineSpec": {"machineType": "n1-standard-4"},
                    "replicaCount": "1",
                    "containerSpec": {"imageUri": "local/t:1", "command": ["python", "-c", ""]},
                }
            ]
        },
    }
