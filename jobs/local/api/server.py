"""The local control plane: Vertex AI JobService v1 (custom jobs, hyperparameter tuning jobs)
over REST, FastAPI + uvicorn; the same app over gRPC (TLS) on ``LocalSettings.grpc_port``
(jobs/local/api/grpc_server.py), started and stopped with it.

Serves what ``aiplatform_v1.JobServiceClient(transport="rest")`` sends (see
``aiplatform_v1/services/job_service/transports/rest_base.py``): create, get, list, cancel and
delete under ``/v1/projects/{p}/locations/{l}/customJobs`` and ``.../hyperparameterTuningJobs``
(jobs/local/tuning/studies.py runs those). Bodies are parsed and emitted with protobuf's own
json_format against the real ``CustomJob`` and ``HyperparameterTuningJob`` messages, so
unknown fields are rejected exactly as the proto defines them and enums come back as ints when
the client asks (``$alt=json;enum-encoding=int``). Plus two vtx endpoints: ``/vtx/logs`` and
``/vtx/jobs/{id}:preempt``, which want the platform's token.

Every request first passes ``LocalClientsOnly`` (the rules are in jobs/local/plumbing/guard.py):
local,
non-browser clients only, JSON bodies of at most 1 MiB; then ``BodyDeadline``
(jobs/local/plumbing/request_deadline.py) reads the body whole, each wait at most
``read_timeout_s``, so no route sees half a body and a client that stops is closed. Every error,
ours or the framework's, answers in Google's JSON error shape.

Run by `vtx local up` as ``python -m jobs.local.api.server --settings JSON`` (a ``LocalSettings``,
jobs/local/platform/settings.py, passed whole to the executor), with the token in the environment
variable ``VTX_LOCAL_TOKEN`` (not on the command line, which any user of the machine can read).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import secrets
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Receive, Scope, Send

from jobs.core.catalog import load_catalog
from jobs.core.problems import field_path
from jobs.core.states import JobState
from jobs.custom_jobs.validate import validate_custom_job
from jobs.local.api.billing_routes import add_billing_routes
from jobs.local.api.endpoint_routes import add_endpoint_routes
from jobs.local.api.grpc_server import PEER_CHECKED, start_grpc
from jobs.local.api.model_routes import add_model_routes
from jobs.local.api.persistent_resource_routes import add_persistent_resource_routes
from jobs.local.api.pipeline_routes import add_pipeline_routes
from jobs.local.api.rest_forms import (
    DEFAULT_PAGE_SIZE,
    MAX_PAGE_TOKEN,
    BadRequest,
    list_response,
    page_of,
    parse_message,
    refuse_bad_read_mask,
    render_message,
    wants_int_enums,
)
from jobs.local.custom_jobs.executor import Executor, ExecutorError, NotYetRunning
from jobs.local.custom_jobs.package_runner import spec_problems as package_spec_problems
from jobs.local.custom_jobs.persistent_resources import PersistentResources
from jobs.local.custom_jobs.pipelines import Pipelines
from jobs.local.custom_jobs.server_defaults import as_answered, with_disk_defaults
from jobs.local.custom_jobs.web_access import SHELL_PATH
from jobs.local.platform import vertex_env
from jobs.local.platform.capacity import QUOTA_SERVICE, Capacity, describe_errors
from jobs.local.platform.filters import FilterError, parse_filter
from jobs.local.platform.operations import deleted
from jobs.local.platform.quota_infos import quota_infos
from jobs.local.platform.settings import LocalSettings
from jobs.local.platform.state import LOCAL_PROJECT_NUMBER, LOCAL_REGION, TOKEN_ENV, project_number
from jobs.local.platform.store import STORE_FILE, Store
from jobs.local.plumbing.guard import (
    Refusal,
    body_refusal,
    error_body,
    origin_refusal,
    peer_refusal,
    token_refusal,
)
from jobs.local.plumbing.request_deadline import BodyDeadline
from jobs.local.plumbing.tls import ensure_certificates
from jobs.local.serving.endpoints import Endpoints
from jobs.local.serving.models import Models
from jobs.local.tuning.studies import Studies
from jobs.local.tuning.study_checks import study_problems

log = logging.getLogger(__name__)

HTTP_STATUS = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    405: "UNIMPLEMENTED",
    411: "INVALID_ARGUMENT",
    413: "INVALID_ARGUMENT",
    415: "INVALID_ARGUMENT",
    422: "INVALID_ARGUMENT",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
}
MAX_LOG_ENTRIES = 1000
HEALTH_PATH = "/vtx/health"
CAPACITY_PATH = "/vtx/capacity"
MAX_PREEMPT_WAIT_S = 300.0
PREEMPT_POLL_S = 0.2
GRPC_STOP_GRACE_S = 5.0


class ApiError(Exception):
    def __init__(self, http_code: int, message: str, status: str | None = None) -> None:
        super().__init__(message)
        self.http_code = http_code
        self.message = message
        self.status = status or HTTP_STATUS.get(http_code, "UNKNOWN")


def error_response(http_code: int, message: str, status: str | None = None) -> JSONResponse:
    status = status or HTTP_STATUS.get(http_code, "UNKNOWN")
    return JSONResponse(error_body(http_code, message, status), http_code)


def describe(errors: Sequence[Any]) -> str:
    """Pydantic's (or FastAPI's) errors as 'where: what; ...'."""
    return "; ".join(f"{field_path(e['loc']) if e['loc'] else 'body'}: {e['msg']}" for e in errors)


class LocalClientsOnly:
    """ASGI middleware: the checks of jobs/local/plumbing/guard.py before any route runs. Pure ASGI,
    not BaseHTTPMiddleware: a refused request must never reach the app, body and all."""

    def __init__(self, app: ASGIApp, port: int, token: str) -> None:
        self.app, self.port, self.token = app, port, token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            refusal = self.refusal(scope)
            if refusal is not None:
                response = error_response(refusal.http_code, refusal.message, refusal.status)
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)

    def refusal(self, scope: Scope) -> Refusal | None:
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        # The gRPC server's own requests: it checked their caller's socket, they have none.
        checked = scope.get(PEER_CHECKED, False)
        refusal = (
            (None if checked else peer_refusal(scope["client"][1], self.port))
            or origin_refusal(headers, self.port)
            or body_refusal(scope["method"], headers)
        )
        if refusal is None and scope["path"].startswith("/vtx/") and scope["path"] != HEALTH_PATH:
            refusal = token_refusal(headers, self.token)
        return refusal


# -- proto conversion ----------------------------------------------------------------------------


def parse_custom_job(body: bytes) -> dict:
    """Request body -> REST-form CustomJob, through the real proto."""
    from google.cloud.aiplatform_v1 import CustomJob

    return parse_message(CustomJob, body)


def render_custom_job(job: dict, int_enums: bool, read_mask: str = "") -> str:
    from google.cloud.aiplatform_v1 import CustomJob

    return render_message(CustomJob, as_answered(job), int_enums, read_mask)


def parse_study(body: bytes) -> dict:
    """Request body -> REST-form HyperparameterTuningJob, through the real proto."""
    from google.cloud.aiplatform_v1 import HyperparameterTuningJob

    return parse_message(HyperparameterTuningJob, body)


def render_study(study: dict, int_enums: bool, read_mask: str = "") -> str:
    from google.cloud.aiplatform_v1 import HyperparameterTuningJob

    return render_message(HyperparameterTuningJob, as_answered(study), int_enums, read_mask)


def check_read_mask(message_name: str, read_mask: str) -> None:
    """A List call's readMask is checked once, before any resource is cut by it."""
    from google.cloud import aiplatform_v1

    refuse_bad_read_mask(getattr(aiplatform_v1, message_name), read_mask)


def cancel_answer(kind: str, name: str, was: JobState | None) -> dict:
    """A cancel's answer from the state the resource was in when the cancel was acted on (the
    executor's or the studies' answer, under their lock): None, it was deleted meanwhile (404);
    a final state, it already ended, a 400 FAILED_PRECONDITION (AIP-216's rule for a state
    change a resource's state does not allow; the wording is ours); else ``{}``."""
    if was is None:
        raise ApiError(404, f"{kind} {name} does not exist")
    if was.final:
        raise ApiError(
            400,
            f"{kind} {name} is in state {was.value}: it already ended and cannot be cancelled",
            "FAILED_PRECONDITION",
        )
    return {}


def delete_answer(kind: str, name: str, found: bool) -> dict:
    """A delete's answer: the done operation, or 404 when a delete that raced this one removed
    the resource first."""
    if not found:
        raise ApiError(404, f"{kind} {name} does not exist")
    return deleted(name)


# -- validation ----------------------------------------------------------------------------------


def _validation_problems(job: dict, location: str) -> list[str]:
    """vtx's own rules for CustomJobs (machines, accelerators, pools, env, secrets...), the
    same that `vtx validate` applies."""
    return [str(p) for p in validate_custom_job(job, region=location)]


def _executor_problems(job: dict) -> list[str]:
    """What the local executor itself needs to run a job, whatever the templates allow."""
    problems = []
    pools = job.get("jobSpec", {}).get("workerPoolSpecs", [])
    if not pools or not pools[0]:
        problems.append("jobSpec.workerPoolSpecs[0]: the primary pool is required")
    for i, pool in enumerate(pools):
        if (
            pool
            and not pool.get("containerSpec", {}).get("command")
            and not pool.get("pythonPackageSpec")
        ):
            problems.append(
                f"jobSpec.workerPoolSpecs[{i}].containerSpec.command: required locally, where "
                f"no container runtime can supply the image's ENTRYPOINT; set command "
                f"(e.g. [python, -m, trainer.launch])"
            )
        if pool and "pythonPackageSpec" in pool:
            problems += [
                f"jobSpec.workerPoolSpecs[{i}].pythonPackageSpec.{problem}"
                for problem in package_spec_problems(pool["pythonPackageSpec"])
            ]
        # A NUL in an env value is the rules' (jobs/custom_jobs/rules/environment.py).
        if pool and any("\x00" in word for word in vertex_env.replica_command(pool)):
            problems.append(
                f"jobSpec.workerPoolSpecs[{i}]: its command or args hold a NUL character, "
                f"which no process can be started with; remove it"
            )
    return problems


def _job_problems(job: dict, location: str) -> list[str]:
    """Every check of a CustomJob create, for the pipelines' trainingTaskInputs."""
    return _executor_problems(job) + _validation_problems(job, location)


def _trial_job_problems(study: dict, location: str) -> list[str]:
    """The customJobs checks on the trial's CustomJobSpec, named at trialJobSpec."""
    trial = {"displayName": study.get("displayName") or "trial", "jobSpec": study["trialJobSpec"]}
    problems = _executor_problems(trial) + _validation_problems(trial, location)
    return [f"trial{p[0].upper()}{p[1:]}" if p.startswith("jobSpec") else p for p in problems]


# -- the app -------------------------------------------------------------------------------------


def create_app(settings: LocalSettings, token: str) -> FastAPI:
    """The app, wrapped in LocalClientsOnly: nothing reaches a route without passing it."""
    store = Store(settings.data_dir / STORE_FILE)
    executor = Executor(store, settings)
    studies = Studies(store, executor, settings)
    pipelines = Pipelines(store, executor)
    endpoints = Endpoints(store, Models(store), settings)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        executor.start()
        studies.start()
        pipelines.start()
        endpoints.start()  # deployed models' serving processes start again
        tls = ensure_certificates(settings.data_dir)  # `vtx local up` made them: kept
        grpc_server, app.state.grpc_port = await start_grpc(
            app, settings.port, settings.grpc_port, tls
        )
        yield
        await grpc_server.stop(GRPC_STOP_GRACE_S)  # first: its calls go through the app
        endpoints.shutdown()  # stops every serving process
        await endpoints.aclose()
        pipelines.shutdown()  # these two first: their jobs are then stopped by the executor's
        studies.shutdown()
        executor.shutdown()
        pipelines.tick()  # their jobs were just failed by the shutdown: so are they
        store.close()

    # No OpenAPI pages: a browser has nothing to read here.
    app = FastAPI(
        title="vtx local control plane",
        lifespan=lifespan,
        openapi_url=None,
        docs_url=None,
        redoc_url=None,
    )
    app.state.executor = executor
    app.state.store = store
    # Inside the guard (added first, so it runs second): a refused request's body is never read.
    app.add_middleware(BodyDeadline, timeout_s=settings.read_timeout_s, log=log)
    app.add_middleware(LocalClientsOnly, port=settings.port, token=token)
    _add_error_handlers(app)
    _add_job_routes(app, executor, store)
    _add_study_routes(app, studies, executor, store)
    _add_quota_routes(app, executor)
    add_billing_routes(app)  # the billing catalog stand-in: jobs/local/api/billing_routes.py
    _add_vtx_routes(app, executor, store)
    add_pipeline_routes(app, pipelines, _parent, _job_problems)  # jobs/local/api/pipeline_routes.py
    add_model_routes(app, Models(store), _parent)  # ModelService: jobs/local/api/model_routes.py
    add_endpoint_routes(app, endpoints, _parent)  # Endpoint/Prediction: endpoint_routes.py
    add_persistent_resource_routes(app, PersistentResources(store, executor), _parent)
    return app


def _add_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def _api_error(_request: Request, exc: ApiError) -> JSONResponse:
        return error_response(exc.http_code, exc.message, exc.status)

    @app.exception_handler(BadRequest)
    async def _bad_request_form(_request: Request, exc: BadRequest) -> JSONResponse:
        return error_response(exc.http_code, exc.message, exc.status)

    @app.exception_handler(ExecutorError)
    async def _executor_error(_request: Request, exc: ExecutorError) -> JSONResponse:
        return error_response(exc.http_code, exc.message, exc.status)

    @app.exception_handler(RequestValidationError)
    async def _bad_request(_request: Request, exc: RequestValidationError) -> JSONResponse:
        return error_response(400, describe(exc.errors()))

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return error_response(exc.status_code, f"{request.method} {request.url.path}: {exc.detail}")

    @app.exception_handler(Exception)
    async def _internal(request: Request, exc: Exception) -> JSONResponse:
        # A bug of ours: the traceback goes to server.log, the client gets Google's shape.
        log.exception("unhandled error on %s %s", request.method, request.url.path)
        return error_response(500, f"internal error of the local control plane: {exc!r}")


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


def _parent(project: str, location: str) -> str:
    """Every region the catalog knows is served, each with its own jobs, as Vertex's regional
    endpoints are: a capacity ladder's rung in another region lands there. Names carry the
    project's number, as Vertex's do."""
    number = _check_project(project)
    regions = load_catalog().regions
    if location not in regions:
        raise ApiError(
            400,
            f"location {location!r} is not served here: the local platform serves the catalog's "
            f"regions ({', '.join(regions)})",
        )
    return f"projects/{number}/locations/{location}"


def _in(parent: str, job: dict) -> bool:
    return str(job.get("name", "")).startswith(parent + "/")


def _check_project(project: str) -> str:
    """The number of ``project`` (any project id or number is served, see
    state.project_number); 404 for what is neither."""
    number = project_number(project)
    if number is None:
        raise ApiError(
            404,
            f"project {project!r} does not exist: a project id is 6 to 30 lowercase letters, "
            f"digits or hyphens starting with a letter, a project number is digits",
        )
    return number


def _filter(text: str) -> Callable[[dict], bool]:
    """A List call's ``filter`` (jobs/local/platform/filters.py's grammar), or its 400."""
    try:
        return parse_filter(text)
    except FilterError as exc:
        raise ApiError(400, str(exc)) from exc


def _job_name(store: Store, job_id: str) -> str:
    """A job's resource name (its region is the one it was created in)."""
    job = store.get_job(job_id)
    if job is None:  # deleted since it logged
        return f"projects/{LOCAL_PROJECT_NUMBER}/locations/{LOCAL_REGION}/customJobs/{job_id}"
    return str(job["name"])


def _new_job_id(store: Store) -> str:
    """A 19-digit numeric id, like Vertex's."""
    while True:
        job_id = str(10**18 + secrets.randbelow(9 * 10**18))
        if store.get_job(job_id) is None:
            return job_id


def _add_job_routes(app: FastAPI, executor: Executor, store: Store) -> None:
    base = "/v1/projects/{project}/locations/{location}/customJobs"

    def get_or_404(project: str, location: str, job_id: str) -> dict:
        parent = _parent(project, location)
        job = store.get_job(job_id)
        if job is None or not _in(parent, job):
            raise ApiError(404, f"CustomJob {parent}/customJobs/{job_id} does not exist")
        return job

    def job_response(request: Request, job: dict) -> Response:
        return Response(
            render_custom_job(job, wants_int_enums(request)), media_type="application/json"
        )

    def create(parent: str, location: str, job: dict) -> dict:
        executor.check_fits(job)
        problems = _executor_problems(job) + _validation_problems(job, location)
        if problems:
            raise ApiError(400, "; ".join(problems))
        for output_only in ("state", "createTime", "startTime", "endTime", "updateTime", "error"):
            job.pop(output_only, None)
        job["name"] = f"{parent}/customJobs/{_new_job_id(store)}"
        job["jobSpec"] = with_disk_defaults(job.get("jobSpec", {}))
        return executor.submit(job)

    @app.post(base)
    async def create_custom_job(request: Request, project: str, location: str) -> Response:
        parent = _parent(project, location)
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
        parent = _parent(project, location)
        check_read_mask("CustomJob", readMask)
        matches = _filter(filter)
        jobs, token = page_of(
            [(p, j) for p, j in store.list_jobs() if _in(parent, j) and matches(as_answered(j))],
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


STUDY_OUTPUT_ONLY = ("state", "createTime", "startTime", "endTime", "updateTime", "error", "trials")


def _add_study_routes(app: FastAPI, studies: Studies, executor: Executor, store: Store) -> None:
    """JobService's hyperparameterTuningJobs: create, get, list, cancel, delete."""
    base = "/v1/projects/{project}/locations/{location}/hyperparameterTuningJobs"

    def get_or_404(project: str, location: str, study_id: str) -> dict:
        parent = _parent(project, location)
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
            problems += _trial_job_problems(study, location)
        if problems:
            raise ApiError(400, "; ".join(problems))
        for output_only in STUDY_OUTPUT_ONLY:
            study.pop(output_only, None)
        study["name"] = f"{parent}/hyperparameterTuningJobs/{store.unused_id()}"
        return studies.create(study)

    @app.post(base)
    async def create_study(request: Request, project: str, location: str) -> Response:
        parent = _parent(project, location)
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
        parent = _parent(project, location)
        check_read_mask("HyperparameterTuningJob", readMask)
        matches = _filter(filter)
        studies, token = page_of(
            [
                (p, st)
                for p, st in store.list_studies()
                if _in(parent, st) and matches(as_answered(st))
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


def _add_quota_routes(app: FastAPI, executor: Executor) -> None:
    """The Cloud Quotas API's reads (v1 quotaInfos list and get) for Vertex's service, from the
    capacity model; like the JobService routes they take no token (a quota client sends none
    here)."""
    base = "/v1/projects/{project}/locations/{location}/services/{service}/quotaInfos"

    def infos(project: str, location: str, service: str) -> list[dict]:
        number = _check_project(project)
        if location != "global":
            raise ApiError(400, f"location {location!r}: quotaInfos live under locations/global")
        if service != QUOTA_SERVICE:
            raise ApiError(404, f"service {service!r} is not served here: only {QUOTA_SERVICE}")
        return quota_infos(executor.capacity, number)

    @app.get(base)
    def list_quota_infos(
        project: str,
        location: str,
        service: str,
        pageSize: int = Query(0, ge=0, le=2**31 - 1),
        pageToken: str = "",
    ) -> dict:
        found = infos(project, location, service)
        if pageToken and not (pageToken.isdigit() and int(pageToken) < len(found)):
            raise ApiError(400, f"invalid pageToken {pageToken!r}: pass the nextPageToken given")
        start = int(pageToken or 0)
        end = start + pageSize if pageSize else len(found)
        return {
            "quotaInfos": found[start:end],
            "nextPageToken": str(end) if end < len(found) else "",
        }

    @app.get(base + "/{quota_id}")
    def get_quota_info(project: str, location: str, service: str, quota_id: str) -> dict:
        for info in infos(project, location, service):
            if info["quotaId"] == quota_id:
                return info
        raise ApiError(404, f"QuotaInfo {quota_id!r} of {service} does not exist")


class HinderRequest(BaseModel):
    """``:stall`` and ``:slow``: which replica, how much slower (``:slow`` only), how long to
    wait for it to run."""

    model_config = ConfigDict(extra="forbid")

    replica: str | None = None
    """e.g. workerpool0-0; None: the last replica."""
    factor: float | None = Field(default=None, gt=1.0, le=1000.0)
    wait_s: float = Field(default=0.0, ge=0.0, le=MAX_PREEMPT_WAIT_S)


class PreemptRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    replica: str | None = None
    """e.g. workerpool1-0; None: the last replica."""
    wait_s: float = Field(default=0.0, ge=0.0, le=MAX_PREEMPT_WAIT_S)
    """How long to wait for a job that is queued or starting to run its replica."""


def _add_vtx_routes(app: FastAPI, executor: Executor, store: Store) -> None:
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


def main() -> None:
    import uvicorn

    parser = argparse.ArgumentParser(description="vtx local control plane")
    parser.add_argument(
        "--settings",
        type=LocalSettings.model_validate_json,
        required=True,
        help="LocalSettings as JSON (vtx local up passes them)",
    )
    args = parser.parse_args()
    settings: LocalSettings = args.settings
    token = os.environ.pop(TOKEN_ENV, "")  # popped: replicas inherit this environment
    if not token:
        parser.error(f"{TOKEN_ENV} must hold the platform's token (vtx local up sets it)")
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    app = create_app(settings, token)
    uvicorn.run(app, host="127.0.0.1", port=settings.port, log_level="warning")


if __name__ == "__main__":
    main()
