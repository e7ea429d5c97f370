"""EndpointService v1 and PredictionService's ``:predict`` over REST, as
``aiplatform_v1.EndpointServiceClient(transport="rest")`` and ``PredictionServiceClient`` call
them (``services/endpoint_service/transports/rest_base.py``, ``prediction_service/...``):
``endpoints`` create, get, list, delete, ``:deployModel``, ``:undeployModel``, ``:predict``, and
the GET of operations named under an endpoint (``/v1`` and the ``/ui`` twin the SDK's operations
client asks first). The SDK's ``Endpoint.predict`` builds its prediction client on the same
``api_endpoint`` as the others, so ``:predict`` is served here too. jobs/local/serving/endpoints.py
holds what they mean.

Bodies go through protobuf's json_format against the real messages (``Endpoint``,
``DeployModelRequest``, ``UndeployModelRequest``, ``PredictRequest``, ``PredictResponse``,
``google.longrunning.Operation``): unknown fields are a 400, enums come back as ints when the
client asks. Errors are ModelError (models.py), answered in Google's shape by its handler.
"""

from __future__ import annotations

from collections.abc import Callable

from fastapi import FastAPI, Query, Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool

from jobs.local.api.order_by import ENDPOINT_ORDER_FIELDS, page_in_order
from jobs.local.api.rest_forms import (
    DEFAULT_PAGE_SIZE,
    json_response,
    list_response,
    parse_message,
    refuse_bad_read_mask,
    render_message,
    wants_int_enums,
)
from jobs.local.api.routes.models import render_operation
from jobs.local.serving.endpoints import EndpointRef, Endpoints
from jobs.local.serving.models import ModelError, invalid


def _split(body: dict) -> dict[str, int]:
    return {k: int(v) for k, v in body.get("trafficSplit", {}).items()}


def add_endpoint_routes(
    app: FastAPI, endpoints: Endpoints, parent_of: Callable[[str, str], str]
) -> None:
    """Mount the routes. ``parent_of(project, location)`` is server.py's (404/400 for what the
    platform does not serve). ModelError's handler is routes/models.py's."""
    from google.cloud.aiplatform_v1 import (
        DeployModelRequest,
        Endpoint,
        PredictRequest,
        PredictResponse,
        UndeployModelRequest,
    )

    base = "/v1/projects/{project}/locations/{location}/endpoints"

    def ref(project: str, location: str, endpoint: str) -> EndpointRef:
        return EndpointRef(parent_of(project, location), endpoint)

    @app.post(base)
    async def create_endpoint(
        request: Request, project: str, location: str, endpointId: str | None = None
    ) -> Response:
        body = parse_message(Endpoint, await request.body())
        # The store's lock and writes: in a worker thread, never on the event loop.
        operation = await run_in_threadpool(
            endpoints.create, parent_of(project, location), body, endpointId
        )
        return json_response(render_operation(operation))

    # Before `{endpoint}` routes: `{endpoint}` would also match `ID:deployModel`.
    @app.post(base + "/{endpoint}:deployModel")
    async def deploy_model(
        request: Request, project: str, location: str, endpoint: str
    ) -> Response:
        body = parse_message(DeployModelRequest, await request.body())
        deployed = body.get("deployedModel")
        if not deployed:
            raise invalid("deployedModel: required")
        operation = await run_in_threadpool(
            endpoints.deploy, ref(project, location, endpoint), deployed, _split(body)
        )
        return json_response(render_operation(operation))

    @app.post(base + "/{endpoint}:undeployModel")
    async def undeploy_model(
        request: Request, project: str, location: str, endpoint: str
    ) -> Response:
        body = parse_message(UndeployModelRequest, await request.body())
        if not body.get("deployedModelId"):
            raise invalid("deployedModelId: required")
        # Answered at once; the process is stopped in the background (the operation says when).
        operation = await run_in_threadpool(
            endpoints.undeploy,
            ref(project, location, endpoint),
            body["deployedModelId"],
            _split(body),
        )
        return json_response(render_operation(operation))

    @app.post(base + "/{endpoint}:predict")
    async def predict(request: Request, project: str, location: str, endpoint: str) -> Response:
        body = parse_message(PredictRequest, await request.body())
        if not body.get("instances"):
            raise invalid("instances: at least one instance is required")
        # Awaited, not run in a worker thread: a model that hangs must not hold one of the
        # threads the other routes need (endpoints.py proxies it with a deadline).
        answer = await endpoints.predict(ref(project, location, endpoint), body)
        return json_response(render_message(PredictResponse, answer))

    @app.get(base + "/{endpoint}/operations/{operation}")
    @app.get(
        "/ui/projects/{project}/locations/{location}/endpoints/{endpoint}/operations/{operation}"
    )
    def get_endpoint_operation(
        project: str, location: str, endpoint: str, operation: str
    ) -> Response:
        name = f"{ref(project, location, endpoint).name}/operations/{operation}"
        return json_response(render_operation(endpoints.operation(name)))

    @app.get(base + "/{endpoint}")
    def get_endpoint(request: Request, project: str, location: str, endpoint: str) -> Response:
        if ":" in endpoint:
            raise ModelError(404, f"GET {request.url.path}: Not Found", "NOT_FOUND")
        found = endpoints.get(ref(project, location, endpoint))
        return json_response(render_message(Endpoint, found, wants_int_enums(request)))

    @app.get(base)
    def list_endpoints(
        request: Request,
        project: str,
        location: str,
        filter: str = "",
        pageSize: int = Query(DEFAULT_PAGE_SIZE, le=2**31 - 1),
        pageToken: str = "",
        readMask: str = "",
        orderBy: str = "",
    ) -> Response:
        refuse_bad_read_mask(Endpoint, readMask)
        found, token = page_in_order(
            endpoints.list(parent_of(project, location), filter),
            orderBy,
            ENDPOINT_ORDER_FIELDS,
            pageSize,
            pageToken,
        )
        int_enums = wants_int_enums(request)
        rendered = [render_message(Endpoint, e, int_enums, readMask) for e in found]
        return list_response("endpoints", rendered, token)

    @app.delete(base + "/{endpoint}")
    def delete_endpoint(project: str, location: str, endpoint: str) -> Response:
        return json_response(render_operation(endpoints.delete(ref(project, location, endpoint))))
