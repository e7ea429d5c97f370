"""PipelineService v1's trainingPipelines over REST, as
``aiplatform_v1.PipelineServiceClient(transport="rest")`` calls them: create, get, list,
``:cancel`` and delete under ``/v1/projects/{p}/locations/{l}/trainingPipelines``.
jobs/local/custom_jobs/pipelines.py runs them.

Bodies go through protobuf's json_format against the real ``TrainingPipeline`` message (unknown
fields are a 400, enums are ints when the client asks), as server.py does for CustomJobs. A
create is checked as a custom task (pipelines.custom_job_spec_problems), then its
``trainingTaskInputs`` by the customJobs checks, named at ``trainingTaskInputs``.
"""

from __future__ import annotations

from collections.abc import Callable

from fastapi import FastAPI, Query, Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool

from jobs.local.api.read_mask import ReadMaskError, apply_read_mask
from jobs.local.api.rest_forms import (
    DEFAULT_PAGE_SIZE,
    list_response,
    page_of,
    parse_message,
    render_message,
    wants_int_enums,
)
from jobs.local.custom_jobs.pipelines import (
    PipelineError,
    Pipelines,
    custom_job_spec_problems,
    parse_job_spec,
)
from jobs.local.platform.filters import FilterError, parse_filter
from jobs.local.platform.operations import deleted

OUTPUT_ONLY = (
    "name",
    "state",
    "error",
    "createTime",
    "startTime",
    "endTime",
    "updateTime",
    "trainingTaskMetadata",
)

JobChecks = Callable[[dict, str], list[str]]
"""(CustomJob in REST form, location) -> the customJobs create checks' problems."""


def invalid(message: str) -> PipelineError:
    return PipelineError(400, "INVALID_ARGUMENT", message)


def not_found(name: str) -> PipelineError:
    return PipelineError(404, "NOT_FOUND", f"TrainingPipeline {name} does not exist")


def parse_pipeline(body: bytes) -> dict:
    """Request body -> REST-form TrainingPipeline, through the real proto."""
    from google.cloud.aiplatform_v1 import TrainingPipeline

    return parse_message(TrainingPipeline, body)


def render_pipeline(pipeline: dict, int_enums: bool, read_mask: str = "") -> str:
    from google.cloud.aiplatform_v1 import TrainingPipeline

    return render_message(TrainingPipeline, pipeline, int_enums, read_mask)


def checked_job_spec(
    pipeline: dict, location: str, pipelines: Pipelines, job_checks: JobChecks
) -> None:
    """Everything a create must pass, each problem named where it is: the custom task's shape,
    the replica count the executor can hold (first: the other checks walk every replica),
    then the customJobs checks on the spec."""
    problems = custom_job_spec_problems(pipeline)
    if problems:
        raise invalid("; ".join(problems))
    try:
        spec = parse_job_spec(pipeline["trainingTaskInputs"])
    except ValueError as exc:
        raise invalid(str(exc)) from exc
    pipelines.executor.check_fits({"jobSpec": spec})
    job = {"displayName": pipeline["displayName"], "jobSpec": spec}
    problems = [
        f"trainingTaskInputs{p.removeprefix('jobSpec')}" if p.startswith("jobSpec") else p
        for p in job_checks(job, location)
    ]
    if problems:
        raise invalid("; ".join(problems))


def add_pipeline_routes(
    app: FastAPI,
    pipelines: Pipelines,
    parent_of: Callable[[str, str], str],
    job_checks: JobChecks,
) -> None:
    """The five trainingPipelines routes; ``parent_of(project, location)`` is server.py's
    ``checked_parent`` (the project's number, the served regions)."""
    base = "/v1/projects/{project}/locations/{location}/trainingPipelines"

    def get_or_404(project: str, location: str, pipeline_id: str) -> dict:
        parent = parent_of(project, location)
        pipeline = pipelines.store.get_pipeline(pipeline_id)
        if pipeline is None or not pipeline["name"].startswith(parent + "/"):
            raise not_found(f"{parent}/trainingPipelines/{pipeline_id}")
        return pipeline

    def respond(request: Request, pipeline: dict) -> Response:
        return Response(
            render_pipeline(pipeline, wants_int_enums(request)), media_type="application/json"
        )

    @app.post(base)
    async def create_training_pipeline(request: Request, project: str, location: str) -> Response:
        parent = parent_of(project, location)
        pipeline = parse_pipeline(await request.body())
        checked_job_spec(pipeline, location, pipelines, job_checks)
        for field in OUTPUT_ONLY:
            pipeline.pop(field, None)
        pipeline["name"] = f"{parent}/trainingPipelines/{pipelines.store.unused_id()}"
        # The pipelines' lock is held by their thread: wait for it off the event loop.
        return respond(request, await run_in_threadpool(pipelines.create, pipeline))

    @app.get(base + "/{pipeline_id}")
    def get_training_pipeline(
        request: Request, project: str, location: str, pipeline_id: str
    ) -> Response:
        return respond(request, get_or_404(project, location, pipeline_id))

    @app.get(base)
    def list_training_pipelines(
        request: Request,
        project: str,
        location: str,
        filter: str = "",
        pageSize: int = Query(DEFAULT_PAGE_SIZE, le=2**31 - 1),
        pageToken: str = "",
        readMask: str = "",
    ) -> Response:
        parent = parent_of(project, location)
        try:
            matches = parse_filter(filter)
            apply_read_mask_check(readMask)
        except (FilterError, ReadMaskError) as exc:
            raise invalid(str(exc)) from exc
        pipelines_here = [
            (pos, p)
            for pos, p in pipelines.store.list_pipelines()
            if p["name"].startswith(parent + "/") and matches(p)
        ]
        found, token = page_of(pipelines_here, pageSize, pageToken)
        rendered = [render_pipeline(p, wants_int_enums(request), readMask) for p in found]
        return list_response("trainingPipelines", rendered, token)

    # get_or_404 checks the parent; a delete racing these can still win: the service's answer,
    # read under its lock, says so.
    @app.post(base + "/{pipeline_id}:cancel")
    def cancel_training_pipeline(project: str, location: str, pipeline_id: str) -> dict:
        name = get_or_404(project, location, pipeline_id)["name"]
        if pipelines.cancel(pipeline_id) is None:
            raise not_found(name)
        return {}

    @app.delete(base + "/{pipeline_id}")
    def delete_training_pipeline(project: str, location: str, pipeline_id: str) -> dict:
        name = get_or_404(project, location, pipeline_id)["name"]
        if not pipelines.delete(pipeline_id):
            raise not_found(name)
        return deleted(name)


def apply_read_mask_check(read_mask: str) -> None:
    """A list's readMask is checked once, against the TrainingPipeline message."""
    from google.cloud.aiplatform_v1 import TrainingPipeline

    apply_read_mask(TrainingPipeline, {}, read_mask)
