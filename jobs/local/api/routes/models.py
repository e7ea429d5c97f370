"""ModelService v1 over REST, as ``aiplatform_v1.ModelServiceClient(transport="rest")`` calls
it (``aiplatform_v1/services/model_service/transports/rest_base.py``): ``models:upload``,
get (``models/ID[@VERSION]``), list, ``:listVersions``, ``:mergeVersionAliases``, delete,
``:deleteVersion``, and the GET of their long-running operations. jobs/local/serving/models.py holds
what they mean.

Bodies go through protobuf's json_format against the real messages (``UploadModelRequest``,
``Model``, ``google.longrunning.Operation``): unknown fields are a 400 and enums come back as
ints when the client asks, as server.py does for CustomJobs. Operations are served under the
``/v1`` paths and the ``/ui`` twins that the SDK's operations client tries first (its
``GetOperation`` HTTP rules list ``/ui/{name=projects/*/locations/*/operations/*}`` before the
``/v1`` ones).
"""

from __future__ import annotations

from collections.abc import Callable

from fastapi import FastAPI, Query, Request
from fastapi.responses import JSONResponse, Response
from starlette.concurrency import run_in_threadpool

from jobs.local.api.order_by import MODEL_ORDER_FIELDS, VERSION_ORDER_FIELDS, page_in_order
from jobs.local.api.rest_forms import (
    DEFAULT_PAGE_SIZE,
    json_response,
    list_response,
    parse_message,
    refuse_bad_read_mask,
    render_message,
    wants_int_enums,
)
from jobs.local.plumbing.guard import error_body
from jobs.local.serving.models import ModelError, ModelRef, Models


def parse_upload(body: bytes) -> dict:
    """An UploadModelRequest body -> REST-form dict, through the real proto."""
    from google.cloud.aiplatform_v1 import UploadModelRequest

    return parse_message(UploadModelRequest, body)


def parse_merge(body: bytes) -> dict:
    """A MergeVersionAliasesRequest body (``versionAliases``) -> REST-form dict."""
    from google.cloud.aiplatform_v1 import MergeVersionAliasesRequest

    return parse_message(MergeVersionAliasesRequest, body)


def render_model(model: dict, int_enums: bool, read_mask: str = "") -> str:
    from google.cloud.aiplatform_v1 import Model

    return render_message(Model, model, int_enums, read_mask)


def render_operation(operation: dict) -> str:
    """Through ``google.longrunning.Operation``: the Any payloads are checked against the
    aiplatform types, which importing aiplatform_v1 registers."""
    from google.cloud import aiplatform_v1  # noqa: F401  (registers the payload types)
    from google.longrunning import operations_pb2
    from google.protobuf import json_format

    message = operations_pb2.Operation()
    json_format.ParseDict(operation, message)
    return json_format.MessageToJson(message, indent=None)


def _list_body(items: list[dict], token: str | None, int_enums: bool, read_mask: str) -> Response:
    return list_response("models", [render_model(m, int_enums, read_mask) for m in items], token)


def _check_read_mask(read_mask: str) -> None:
    from google.cloud.aiplatform_v1 import Model

    refuse_bad_read_mask(Model, read_mask)


def add_model_routes(app: FastAPI, models: Models, parent_of: Callable[[str, str], str]) -> None:
    """Mount the routes. ``parent_of(project, location)`` is server.py's: the location's
    resource name (``projects/NUMBER/locations/L``), or its 404/400 for a project or region
    the platform does not serve."""
    base = "/v1/projects/{project}/locations/{location}/models"

    @app.exception_handler(ModelError)
    async def _model_error(_request: Request, exc: ModelError) -> JSONResponse:
        return JSONResponse(error_body(exc.http_code, exc.message, exc.status), exc.http_code)

    def ref(project: str, location: str, model: str) -> ModelRef:
        return ModelRef.parse(parent_of(project, location), model)

    @app.post(base + ":upload")
    async def upload_model(request: Request, project: str, location: str) -> Response:
        parent = parent_of(project, location)
        body = parse_upload(await request.body())
        operation = await run_in_threadpool(  # the store's writes: off the event loop
            models.upload,
            parent,
            body.get("model", {}),
            body.get("parentModel"),
            body.get("modelId"),
        )
        return json_response(render_operation(operation))

    # Before `{model}` routes: `{model}` would also match `ID:listVersions`.
    @app.get(base + "/{model}:listVersions")
    def list_model_versions(
        request: Request,
        project: str,
        location: str,
        model: str,
        filter: str = "",
        pageSize: int = Query(DEFAULT_PAGE_SIZE, le=2**31 - 1),
        pageToken: str = "",
        readMask: str = "",
        orderBy: str = "",
    ) -> Response:
        _check_read_mask(readMask)
        found = models.versions(ref(project, location, model), filter)
        items, token = page_in_order(
            found, orderBy, VERSION_ORDER_FIELDS, pageSize, pageToken, newest_first=False
        )
        return _list_body(items, token, wants_int_enums(request), readMask)

    @app.post(base + "/{model}:mergeVersionAliases")
    async def merge_version_aliases(
        request: Request, project: str, location: str, model: str
    ) -> Response:
        changes = parse_merge(await request.body()).get("versionAliases", [])
        merged = models.merge_aliases(ref(project, location, model), changes)
        return json_response(render_model(merged, wants_int_enums(request)))

    @app.delete(base + "/{model}:deleteVersion")
    def delete_model_version(project: str, location: str, model: str) -> Response:
        return json_response(render_operation(models.delete_version(ref(project, location, model))))

    @app.get(base + "/{model}/operations/{operation}")
    @app.get("/ui/projects/{project}/locations/{location}/models/{model}/operations/{operation}")
    def get_model_operation(project: str, location: str, model: str, operation: str) -> Response:
        name = f"{ref(project, location, model).name}/operations/{operation}"
        return json_response(render_operation(models.operation(name)))

    @app.get("/v1/projects/{project}/locations/{location}/operations/{operation}")
    @app.get("/ui/projects/{project}/locations/{location}/operations/{operation}")
    def get_operation(project: str, location: str, operation: str) -> Response:
        name = f"{parent_of(project, location)}/operations/{operation}"
        return json_response(render_operation(models.operation(name)))

    @app.get(base + "/{model}")
    def get_model(request: Request, project: str, location: str, model: str) -> Response:
        if ":" in model:
            raise ModelError(404, f"GET {request.url.path}: Not Found", "NOT_FOUND")
        return json_response(
            render_model(models.get(ref(project, location, model)), wants_int_enums(request))
        )

    @app.get(base)
    def list_models(
        request: Request,
        project: str,
        location: str,
        filter: str = "",
        pageSize: int = Query(DEFAULT_PAGE_SIZE, le=2**31 - 1),
        pageToken: str = "",
        readMask: str = "",
        orderBy: str = "",
    ) -> Response:
        _check_read_mask(readMask)
        found = models.list(parent_of(project, location), filter)
        items, token = page_in_order(found, orderBy, MODEL_ORDER_FIELDS, pageSize, pageToken)
        return _list_body(items, token, wants_int_enums(request), readMask)

    @app.delete(base + "/{model}")
    def delete_model(project: str, location: str, model: str) -> Response:
        return json_response(render_operation(models.delete(ref(project, location, model))))
