"""vtx's own routes on the local platform: health, a run's logs, the capacity model, and the
faults a drill injects into a running job (preempt, stall, slow), which want the platform's
token."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from fastapi import FastAPI, Query, Request
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.concurrency import run_in_threadpool

from jobs.local.api.api_errors import ApiError, describe
from jobs.local.api.rest_forms import MAX_PAGE_TOKEN
from jobs.local.custom_jobs.executor import Executor, NotYetRunning
from jobs.local.custom_jobs.web_access import SHELL_PATH
from jobs.local.platform.capacity import Capacity, describe_errors
from jobs.local.platform.state import LOCAL_PROJECT_NUMBER, LOCAL_REGION
from jobs.local.platform.store import Store

MAX_LOG_ENTRIES = 1000


HEALTH_PATH = "/vtx/health"


CAPACITY_PATH = "/vtx/capacity"


MAX_PREEMPT_WAIT_S = 300.0


PREEMPT_POLL_S = 0.2


async def once_running(job_id: str, wait_s: float, act: Callable[[], str]) -> dict:
    """Do ``act`` to a job's replica (a preemption, a stall) once the replica runs, trying again
    for up to ``wait_s``; answers the job and the replica acted on."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            replica = await run_in_threadpool(act)
        except KeyError as exc:
            raise ApiError(404, f"no job {job_id}") from exc
        except NotYetRunning:
            if time.monotonic() >= deadline:
                raise
            await asyncio.sleep(PREEMPT_POLL_S)
            continue
        return {"job": job_id, "replica": replica}


def _job_name(store: Store, job_id: str) -> str:
    """A job's resource name (its region is the one it was created in)."""
    job = store.get_job(job_id)
    if job is None:  # deleted since it logged
        return f"projects/{LOCAL_PROJECT_NUMBER}/locations/{LOCAL_REGION}/customJobs/{job_id}"
    return str(job["name"])


class HinderRequest(BaseModel):
    """``:stall`` and ``:slow``: which replica, how much slower (``:slow`` only), how long to
    wait for it to run."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    replica: str | None = None
    """e.g. workerpool0-0; None: the last replica."""
    factor: float | None = Field(default=None, gt=1.0, le=1000.0)
    wait_s: float = Field(default=0.0, ge=0.0, le=MAX_PREEMPT_WAIT_S)


class PreemptRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    replica: str | None = None
    """e.g. workerpool1-0; None: the last replica."""
    wait_s: float = Field(default=0.0, ge=0.0, le=MAX_PREEMPT_WAIT_S)
    """How long to wait for a job that is queued or starting to run its replica."""


def add_vtx_routes(app: FastAPI, executor: Executor, store: Store) -> None:
    @app.get(HEALTH_PATH)
    def health() -> dict:
        """Liveness, and how many jobs are in each active state (for `vtx local status`)."""
        return {"status": "ok", "active_jobs": executor.active_counts()}

    @app.get("/vtx/logs")
    def logs(
        run_id: str | None = None,
        job: str | None = None,
        cursor: int = Query(0, ge=0, le=MAX_PAGE_TOKEN),  # log cursors are row ids too
    ) -> dict:
        """Log entries after ``cursor`` for every job of a run (or one job), oldest first."""
        if (run_id is None) == (job is None):
            raise ApiError(400, "pass exactly one of run_id=RUN or job=projects/.../customJobs/ID")
        job_id = job.rsplit("/", 1)[-1] if job else None
        entries = store.read_logs(
            run_id=run_id, job_id=job_id, cursor=cursor, limit=MAX_LOG_ENTRIES
        )
        names = {i: _job_name(store, i) for i in {e.job_id for e in entries}}
        return {
            "entries": [
                {
                    "timestamp": e.ts,
                    "job": names[e.job_id],
                    "attempt": e.attempt,
                    "replica": e.replica,
                    "restart": e.restart,
                    "message": e.message,
                }
                for e in entries
            ],
            "cursor": entries[-1].seq if entries else cursor,
        }

    @app.get(SHELL_PATH)
    def web_access_shell(job_id: str, replica: str) -> dict:
        """Where a job's webAccessUris point: no interactive shell is served locally."""
        job = store.get_job(job_id)
        if job is None:
            raise ApiError(404, f"no job {job_id}")
        raise ApiError(
            501,
            f"interactive shells are not served by the local platform: {replica} of job "
            f"{job_id} is a process on this machine, running in {executor.settings.cwd}; "
            f"`vtx local status` lists it",
            "UNIMPLEMENTED",
        )

    @app.get(CAPACITY_PATH)
    def get_capacity() -> dict:
        """The capacity model, and what the active jobs hold of it per region."""
        return {
            "capacity": executor.capacity.model_dump(mode="json", exclude_defaults=True),
            "in_use": executor.capacity_in_use(),
        }

    @app.put(CAPACITY_PATH)
    async def put_capacity(request: Request) -> dict:
        """Replace the capacity model (the YAML file's shape, as JSON); waiting jobs see it at
        the executor's next tick."""
        try:
            new = Capacity.model_validate_json(await request.body() or b"{}")
        except ValidationError as exc:
            raise ApiError(400, f"invalid capacity: {describe_errors(exc)}") from exc
        await run_in_threadpool(executor.set_capacity, new)  # the executor's lock: not here
        return await run_in_threadpool(get_capacity)

    async def hinder(request: Request, job_id: str, slow: bool) -> dict:
        try:
            body = HinderRequest.model_validate_json(await request.body() or b"{}")
        except ValidationError as exc:
            raise ApiError(400, f"invalid request: {describe(exc.errors())}") from exc
        if slow != (body.factor is not None):
            raise ApiError(400, "factor is what :slow takes (above 1), and :stall does not")
        return await once_running(
            job_id, body.wait_s, lambda: executor.hinder(job_id, body.replica, body.factor)
        )

    @app.post("/vtx/jobs/{job_id}:stall")
    async def stall(request: Request, job_id: str) -> dict:
        return await hinder(request, job_id, slow=False)

    @app.post("/vtx/jobs/{job_id}:slow")
    async def slow(request: Request, job_id: str) -> dict:
        return await hinder(request, job_id, slow=True)

    @app.post("/vtx/jobs/{job_id}:preempt")
    async def preempt(request: Request, job_id: str) -> dict:
        try:
            body = PreemptRequest.model_validate_json(await request.body() or b"{}")
        except ValidationError as exc:
            raise ApiError(400, f"invalid preempt request: {describe(exc.errors())}") from exc
        return await once_running(
            job_id, body.wait_s, lambda: executor.preempt(job_id, body.replica)
        )
