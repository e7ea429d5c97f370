"""The REST routes every job-like collection (customJobs, hyperparameterTuningJobs,
trainingPipelines) answers the same way: get, list (filter, pageSize, pageToken, readMask,
int enums), ``:cancel``, delete, and the create wrapper that parses the body through the real
proto and runs the kind's own create in a worker thread. ``JobCollection`` says what differs:
the kind, where its resources are stored, and the service that acts on them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI, Query, Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool

from jobs.local.api.api_errors import ApiError
from jobs.local.api.job_requests import (
    check_read_mask,
    checked_parent,
    delete_answer,
    job_filter,
    job_in,
)
from jobs.local.api.rest_forms import (
    DEFAULT_PAGE_SIZE,
    list_response,
    page_of,
    parse_message,
    render_message,
    wants_int_enums,
)


def _as_stored(resource: dict) -> dict:
    return resource


@dataclass(frozen=True)
class JobCollection:
    """One job-like collection under ``/v1/projects/{p}/locations/{l}/``."""

    kind: str
    """The Vertex kind, which is also its aiplatform_v1 message: "CustomJob"."""
    segment: str
    """Its collection in URLs, names and list answers: "customJobs"."""
    get: Callable[[str], dict | None]
    """id -> the stored resource, or None."""
    listed: Callable[[], list[tuple[int, dict]]]
    """Every stored resource with its list position (the store's order)."""
    create: Callable[[str, str, dict], dict]
    """(parent, location, parsed body) -> the created resource: the kind's checks, its
    output-only fields dropped, its name given, handed to its service. Runs in a worker
    thread: the services' locks are held by their ticks."""
    cancel: Callable[[str, str], dict]
    """(id, name) -> the cancel's answer (job_requests.cancel_answer's rules, or the
    service's own)."""
    delete: Callable[[str], bool]
    """id -> False when a delete that raced this one removed the resource first."""
    answered: Callable[[dict], dict] = _as_stored
    """A stored resource as the API answers (and filters) it."""

    def message(self) -> Any:
        from google.cloud import aiplatform_v1

        return getattr(aiplatform_v1, self.kind)


def add_job_collection_routes(app: FastAPI, jobs: JobCollection) -> None:
    """Mount create, get, list, cancel and delete for ``jobs``."""
    base = f"/v1/projects/{{project}}/locations/{{location}}/{jobs.segment}"

    def get_or_404(project: str, location: str, job_id: str) -> dict:
        parent = checked_parent(project, location)
        job = jobs.get(job_id)
        if job is None or not job_in(parent, job):
            raise ApiError(404, f"{jobs.kind} {parent}/{jobs.segment}/{job_id} does not exist")
        return job

    def render(job: dict, int_enums: bool, read_mask: str = "") -> str:
        return render_message(jobs.message(), jobs.answered(job), int_enums, read_mask)

    def respond(request: Request, job: dict) -> Response:
        return Response(render(job, wants_int_enums(request)), media_type="application/json")

    @app.post(base)
    async def create_job(request: Request, project: str, location: str) -> Response:
        parent = checked_parent(project, location)
        job = parse_message(jobs.message(), await request.body())
        # A create waits for its service's lock, which the service's tick holds: in a worker
        # thread, so that it never stops the event loop (and every other request) meanwhile.
        return respond(request, await run_in_threadpool(jobs.create, parent, location, job))

    @app.get(base + "/{job_id}")
    def get_job(request: Request, project: str, location: str, job_id: str) -> Response:
        return respond(request, get_or_404(project, location, job_id))

    @app.get(base)
    def list_jobs(
        request: Request,
        project: str,
        location: str,
        filter: str = "",
        pageSize: int = Query(DEFAULT_PAGE_SIZE, le=2**31 - 1),
        pageToken: str = "",
        readMask: str = "",
    ) -> Response:
        parent = checked_parent(project, location)
        check_read_mask(jobs.kind, readMask)
        matches = job_filter(filter)
        found, token = page_of(
            [
                (pos, job)
                for pos, job in jobs.listed()
                if job_in(parent, job) and matches(jobs.answered(job))
            ],
            pageSize,
            pageToken,
        )
        int_enums = wants_int_enums(request)
        return list_response(jobs.segment, [render(j, int_enums, readMask) for j in found], token)

    # get_or_404 checks the parent; a delete racing these can still win: the service's answer,
    # read under its lock, says so.
    @app.post(base + "/{job_id}:cancel")
    def cancel_job(project: str, location: str, job_id: str) -> dict:
        return jobs.cancel(job_id, get_or_404(project, location, job_id)["name"])

    @app.delete(base + "/{job_id}")
    def delete_job(project: str, location: str, job_id: str) -> dict:
        name = get_or_404(project, location, job_id)["name"]
        return delete_answer(jobs.kind, name, jobs.delete(job_id))
