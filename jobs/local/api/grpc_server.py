"""Vertex AI v1 over gRPC, so the SDK runs with its default transport: one transcoder in front
of the REST app, not a handler per method.

Each call's method is looked up in the SDK's own definitions (grpc_methods.py), its request
becomes the HTTP request its ``google.api.http`` rule makes of it (grpc_transcoding.py), and that
request is served by the control plane's FastAPI app, called in this process through httpx's
ASGI transport: the same middleware, routes, checks and error shapes as a REST client gets, with
no second copy of any of them and no HTTP hop. The answer's JSON becomes the response message, an
error its gRPC status. A method the SDK has but no route serves, a streaming method, and a
method the SDK does not have answer UNIMPLEMENTED, naming it, at once.

It runs on the control plane's event loop (grpc.aio), started and stopped with the app, on
127.0.0.1 only and over TLS (the SDK opens secure channels only; jobs/local/plumbing/tls.py). Who
may call: the guard's rules as over REST (jobs/local/plumbing/guard.py). The kernel's owner of
the client's socket is checked before any call is served; Vertex's methods take no token, as over
REST; the Host and browser checks are TLS's here, a browser neither trusts this CA nor speaks
gRPC. The in-process request carries the platform's own Host, and is marked as checked
(``PEER_CHECKED``) so the REST guard does not look for its socket, which does not exist.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import grpc
import httpx
from google.protobuf import json_format
from google.protobuf.message import Message
from starlette.routing import Match
from starlette.types import ASGIApp, Receive, Scope, Send

from jobs.local.api.grpc_methods import SERVED, UNARY, Method, service_methods, vertex_method
from jobs.local.api.grpc_transcoding import (
    GrpcError,
    HttpRequest,
    NoBinding,
    grpc_error,
    http_request,
    response_message,
)
from jobs.local.plumbing.guard import MAX_BODY_BYTES, peer_refusal
from jobs.local.plumbing.tls import TlsFiles

log = logging.getLogger(__name__)

PEER_CHECKED = "vtx.peer_checked"
"""ASGI scope key of a request the gRPC server made in this process after checking its caller;
no HTTP client can set a scope key."""


class PeerChecked:
    """The app, for requests whose caller the gRPC server already checked."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app({**scope, PEER_CHECKED: True}, receive, send)


def _client_port(peer: str) -> int | None:
    """The port of ``ipv4:127.0.0.1:PORT``; None for any other peer."""
    kind, _, address = peer.partition(":")
    host, _, port = address.rpartition(":")
    return int(port) if kind == "ipv4" and host == "127.0.0.1" and port.isdigit() else None


class Transcoder(grpc.GenericRpcHandler):
    """Every method: served through the app when it is unary and a route takes its request,
    else UNIMPLEMENTED."""

    def __init__(self, app: Any, rest_port: int, grpc_port: int) -> None:
        self.app, self.grpc_port = app, grpc_port
        self.client = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=PeerChecked(app), raise_app_exceptions=False),
            base_url=f"http://127.0.0.1:{rest_port}",
            timeout=None,  # the routes keep their own deadlines (predict's inference timeout)
        )

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler:
        path = handler_call_details.method
        method = vertex_method(path)
        if method is None:
            return self._refusal(path, "the Vertex AI v1 SDK has no such method")
        if method.kind != UNARY:
            return self._refusal(path, f"it is a streaming method ({method.kind})")
        return grpc.unary_unary_rpc_method_handler(
            self._unary(method),
            request_deserializer=method.request.FromString,
            response_serializer=method.response.SerializeToString,
        )

    def _refusal(self, path: str, why: str) -> grpc.RpcMethodHandler:
        """A handler that answers at once, reading nothing: a stream-stream handler takes any
        kind of call."""
        name = path.lstrip("/").replace("/", ".")

        async def refuse(_requests: Any, context: grpc.aio.ServicerContext) -> None:
            await self._check_peer(context)
            await context.abort(
                grpc.StatusCode.UNIMPLEMENTED,
                f"{name} is not served by the local platform: {why}",
            )

        return grpc.stream_stream_rpc_method_handler(refuse)

    async def _check_peer(self, context: grpc.aio.ServicerContext) -> None:
        port = _client_port(context.peer())
        refusal = (
            peer_refusal(port, self.grpc_port)
            if port is not None
            else None  # the server listens on 127.0.0.1 only: no other peer can reach it
        )
        if refusal is not None:
            await context.abort(grpc.StatusCode.PERMISSION_DENIED, refusal.message)

    def _unary(
        self, method: Method
    ) -> Callable[[Message, grpc.aio.ServicerContext], Awaitable[Message]]:
        async def handle(request: Message, context: grpc.aio.ServicerContext) -> Message:
            await self._check_peer(context)
            try:
                call = http_request(method, request)
            except NoBinding as exc:
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
            if not self._routed(call):
                await context.abort(
                    grpc.StatusCode.UNIMPLEMENTED,
                    f"{method.name} is not served by the local platform: no route takes "
                    f"{call.verb} {call.path}",
                )
            answer = await self.client.request(
                call.verb,
                call.path,
                params=call.query,
                content=call.body,
                headers={"Content-Type": "application/json"} if call.body is not None else {},
            )
            if answer.status_code >= 300:
                error: GrpcError = grpc_error(answer.status_code, answer.content)
                await context.abort(error.code, error.message, error.trailing_metadata())
            try:
                return response_message(method, answer.content)
            except json_format.ParseError as exc:  # a route's answer the message does not take
                log.exception("%s: the answer of %s %s", method.name, call.verb, call.path)
                await context.abort(
                    grpc.StatusCode.INTERNAL,
                    f"internal error of the local control plane: {method.name}'s answer does "
                    f"not fit {method.response.DESCRIPTOR.full_name}: {exc}",
                )
                raise  # abort raised already; this keeps the type checker's flow plain

        return handle

    def _routed(self, call: HttpRequest) -> bool:
        """Whether a route of the app takes the request's verb and path."""
        scope = {"type": "http", "method": call.verb, "path": call.path, "root_path": ""}
        return any(route.matches(scope)[0] == Match.FULL for route in self.app.router.routes)


async def start_grpc(
    app: Any, rest_port: int, grpc_port: int, tls: TlsFiles
) -> tuple[grpc.aio.Server, int]:
    """The gRPC server on 127.0.0.1:``grpc_port`` (0: a free port), over TLS, serving through
    ``app``; and the port it listens on."""
    logging.getLogger("httpx").setLevel(logging.WARNING)  # not a line per call in server.log
    # Imported now rather than on a first call, which would stall the event loop for them
    # (not in a thread: two threads importing one package can deadlock on its import locks).
    for service in SERVED:
        service_methods(service)
    server = grpc.aio.server(options=[("grpc.max_receive_message_length", MAX_BODY_BYTES)])
    credentials = grpc.ssl_server_credentials([(_read(tls.key), _read(tls.cert))])
    port = server.add_secure_port(f"127.0.0.1:{grpc_port}", credentials)
    if port == 0:
        raise OSError(f"the gRPC server could not listen on 127.0.0.1:{grpc_port}")
    # The owner check looks up the connection to the port actually bound.
    server.add_generic_rpc_handlers([Transcoder(app, rest_port, port)])
    await server.start()
    return server, port


def _read(path: Path) -> bytes:
    return path.read_bytes()
