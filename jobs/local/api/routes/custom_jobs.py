"""JobService's CustomJob routes: create, get, list, cancel and delete under
``/v1/projects/{p}/locations/{l}/customJobs`` (mounted by jobs/local/api/job_collection.py),
bodies read and written with protobuf's json_format against the real ``CustomJob`` message; the
jobs run on the executor. What is CustomJob's own is here: its create checks, its output-only
fields, its ids."""

from __future__ import annotations

import secrets

from fastapi import FastAPI

from jobs.local.api.api_errors import ApiError
from jobs.local.api.job_collection import JobCollection, add_job_collection_routes
from jobs.local.api.job_requests import cancel_answer, executor_problems, validation_problems
from jobs.local.custom_jobs.executor import Executor
from jobs.local.custom_jobs.server_defaults import as_answered, with_disk_defaults
from jobs.local.platform.store import Store

OUTPUT_ONLY = ("state", "createTime", "startTime", "endTime", "updateTime", "error")


def _new_job_id(store: Store) -> str:
    """A 19-digit numeric id, like Vertex's."""
    while True:
        job_id = str(10**18 + secrets.randbelow(9 * 10**18))
        if store.get_job(job_id) is None:
            return job_id


def add_custom_job_routes(app: FastAPI, executor: Executor, store: Store) -> None:
    def create(parent: str, location: str, job: dict) -> dict:
        executor.check_fits(job)
        problems = executor_problems(job) + validation_problems(job, location)
        if problems:
            raise ApiError(400, "; ".join(problems))
        for output_only in OUTPUT_ONLY:
            job.pop(output_only, None)
        job["name"] = f"{parent}/customJobs/{_new_job_id(store)}"
        job["jobSpec"] = with_disk_defaults(job.get("jobSpec", {}))
        return executor.submit(job)

    def cancel(job_id: str, name: str) -> dict:
        return cancel_answer("CustomJob", name, executor.cancel(job_id))

    add_job_collection_routes(
        app,
        JobCollection(
            kind="CustomJob",
            segment="customJobs",
            get=store.get_job,
            listed=store.list_jobs,
            create=create,
            cancel=cancel,
            delete=executor.delete,
            answered=as_answered,
        ),
    )
