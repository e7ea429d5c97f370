"""How long either server of the local platform waits on a client in the middle of a request, and
what it does when the client goes away: one deadline, one exception, one log line, for the GCS
emulator and the control plane alike.

The deadline is on each wait for the client's next bytes, not on the whole request: a slow
upload that keeps sending is served, a client that stops (a half-sent body, a dropped network)
holds its connection for at most ``LocalSettings.read_timeout_s``. The GCS emulator (a thread per
connection, blocking sockets) makes it every socket read's timeout; the control plane (asyncio,
uvicorn, which has no such setting for bodies) reads each body through ``BodyDeadline`` before
any route runs. Either way a client that went away is a ``ClientGone``: one line in the log, the
connection closed, never a traceback.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from jobs.local.plumbing.guard import error_body

Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[MutableMapping[str, Any], Receive, Send], Awaitable[None]]


class ClientGone(Exception):
    """The client closed the connection, or went quiet past the deadline, before its request
    was complete."""


class ClientQuiet(ClientGone):
    """The client is still connected but sent nothing for the deadline: it is told so (a 408)
    before the connection is closed."""


def log_client_gone(log: logging.Logger, method: str, path: str, reason: object) -> None:
    """The one line a client that went away leaves in a server's log."""
    log.warning(
        "%s %s: the client stopped mid-request (%s); connection closed", method, path, reason
    )


class BodyDeadline:
    """ASGI middleware: the request body is read whole, each wait for its next piece at most
    ``timeout_s``, before the app is called; the app then reads it from memory. A client that
    stops sending gets a 408 and the connection is closed; one that disconnects is logged. Bodies
    are small here (the guard in front holds them to ``MAX_BODY_BYTES``, with a Content-Length),
    so holding one whole costs nothing, and no route ever sees half a body."""

    def __init__(self, app: App, timeout_s: float, log: logging.Logger) -> None:
        self.app, self.timeout_s, self.log = app, timeout_s, log

    async def __call__(self, scope: MutableMapping[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        try:
            body = await self._body(receive)
        except ClientGone as gone:
            log_client_gone(self.log, scope["method"], scope["path"], gone)
            if isinstance(gone, ClientQuiet):
                await _send_timeout(send, str(gone))
            return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:  # after the body: a disconnect, which streaming answers listen for
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)

    async def _body(self, receive: Receive) -> bytes:
        pieces = []
        while True:
            try:
                message = await asyncio.wait_for(receive(), self.timeout_s)
            except TimeoutError:
                raise ClientQuiet(
                    f"no bytes of the request body for the {self.timeout_s:g} s deadline"
                ) from None
            if message["type"] == "http.disconnect":
                raise ClientGone("it closed the connection before the end of its request body")
            pieces.append(message.get("body", b""))
            if not message.get("more_body", False):
                return b"".join(pieces)


async def _send_timeout(send: Send, reason: str) -> None:
    body = json.dumps(error_body(408, f"request body: {reason}", "DEADLINE_EXCEEDED")).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),  # what remains of the body must not be read as a request
    ]
    await send({"type": "http.response.start", "status": 408, "headers": headers})
    await send({"type": "http.response.body", "body": body})
