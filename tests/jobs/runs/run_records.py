"""Jobs and attempts as Vertex's REST returns them, for the status tests and the CLI's views."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from jobs.runs.goodput import Goodput, goodput_of
from jobs.runs.logs import LogEntry
from jobs.runs.watch import attempts_of
from jobs.vertex.job_records import JobRecord

T0 = datetime(2026, 11, 23, 10, 0, tzinfo=UTC)


PARENT = "projects/p/locations/us-central1"


def stamp(seconds: float) -> str:
    return (T0 + timedelta(seconds=seconds)).isoformat().replace("+00:00", "Z")


def rest_job(
    job_id: str,
    created_s: float,
    state: str = "JOB_STATE_RUNNING",
    started_s: float | None = None,
    ended_s: float | None = None,
    strategy: str = "STANDARD",
    run_id: str = "run-1",
) -> dict:
    pools = [
        {"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": "1"},
        {"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": "2"},
    ]
    job: dict[str, Any] = {
        "name": f"{PARENT}/customJobs/{job_id}",
        "displayName": run_id,
        "state": state,
        "labels": {"vtx-run-id": run_id},
        "createTime": stamp(created_s),
        "jobSpec": {
            "workerPoolSpecs": pools,
            "scheduling": {"strategy": strategy},
            "baseOutputDirectory": {"outputUriPrefix": f"gs://c/runs/{run_id}/"},
        },
    }
    if started_s is not None:
        job["startTime"] = stamp(started_s)
    if ended_s is not None:
        job["endTime"] = stamp(ended_s)
    return job


def trainer(job_id: str, at_s: float, message: str, rank: int = 0, **keys: Any) -> LogEntry:
    line = json.dumps({"severity": "INFO", "message": message, "rank": rank, **keys})
    return LogEntry(stamp(at_s), f"{PARENT}/customJobs/{job_id}", "workerpool0-0", 0, line)


# ---- a run for the goodput timeline -------------------------------------------------------

STOP = "stop requested (SIGTERM): checkpointing and exiting"


def text(job_id: str, at_s: float, message: str, replica: str = "workerpool0-0") -> LogEntry:
    return LogEntry(stamp(at_s), f"{PARENT}/customJobs/{job_id}", replica, 0, message)


def preempted_once(job_id: str = "1") -> list[LogEntry]:
    """One start until a SIGTERM at step 12, a second from its checkpoint to the end (20)."""
    return [
        text(job_id, 15, "importing torch"),
        trainer(job_id, 25, "training", step=0, total_steps=20),
        trainer(job_id, 35, "train", step=10, loss=3.0, tokens_per_s=100.0, tokens=1000),
        trainer(job_id, 36, "checkpoint committed", step=10, path="gs://c/step-10"),  # beside
        trainer(job_id, 37, "checkpoint started", step=10, blocked_s=1.5),
        trainer(job_id, 40, STOP, step=12),
        trainer(job_id, 42, "checkpoint saved", step=12, blocked_s=2.0),
        text(job_id, 50, "importing torch"),
        trainer(job_id, 58, "resumed", step=12, restore_s=3.0),
        trainer(job_id, 59, "training", step=12, total_steps=20),
        trainer(job_id, 67, "train", step=20, loss=2.0, tokens_per_s=120.0, tokens=2000),
        trainer(job_id, 67, "train", rank=1, step=20, loss=9.0),  # not rank 0's
        text(job_id, 68, "a warning", replica="workerpool1-0"),  # not the primary replica
        trainer(job_id, 70, "eval", step=20, eval_loss=2.1, eval_s=2.0),
        trainer(job_id, 80, "done", step=20),
    ]


def goodput(jobs: list[dict], entries: list[LogEntry], now_s: float = 1000) -> Goodput:
    now = T0 + timedelta(seconds=now_s)
    attempts = attempts_of([JobRecord.from_rest(j) for j in jobs], "us-central1", now)
    return goodput_of(attempts, entries, now)
