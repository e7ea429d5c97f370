"""JobService's HyperparameterTuningJob routes: create, get, list, cancel and delete under
``/v1/projects/{p}/locations/{l}/hyperparameterTuningJobs`` (mounted by
jobs/local/api/job_collection.py; jobs/local/tuning/studies.py runs them), bodies read and
written against the real ``HyperparameterTuningJob`` message. What is a study's own is here:
its create checks and its output-only fields."""

from __future__ import annotations

from fastapi import FastAPI

from jobs.local.api.api_errors import ApiError
from jobs.local.api.job_collection import JobCollection, add_job_collection_routes
from jobs.local.api.job_requests import cancel_answer, trial_job_problems
from jobs.local.custom_jobs.executor import Executor
from jobs.local.custom_jobs.server_defaults import as_answered
from jobs.local.platform.store import Store
from jobs.local.tuning.studies import Studies
from jobs.local.tuning.study_checks import study_problems

STUDY_OUTPUT_ONLY = ("state", "createTime", "startTime", "endTime", "updateTime", "error", "trials")


def add_study_routes(app: FastAPI, studies: Studies, executor: Executor, store: Store) -> None:
    """JobService's hyperparameterTuningJobs: create, get, list, cancel, delete."""

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

    def cancel(study_id: str, name: str) -> dict:
        return cancel_answer("HyperparameterTuningJob", name, studies.cancel(study_id))

    add_job_collection_routes(
        app,
        JobCollection(
            kind="HyperparameterTuningJob",
            segment="hyperparameterTuningJobs",
            get=store.get_study,
            listed=store.list_studies,
            create=create,
            cancel=cancel,
            delete=studies.delete,
            answered=as_answered,
        ),
    )
