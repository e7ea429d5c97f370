"""PipelineService v1's trainingPipelines over REST, as
``aiplatform_v1.PipelineServiceClient(transport="rest")`` calls them: create, get, list,
``:cancel`` and delete under ``/v1/projects/{p}/locations/{l}/trainingPipelines`` (mounted by
jobs/local/api/job_collection.py). jobs/local/custom_jobs/pipelines.py runs them.

Bodies go through protobuf's json_format against the real ``TrainingPipeline`` message (unknown
fields are a 400, enums are ints when the client asks), as the CustomJob routes do. A create is
checked as a custom task (pipelines.custom_job_spec_problems), then its ``trainingTaskInputs``
by the customJobs checks, named at ``trainingTaskInputs``.
"""

from __future__ import annotations

from collections.abc import Callable

from fastapi import FastAPI

from jobs.local.api.api_errors import ApiError
from jobs.local.api.job_collection import JobCollection, add_job_collection_routes
from jobs.local.custom_jobs.pipelines import Pipelines, custom_job_spec_problems, parse_job_spec

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


def checked_job_spec(
    pipeline: dict, location: str, pipelines: Pipelines, job_checks: JobChecks
) -> None:
    """Everything a create must pass, each problem named where it is: the custom task's shape,
    the replica count the executor can hold (first: the other checks walk every replica),
    then the customJobs checks on the spec."""
    problems = custom_job_spec_problems(pipeline)
    if problems:
        raise ApiError(400, "; ".join(problems))
    try:
        spec = parse_job_spec(pipeline["trainingTaskInputs"])
    except ValueError as exc:
        raise ApiError(400, str(exc)) from exc
    pipelines.executor.check_fits({"jobSpec": spec})
    job = {"displayName": pipeline["displayName"], "jobSpec": spec}
    problems = [
        f"trainingTaskInputs{p.removeprefix('jobSpec')}" if p.startswith("jobSpec") else p
        for p in job_checks(job, location)
    ]
    if problems:
        raise ApiError(400, "; ".join(problems))


def add_pipeline_routes(app: FastAPI, pipelines: Pipelines, job_checks: JobChecks) -> None:
    """The five trainingPipelines routes; ``job_checks`` is job_requests.job_problems."""

    def create(parent: str, location: str, pipeline: dict) -> dict:
        checked_job_spec(pipeline, location, pipelines, job_checks)
        for field in OUTPUT_ONLY:
            pipeline.pop(field, None)
        pipeline["name"] = f"{parent}/trainingPipelines/{pipelines.store.unused_id()}"
        return pipelines.create(pipeline)

    def cancel(pipeline_id: str, name: str) -> dict:
        # The service refuses an ended pipeline itself (its FAILED_PRECONDITION); None: a
        # delete won the race.
        if pipelines.cancel(pipeline_id) is None:
            raise ApiError(404, f"TrainingPipeline {name} does not exist")
        return {}

    add_job_collection_routes(
        app,
        JobCollection(
            kind="TrainingPipeline",
            segment="trainingPipelines",
            get=pipelines.store.get_pipeline,
            listed=pipelines.store.list_pipelines,
            create=create,
            cancel=cancel,
            delete=pipelines.delete,
        ),
    )
