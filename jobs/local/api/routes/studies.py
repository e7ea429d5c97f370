"""JobService's HyperparameterTuningJob routes: create, get, list, cancel and delete under
``/v1/projects/{p}/locations/{l}/hyperparameterTuningJobs`` (jobs/local/tuning/studies.py runs
them), bodies read and written against the real ``HyperparameterTuningJob`` message."""

from __future__ import annotations

from fastapi import FastAPI, Query, Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool

from jobs.local.api.api_errors import ApiError
from jobs.local.api.job_requests import (
    cancel_answer,
    check_read_mask,
    checked_parent,
    delete_answer,
    job_filter,
    job_in,
    trial_job_problems,
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
from jobs.local.custom_jobs.server_defaults import as_answered
from jobs.local.platform.store import Store
from jobs.local.tuning.studies import Studies
from jobs.local.tuning.study_checks import study_problems


def parse_study(body: bytes) -> dict:
    """Request body -> REST-form HyperparameterTuningJob, through the real proto."""
    from google.cloud.aiplatform_v1 import HyperparameterTuningJob

    return parse_message(HyperparameterTuningJob, body)


def render_study(study: dict, int_enums: bool, read_mask: str = "") -> str:
    from google.cloud.aiplatform_v1 import HyperparameterTuningJob

    return render_message(HyperparameterTuningJob, as_answered(study), int_enums, read_mask)


STUDY_OUTPUT_ONLY = ("state", "createTime", "startTime", "endTime", "updateTime", "error", "trials")


def add_study_routes(app: FastAPI, studies: Studies, executor: Executor, store: Store) -> None:
    """JobService's hyperparameterTuningJobs: create, get, list, cancel, delete."""
    base = "/v1/projects/{project}/locations/{location}/hyperparameterTuningJobs"

    def get_or_404(project: str, location: str, study_id: str) -> dict:
        parent = checked_parent(project, location)
        study = store.get_study(study_id)
        if study is None or not str(study.get("name", "")).startswith(parent + "/"):
            raise ApiError(
                404,
                f"HyperparameterTuningJob {parent}/hyperparameterTuningJobs/{study_id} "
                f"does not exist",
            )
        return study

    def study_response(request: Request, study: dict) -> Response:
        return Response(
            render_study(study, wants_int_enums(request)), media_type="application/json"
        )

    def create(parent: str, location: str, study: dict) -> dict:
        if study.get("trialJobSpec"):
            executor.check_fits({"jobSpec": study["trialJobSpec"]})
        problems = study_problems(study)
        if study.get("trialJobSpec"):
            problems += trial_job_problems(study, location)
        if problems:
            raise ApiError(400, "; ".join(problems))
        for output_only in STUDY_OUTPUT_ONLY:
            study.pop(output_only, None)
        study["name"] = f"{parent}/hyperparameterTuningJobs/{store.unused_id()}"
        return studies.create(study)

    @app.post(base)
    async def create_study(request: Request, project: str, location: str) -> Response:
        parent = checked_parent(project, location)
        study = parse_study(await request.body())
        # The studies' lock is held by their tick: wait for it in a worker thread, as creates
        # of custom jobs do.
        return study_response(request, await run_in_threadpool(create, parent, location, study))

    @app.get(base + "/{study_id}")
    def get_study(request: Request, project: str, location: str, study_id: str) -> Response:
        return study_response(request, get_or_404(project, location, study_id))

    @app.get(base)
    def list_studies(
        request: Request,
        project: str,
        location: str,
        filter: str = "",
        pageSize: int = Query(DEFAULT_PAGE_SIZE, le=2**31 - 1),
        pageToken: str = "",
        readMask: str = "",
    ) -> Response:
        parent = checked_parent(project, location)
        check_read_mask("HyperparameterTuningJob", readMask)
        matches = job_filter(filter)
        studies, token = page_of(
            [
                (p, st)
                for p, st in store.list_studies()
                if job_in(parent, st) and matches(as_answered(st))
            ],
            pageSize,
            pageToken,
        )
        int_enums = wants_int_enums(request)
        rendered = [render_study(study, int_enums, readMask) for study in studies]
        return list_response("hyperparameterTuningJobs", rendered, token)

    @app.post(base + "/{study_id}:cancel")
    def cancel_study(project: str, location: str, study_id: str) -> dict:
        name = get_or_404(project, location, study_id)["name"]
        return cancel_answer("HyperparameterTuningJob", name, studies.cancel(study_id))

    @app.delete(base + "/{study_id}")
    def delete_study(project: str, location: str, study_id: str) -> dict:
        name = get_or_404(project, location, study_id)["name"]
        return delete_answer("HyperparameterTuningJob", name, studies.delete(study_id))
