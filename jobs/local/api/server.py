"""The local control plane: Vertex AI JobService v1 (custom jobs, hyperparameter tuning jobs)
over REST, FastAPI + uvicorn; the same app over gRPC (TLS) on ``LocalSettings.grpc_port``
(jobs/local/api/grpc_server.py), started and stopped with it. Each service's routes are a module
of their own (jobs/local/api/routes/custom_jobs.py, routes/studies.py, routes/quotas.py,
routes/vtx.py...), mounted by ``create_app``.

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
import logging
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Receive, Scope, Send

from jobs.local.api.api_errors import ApiError, describe, error_response
from jobs.local.api.grpc_server import PEER_CHECKED, start_grpc
from jobs.local.api.job_requests import checked_parent, job_problems
from jobs.local.api.rest_forms import BadRequest
from jobs.local.api.routes.billing import add_billing_routes
from jobs.local.api.routes.custom_jobs import add_custom_job_routes
from jobs.local.api.routes.endpoints import add_endpoint_routes
from jobs.local.api.routes.models import add_model_routes
from jobs.local.api.routes.persistent_resources import add_persistent_resource_routes
from jobs.local.api.routes.pipelines import add_pipeline_routes
from jobs.local.api.routes.quotas import add_quota_routes
from jobs.local.api.routes.studies import add_study_routes
from jobs.local.api.routes.vtx import HEALTH_PATH, add_vtx_routes
from jobs.local.custom_jobs.executor import Executor, ExecutorError
from jobs.local.custom_jobs.persistent_resources import PersistentResources
from jobs.local.custom_jobs.pipelines import Pipelines
from jobs.local.platform.settings import LocalSettings
from jobs.local.platform.state import TOKEN_ENV
from jobs.local.platform.store import STORE_FILE, Store
from jobs.local.plumbing.guard import (
    Refusal,
    body_refusal,
    origin_refusal,
    peer_refusal,
    token_refusal,
)
from jobs.local.plumbing.request_deadline import BodyDeadline
from jobs.local.plumbing.tls import ensure_certificates
from jobs.local.serving.endpoints import Endpoints
from jobs.local.serving.models import Models
from jobs.local.tuning.studies import Studies

log = logging.getLogger(__name__)

GRPC_STOP_GRACE_S = 5.0


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
    add_custom_job_routes(app, executor, store)  # jobs/local/api/routes/custom_jobs.py
    add_study_routes(app, studies, executor, store)  # jobs/local/api/routes/studies.py
    add_quota_routes(app, executor)  # Cloud Quotas: jobs/local/api/routes/quotas.py
    add_billing_routes(app)  # the billing catalog stand-in: jobs/local/api/routes/billing.py
    add_vtx_routes(app, executor, store)  # jobs/local/api/routes/vtx.py
    add_pipeline_routes(app, pipelines, job_problems)  # routes/pipelines.py
    add_model_routes(app, Models(store), checked_parent)  # ModelService: routes/models.py
    add_endpoint_routes(app, endpoints, checked_parent)  # Endpoint/Prediction: routes/endpoints.py
    add_persistent_resource_routes(app, PersistentResources(store, executor), checked_parent)
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
