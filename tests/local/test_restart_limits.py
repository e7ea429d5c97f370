"""Vertex's retry limits for lost workers: 5 restarts of a worker, then up to 3 retries of the
whole job, then the job fails. Driven on the executor directly (no processes are started on
these paths)."""

from __future__ import annotations

from pathlib import Path

from jobs.local.executor import (
    JOB_RETRY_LIMIT,
    WORKER_RESTART_LIMIT,
    Executor,
    Replica,
    Runtime,
)
from jobs.local.settings import LocalSettings
from jobs.local.store import Store


def _setup(tmp_path: Path, restarts: int, job_retries: int, disable: bool = False):
    settings = LocalSettings(data_dir=tmp_path, cwd=tmp_path)
    executor = Executor(Store(tmp_path / "db.sqlite"), settings)
    job = {
        "name": "projects/1/locations/us-central1/customJobs/42",
        "state": "JOB_STATE_RUNNING",
        "jobSpec": {"scheduling": {"disableRetries": disable}},
    }
    worker = Replica(name="workerpool1-0", pool=1, index=0, restarts=restarts, status="exited")
    primary = Replica(name="workerpool0-0", pool=0, index=0, restarts=2, status="exited")
    rt = Runtime(replicas=[primary, worker], job_retries=job_retries)
    return executor, job, rt, worker


def test_a_worker_lost_too_often_retries_the_whole_job_with_fresh_counts(tmp_path: Path) -> None:
    executor, job, rt, worker = _setup(tmp_path, WORKER_RESTART_LIMIT, 0)
    executor._restart_after_loss(job, rt, worker)
    assert rt.stopping == "restart"
    assert rt.job_retries == 1
    assert [r.restarts for r in rt.replicas] == [0, 0]


def test_the_job_fails_when_its_retries_are_used_up(tmp_path: Path) -> None:
    executor, job, rt, worker = _setup(tmp_path, WORKER_RESTART_LIMIT, JOB_RETRY_LIMIT)
    executor._restart_after_loss(job, rt, worker)
    assert rt.stopping == "failed"
    assert rt.final_error is not None
    assert "workerpool1-0 was lost 6 times" in rt.final_error["message"]


def test_disable_retries_fails_instead_of_retrying_the_job(tmp_path: Path) -> None:
    executor, job, rt, worker = _setup(tmp_path, WORKER_RESTART_LIMIT, 0, disable=True)
    executor._restart_after_loss(job, rt, worker)
    assert rt.stopping == "failed"
