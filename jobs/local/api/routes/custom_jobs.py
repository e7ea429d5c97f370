"""JobService's CustomJob routes: create, get, list, cancel and delete under
``/v1/projects/{p}/locations/{l}/customJobs``, bodies read and written with protobuf's json_format
against the real ``CustomJob`` message; the jobs run on the executor."""

from __future__ import annotations

import secrets

from fastapi import FastAPI, Query, Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool

from jobs.local.api.api_errors import ApiError
from jobs.local.api.job_requests import (
    cancel_answer,
    check_read_mask,
    checked_parent,
    delete_answer,
    executor_problems,
    job_filter,
    job_in,
    validation_problems,
)
from jobs.local.api.rest_forms import (
    DEFAULT_PAGE_SIZE,
    list_response,
    page_of,
    parse_message,
    render_message,
    wants_int_enums,
)
from jobs.local.custom_jobs.executor import Executor
from jobs.local.custom_jobs.server_defaults import as_answered, with_disk_defaults
from jobs.local.platform.store import Store


def parse_custom_job(body: bytes) -> dict:
    """Request body -> REST-form CustomJob, through the real proto."""
    from google.cloud.aiplatform_v1 import CustomJob

    return parse_message(CustomJob, body)


def render_custom_job(job: dict, int_enums: bool, read_mask: str = "") -> str:
    from google.cloud.aiplatform_v1 import CustomJob

    return render_message(CustomJob, as_answered(job), int_enums, read_mask)


def _new_job_id(store: Store) -> str:
    """A 19-digit numeric id, like Vertex's."""
    while True:
        job_id = str(10**18 + secrets.randbelow(9 * 10**18))
        if store.get_job(job_id) is None:
            return job_id


def add_custom_job_routes(app: FastAPI, executor: Executor, store: Store) -> None:
    base = "/v1/projects/{project}/locations/{location}/customJobs"

    def get_or_404(project: str, location: str, job_id: str) -> dict:
        parent = checked_parent(project, location)
        job = store.get_job(job_id)
        if job is None or not job_in(parent, job):
            raise ApiError(404, f"CustomJob {parent}/customJobs/{job_id} does not exist")
        return job

    def job_response(request: Request, job: dict) -> Response:
        return Response(
            render_custom_job(job, wants_int_enums(request)), media_type="application/json"
        )

    def create(parent: str, location: str, job: dict) -> dict:
        executor.check_fits(job)
        problems = executor_problems(job) + validation_problems(job, location)
        if problems:
            raise ApiError(400, "; ".join(problems))
        for output_only in ("state", "createTime", "startTime", "endTime", "updateTime", "error"):
            job.pop(output_only, None)
        job["name"] = f"{parent}/customJobs/{_new_job_id(store)}"
        job["jobSpec"] = with_disk_defaults(job.get("jobSpec", {}))
        return executor.submit(job)

    @app.post(base)
    async def create_custom_job(request: Request, project: str, location: str) -> Response:
        parent = checked_parent(project, location)
        job = parse_custom_job(await request.body())
        # submit waits for the executor's lock, which its tick holds: in a worker thread, so
        # that a create never stops the event loop (and every other request) while it waits.
        return job_response(request, await run_in_threadpool(create, parent, location, job))

    @app.get(base + "/{job_id}")
    def get_custom_job(request: Request, project: str, location: str, job_id: str) -> Response:
        return job_response(request, get_or_404(project, location, job_id))

    @app.get(base)
    def list_custom_jobs(
        request: Request,
        project: str,
        location: str,
        filter: str = "",
        pageSize: int = Query(DEFAULT_PAGE_SIZE, le=2**31 - 1),
        pageToken: str = "",
        readMask: str = "",
    ) -> Response:
        parent = checked_parent(project, location)
        check_read_mask("CustomJob", readMask)
        matches = job_filter(filter)
        jobs, token = page_of(
            [(p, j) for p, j in store.list_jobs() if job_in(parent, j) and matches(as_answered(j))],
            pageSize,
            pageToken,
        )
        int_enums = wants_int_enums(request)
        rendered = [render_custom_job(job, int_enums, readMask) for job in jobs]
        return list_response("customJobs", rendered, token)

    @app.post(base + "/{job_id}:cancel")
    def cancel_custom_job(project: str, location: str, job_id: str) -> dict:
        name = get_or_404(project, location, job_id)["name"]
        return cancel_answer("CustomJob", name, executor.cancel(job_id))

    @app.delete(base + "/{job_id}")
    def delete_custom_job(project: str, location: str, job_id: str) -> dict:
        name = get_or_404(project, location, job_id)["name"]
        return delete_answer("CustomJob", name, executor.delete(job_id))
