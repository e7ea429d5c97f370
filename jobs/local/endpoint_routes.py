"""EndpointService v1 and PredictionService's ``:predict`` over REST, as
``aiplatform_v1.EndpointServiceClient(transport="rest")`` and ``PredictionServiceClient`` call
them (``services/endpoint_service/transports/rest_base.py``, ``prediction_service/...``):
``endpoints`` create, get, list, delete, ``:deployModel``, ``:undeployModel``, ``:predict``, and
the GET of operations named under an endpoint (``/v1`` and the ``/ui`` twin the SDK's operations
client asks first). The SDK's ``Endpoint.predict`` builds its prediction client on the same
``api_endpoint`` as the others, so ``:predict`` is served here too. jobs/local/endpoints.py
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

from jobs.local.endpoints import EndpointRef, Endpoints
from jobs.local.model_routes import DEFAULT_PAGE_SIZE, MAX_PAGE_TOKEN, render_operation
from jobs.local.models import ModelError, invalid


def parse_message(message_class: type, body: bytes) -> dict:
    """A request body -> REST-form dict, through the real proto (a 400 naming what is wrong)."""
    from google.protobuf import json_format

    message = message_class.pb(message_class())
    try:
        json_format.Parse(body.decode("utf-8") or "{}", message, ignore_unknown_fields=False)
    except UnicodeDecodeError as exc:
        raise invalid(f"Invalid JSON payload received. Not UTF-8: {exc}") from exc
    except (json_format.ParseError, RecursionError) as exc:
        raise invalid(f"Invalid JSON payload received. {exc}") from exc
    return json_format.MessageToDict(message)


def render(message_class: type, value: dict, int_enums: bool = False) -> str:
    from google.protobuf import json_format

    message = message_class.pb(message_class())
    json_format.ParseDict(value, message)
    return json_format.MessageToJson(message, use_integers_for_enums=int_enums, indent=None)


def _int_enums(request: Request) -> bool:
    return "enum-encoding=int" in request.query_params.get("$alt", "")


def _json(body: str) -> Response:
    return Response(body, media_type="application/json")


def _split(body: dict) -> dict[str, int]:
    return {k: int(v) for k, v in body.get("trafficSplit", {}).items()}


def add_endpoint_routes(
    app: FastAPI, endpoints: Endpoints, parent_of: Callable[[str, str], str]
) -> None:
    """Mount the routes. ``parent_of(project, location)`` is server.py's (404/400 for what the
    platform does not serve). ModelError's handler is model_routes.py's."""
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
        operation = endpoints.create(parent_of(project, location), body, endpointId)
        return _json(render_operation(operation))

    # Before `{endpoint}` routes: `{endpoint}` would also match `ID:deployModel`.
    @app.post(base + "/{endpoint}:deployModel")
    async def deploy_model(
        request: Request, project: str, location: str, endpoint: str
    ) -> Response:
        body = parse_message(DeployModelRequest, await request.body())
        deployed = body.get("deployedModel")
        if not deployed:
            raise invalid("deployedModel: required")
        operation = endpoints.deploy(ref(project, location, endpoint), deployed, _split(body))
        return _json(render_operation(operation))

    @app.post(base + "/{endpoint}:undeployModel")
    async def undeploy_model(
        request: Request, project: str, location: str, endpoint: str
    ) -> Response:
        body = parse_message(UndeployModelRequest, await request.body())
        if not body.get("deployedModelId"):
            raise invalid("deployedModelId: required")
        operation = endpoints.undeploy(
            ref(project, location, endpoint), body["deployedModelId"], _split(body)
        )
        return _json(render_operation(operation))

    @app.post(base + "/{endpoint}:predict")
    async def predict(request: Request, project: str, location: str, endpoint: str) -> Response:
        body = parse_message(PredictRequest, await request.body())
        if not body.get("instances"):
            raise invalid("instances: at least one instance is required")
        # The model generates for seconds: off the event loop, so other calls are answered.
        answer = await run_in_threadpool(endpoints.predict, ref(project, location, endpoint), body)
        return _json(render(PredictResponse, answer))

    @app.get(base + "/{endpoint}/operations/{operation}")
    @app.get(
        "/ui/projects/{project}/locations/{location}/endpoints/{endpoint}/operations/{operation}"
    )
    def get_endpoint_operation(
        project: str, location: str, endpoint: str, operation: str
    ) -> Response:
        name = f"{ref(project, location, endpoint).name}/operations/{operation}"
        return _json(render_operation(endpoints.operation(name)))

    @app.get(base + "/{endpoint}")
    def get_endpoint(request: Request, project: str, location: str, endpoint: str) -> Response:
        if ":" in endpoint:
            raise ModelError(404, f"GET {request.url.path}: Not Found", "NOT_FOUND")
        found = endpoints.get(ref(project, location, endpoint))
        return _json(render(Endpoint, found, _int_enums(request)))

    @app.get(base)
    def list_endpoints(
        request: Request,
        project: str,
        location: str,
        filter: str = "",
        pageSize: int = Query(DEFAULT_PAGE_SIZE, le=2**31 - 1),
        pageToken: str = "",
    ) -> Response:
        if pageToken and not (pageToken.isdigit() and int(pageToken) <= MAX_PAGE_TOKEN):
            raise invalid(f"invalid pageToken {pageToken!r}: pass the nextPageToken given")
        found = endpoints.list(parent_of(project, location), filter)
        if pageToken:
            found = [(p, e) for p, e in found if p < int(pageToken)]
        size = pageSize if pageSize > 0 else DEFAULT_PAGE_SIZE
        page = found[:size]
        int_enums = _int_enums(request)
        body = '{"endpoints": [' + ",".join(render(Endpoint, e, int_enums) for _, e in page) + "]"
        if len(found) > size:
            body += f', "nextPageToken": "{page[-1][0]}"'
        return _json(body + "}")

    @app.delete(base + "/{endpoint}")
    def delete_endpoint(project: str, location: str, endpoint: str) -> Response:
        return _json(render_operation(endpoints.delete(ref(project, location, endpoint))))
