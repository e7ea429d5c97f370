"""`vtx status` and `vtx list`: the tables and JSON documents."""

from __future__ import annotations

import io
import json
from datetime import timedelta

import pytest
import yaml
from rich.console import Console

from jobs.core.catalog import PriceTable, load_catalog
from jobs.runs.watch import run_status
from jobs.vertex.job_records import JobRecord
from tests.jobs.runs.run_records import T0, rest_job, trainer
from vtx.views.runs import (
    OutputFormat,
    attempts_table,
    list_json,
    print_document,
    resources,
    status_json,
    status_table,
)


def _text(renderable: object) -> str:
    console = Console(width=300, record=True, file=io.StringIO())
    console.print(renderable)
    return console.export_text()


def test_rest_json_reads_int64_strings_skipped_pools_and_absent_fields() -> None:
    rest = rest_job("7", 0)
    rest["jobSpec"]["workerPoolSpecs"] = [
        {
            "machineSpec": {
                "machineType": "a3-highgpu-8g",
                "acceleratorType": "NVIDIA_H100_80GB",
                "acceleratorCount": 8,
            },
        },
        {},  # no worker pool: the numbering keeps its place
        {"machineSpec": {"machineType": "n1-highcpu-16"}, "replicaCount": "2"},
    ]
    rest["startTime"] = "2026-11-23T10:00:01.123456789Z"  # Vertex writes nanoseconds
    job = JobRecord.from_rest(rest)
    assert job.start_time == T0 + timedelta(seconds=1, microseconds=123456)
    assert [(p.name, p.replicas) for p in job.pools] == [("workerpool0", 1), ("workerpool2", 2)]
    assert job.pools[1].replica_names == ["workerpool2-0", "workerpool2-1"]
    assert resources(job) == "1 x a3-highgpu-8g + 8 x NVIDIA_H100_80GB; 2 x n1-highcpu-16"
    assert job.run_id == "run-1" and job.job_id == "7"
    assert job.end_time is None and job.error is None and not job.terminal
    assert job.output_prefix == "gs://c/runs/run-1/"


def test_an_unknown_price_makes_the_cost_unknown_not_zero() -> None:
    job = JobRecord.from_rest(rest_job("1", 0, started_s=0))
    job.rest["jobSpec"]["workerPoolSpecs"][0]["machineSpec"]["machineType"] = "n9-imaginary-4"
    status = run_status([job], [], "us-central1", T0 + timedelta(hours=1), local=False)
    assert status.newest.price.usd_per_h is None
    assert status.usd is None
    document = status_json(status)
    assert document["cost"]["usd"] is None and document["cost"]["usd_per_h"] is None
    assert document["cost"]["unpriced"] == ["n9-imaginary-4"]
    assert "unknown so far" in _text(status_table(status))
    assert "no on-demand price for n9-imaginary-4" in _text(status_table(status))


STATUS_KEYS = {
    "run_id", "job", "state", "error", "outputs", "attempts", "pools", "progress",
    "checkpoints", "elapsed_s", "running_s", "cost",
}  # fmt: skip


def test_status_json_keys_are_the_documented_ones_and_yaml_says_the_same(
    capsys: pytest.CaptureFixture[str],
) -> None:
    job = JobRecord.from_rest(rest_job("1", 0, started_s=0))
    entries = [
        trainer("1", 0, "training", step=0, total_steps=10),
        trainer("1", 10, "train", step=5, loss=1.5, tokens_per_s=10.0),
    ]
    status = run_status([job], entries, "us-central1", T0 + timedelta(seconds=20), local=False)
    document = status_json(status)
    assert set(document) == STATUS_KEYS
    assert set(document["progress"]) == {
        "step", "total_steps", "tokens_per_s", "loss", "updated", "steps_per_s", "eta_s", "done",
    }  # fmt: skip
    assert set(document["checkpoints"]) == {
        "committed", "last_step", "last_path", "root", "stored_steps", "stored_error",
    }  # fmt: skip
    assert set(document["cost"]) == {
        "usd", "usd_per_h", "strategy", "price", "unpriced", "price_table",
        "usd_unknown_because", "usd_excludes_disks", "projected_usd", "budget_usd",
        "stopped_by_budget",
    }  # fmt: skip
    assert set(document["attempts"][0]) == {
        "attempt", "job", "state", "resources", "created", "started", "ended", "running_s",
        "usd_per_h", "usd", "price", "price_region", "price_table", "price_table_as_of",
        "price_skus", "usd_unknown_because", "usd_excludes_disks", "warm_pool_share",
        "error",
    }  # fmt: skip
    replica = document["pools"][1]["replicas"][0]
    assert set(replica) == {"replica", "last_log", "restarts"}
    assert document["progress"]["eta_s"] == pytest.approx(10.0)
    assert document["progress"]["updated"] == "2026-11-23T10:00:10Z"

    out = Console(width=40)  # JSON is never wrapped, whatever the terminal
    print_document(out, document, OutputFormat.json)
    assert json.loads(capsys.readouterr().out) == document
    print_document(out, document, OutputFormat.yaml)
    assert yaml.safe_load(capsys.readouterr().out) == document


def _refreshed(region: str, on_demand_sku: str, spot_sku: str) -> PriceTable:
    """A refreshed table for ``region`` pricing n1-standard-4 with the SKUs named."""
    figure = {"basis": "catalog", "spot_basis": "catalog", "fetched_at": "2026-11-27T03:00:00Z"}
    return PriceTable.model_validate(
        {
            "name": f"billing-training-{region}-2026-11-27",
            "region": region,
            "currency": "USD",
            "as_of": "2026-11-27",
            "source": "https://cloudbilling.googleapis.com/v1/services/C7E2-9256-1C43/skus",
            "machines": {
                "n1-standard-4": {
                    **figure,
                    "usd_per_h": 0.2,
                    "sku": on_demand_sku,
                    "sku_description": f"Custom Training n1-standard-4 in {region}",
                    "spot_usd_per_h": 0.05,
                    "spot_sku": spot_sku,
                    "spot_sku_description": f"Spot Custom Training n1-standard-4 in {region}",
                }
            },
        }
    )


def test_each_ladder_attempt_names_the_table_and_skus_of_its_own_price() -> None:
    cat = load_catalog()
    regions = ("us-central1", "europe-west4")
    others = tuple(t for t in cat.price_tables if t.region not in regions)
    tables = (
        _refreshed("us-central1", "US-OD", "US-SPOT"),
        _refreshed("europe-west4", "EU-OD", "EU-SPOT"),
    )
    cat = cat.model_copy(update={"price_tables": (*others, *tables)})
    spot_us = JobRecord.from_rest(rest_job("1", 0, strategy="SPOT", started_s=0, ended_s=60))
    on_demand_eu = rest_job("2", 60, started_s=60)
    on_demand_eu["name"] = on_demand_eu["name"].replace("us-central1", "europe-west4")
    rungs = [spot_us, JobRecord.from_rest(on_demand_eu)]
    status = run_status(rungs, [], "us-central1", T0 + timedelta(seconds=120), False, cat)
    attempts = status_json(status)["attempts"]
    assert [(a["price_table"], a["price_table_as_of"]) for a in attempts] == [
        ("billing-training-us-central1-2026-11-27", "2026-11-27"),
        ("billing-training-europe-west4-2026-11-27", "2026-11-27"),
    ]
    assert [[s["sku"] for s in a["price_skus"]] for a in attempts] == [["US-SPOT"], ["EU-OD"]]
    assert attempts[1]["price_skus"][0] == {
        "name": "n1-standard-4",
        "sku": "EU-OD",
        "description": "Custom Training n1-standard-4 in europe-west4",
        "fetched_at": "2026-11-27T03:00:00Z",
    }


def _on(job_id: str, created_s: float, machine: dict, state: str) -> JobRecord:
    rest = rest_job(job_id, created_s, state=state, started_s=created_s, ended_s=created_s + 1)
    rest["jobSpec"]["workerPoolSpecs"] = [{"machineSpec": machine, "replicaCount": "1"}]
    return JobRecord.from_rest(rest)


def test_a_ladder_from_a_tpu_slice_to_a_gpu_shows_what_each_attempt_ran_on() -> None:
    # A TPU VM is submitted with its machine and topology only (no acceleratorType): its chips
    # come from the catalog, so it reads as the GPU rung after it does.
    stocked_out = _on(
        "1", 0, {"machineType": "ct5lp-hightpu-4t", "tpuTopology": "4x4"}, "JOB_STATE_FAILED"
    )
    on_l4 = _on(
        "2", 5, {"machineType": "g2-standard-8", "acceleratorType": "NVIDIA_L4",
                 "acceleratorCount": 1}, "JOB_STATE_SUCCEEDED",
    )  # fmt: skip
    pod = _on("3", 9, {"machineType": "cloud-tpu", "acceleratorType": "TPU_V2",
                       "acceleratorCount": 32}, "JOB_STATE_FAILED")  # fmt: skip
    assert resources(stocked_out) == "1 x ct5lp-hightpu-4t + 16 x TPU_V5_LITEPOD"
    assert resources(pod) == "1 x cloud-tpu + 32 x TPU_V2"  # as submitted
    status = run_status([on_l4, stocked_out], [], "us-central1", T0 + timedelta(hours=1),
                        local=False)  # fmt: skip
    shown = _text(status_table(status)) + _text(attempts_table(status))
    assert "1 x g2-standard-8 + 1 x NVIDIA_L4" in shown
    assert "1 x ct5lp-hightpu-4t + 16 x TPU_V5_LITEPOD" in shown
    document = status_json(status)
    assert [a["resources"] for a in document["attempts"]] == [
        "1 x ct5lp-hightpu-4t + 16 x TPU_V5_LITEPOD",
        "1 x g2-standard-8 + 1 x NVIDIA_L4",
    ]
    [pool] = list_json(status.attempts[:1])[0]["pools"]  # the first attempt, on the slice
    assert (pool["accelerator"], pool["accelerator_count"]) == ("TPU_V5_LITEPOD", 16)


def test_list_json_rows() -> None:
    job = JobRecord.from_rest(
        rest_job("1", 0, started_s=0, ended_s=90, state="JOB_STATE_SUCCEEDED")
    )
    status = run_status([job], [], "us-central1", T0 + timedelta(hours=1), local=False)
    (row,) = list_json(status.attempts)
    assert set(row) == {
        "run_id", "attempt", "job", "name", "state", "resources", "pools", "created",
        "duration_s", "usd_per_h", "usd", "usd_unknown_because", "budget_usd",
    }  # fmt: skip
    assert row["duration_s"] == 90.0 and row["resources"] == "3 x n1-standard-4"
    assert [p["role"] for p in row["pools"]] == ["chief", "workers"]
