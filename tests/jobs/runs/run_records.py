"""Jobs and attempts as Vertex's REST returns them, for the status tests and the CLI's views."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from jobs.runs.logs import LogEntry

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
