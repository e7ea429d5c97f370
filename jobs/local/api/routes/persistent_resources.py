"""PersistentResourceService v1 over REST, as ``aiplatform_v1.PersistentResourceServiceClient(
transport="rest")`` and the SDK's ``aiplatform.persistent_resource.PersistentResource`` call it
(``services/persistent_resource_service/transports/rest_base.py``): ``persistentResources``
create (``persistentResourceId`` query), get, list, patch (``updateMask``), delete, ``:reboot``,
and the GET of operations named under a resource (``/v1`` and the ``/ui`` twin the SDK's
operations client asks first). jobs/local/custom_jobs/persistent_resources.py holds what they mean.

Bodies go through protobuf's json_format against the real messages (``PersistentResource``,
``RebootPersistentResourceRequest``, ``google.longrunning.Operation``): unknown fields are a
400, enums come back as ints when the client asks.
"""

from __future__ import annotations

from collections.abc import Callable

from fastapi import FastAPI, Query, Request
from fastapi.responses import JSONResponse, Response
from starlette.concurrency import run_in_threadpool

from jobs.local.api.rest_forms import (
    DEFAULT_PAGE_SIZE,
    json_response,
    list_response,
    page_of,
    parse_message,
    render_message,
    wants_int_enums,
)
from jobs.local.api.routes.models import render_operation
from jobs.local.custom_jobs.persistent_resources import COLLECTION, PersistentResources
from jobs.local.custom_jobs.resource_pools import PoolError
from jobs.local.plumbing.guard import error_body


def add_persistent_resource_routes(
    app: FastAPI, service: PersistentResources, parent_of: Callable[[str, str], str]
) -> None:
    """Mount the routes. ``parent_of(project, location)`` is server.py's (404/400 for what the
    platform does not serve)."""
    from google.cloud.aiplatform_v1 import PersistentResource

    base = "/v1/projects/{project}/locations/{location}/" + COLLECTION

    @app.exception_handler(PoolError)
    async def _pool_error(_request: Request, exc: PoolError) -> JSONResponse:
        return JSONResponse(error_body(exc.http_code, exc.message, exc.status), exc.http_code)

    def name_of(project: str, location: str, resource: str) -> str:
        if ":" in resource:
            raise PoolError(404, f"{resource!r}: no such method", "NOT_FOUND")
        return f"{parent_of(project, location)}/{COLLECTION}/{resource}"

    def answer(request: Request, resource: dict) -> Response:
        int_enums = wants_int_enums(request)
        return json_response(render_message(PersistentResource, resource, int_enums))

    @app.post(base)
    async def create_persistent_resource(
        request: Request, project: str, location: str, persistentResourceId: str = ""
    ) -> Response:
        body = parse_message(PersistentResource, await request.body())
        # The executor's lock: in a worker thread, never on the event loop.
        operation = await run_in_threadpool(
            service.create, parent_of(project, location), persistentResourceId, body
        )
        return json_response(render_operation(operation))

    # Before `{resource}` routes: `{resource}` would also match `ID:reboot`.
    @app.post(base + "/{resource}:reboot")
    async def reboot_persistent_resource(
        request: Request, project: str, location: str, resource: str
    ) -> Response:
        from google.cloud.aiplatform_v1 import RebootPersistentResourceRequest

        parse_message(RebootPersistentResourceRequest, await request.body())
        name = f"{parent_of(project, location)}/{COLLECTION}/{resource}"
        return json_response(render_operation(await run_in_threadpool(service.reboot, name)))

    @app.get(base + "/{resource}/operations/{operation}")
    @app.get(
        "/ui/projects/{project}/locations/{location}/"
        + COLLECTION
        + "/{resource}/operations/{operation}"
    )
    def get_persistent_resource_operation(
        project: str, location: str, resource: str, operation: str
    ) -> Response:
        name = f"{name_of(project, location, resource)}/operations/{operation}"
        return json_response(render_operation(service.operation(name)))

    @app.get(base + "/{resource}")
    def get_persistent_resource(
        request: Request, project: str, location: str, resource: str
    ) -> Response:
        return answer(request, service.get(name_of(project, location, resource)))

    @app.get(base)
    def list_persistent_resources(
        request: Request,
        project: str,
        location: str,
        pageSize: int = Query(DEFAULT_PAGE_SIZE, le=2**31 - 1),
        pageToken: str = "",
    ) -> Response:
        found, token = page_of(service.list(parent_of(project, location)), pageSize, pageToken)
        int_enums = wants_int_enums(request)
        rendered = [render_message(PersistentResource, r, int_enums) for r in found]
        return list_response("persistentResources", rendered, token)

    @app.patch(base + "/{resource}")
    async def update_persistent_resource(
        request: Request, project: str, location: str, resource: str, updateMask: str = ""
    ) -> Response:
        body = parse_message(PersistentResource, await request.body())
        mask = [path.strip() for path in updateMask.split(",") if path.strip()]
        name = name_of(project, location, resource)
        operation = await run_in_threadpool(service.update, name, body, mask)
        return json_response(render_operation(operation))

    @app.delete(base + "/{resource}")
    def delete_persistent_resource(project: str, location: str, resource: str) -> Response:
        return json_response(render_operation(service.delete(name_of(project, location, resource))))
