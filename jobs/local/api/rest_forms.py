"""What every route of the control plane does the same way: a request body parsed through the
real v1 proto (unknown fields refused as Vertex refuses them; the newer API's fields the protos
lack with their reason, api/newer_fields.py), a resource rendered through it
(enums as ints when the client asks, a List call's readMask applied), and one page of a List
call. The protos come from aiplatform_v1, imported inside the functions: it is heavy, and only
the server process pays for it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from jobs.local.api.newer_fields import newer_field_problem
from jobs.local.api.read_mask import ReadMaskError, apply_read_mask

DEFAULT_PAGE_SIZE = 100
MAX_PAGE_TOKEN = 2**63 - 1
"""SQLite's largest integer: page tokens are row positions."""


class BadRequest(Exception):
    """A request the platform answers with 400 INVALID_ARGUMENT, in Google's error shape."""

    http_code, status = 400, "INVALID_ARGUMENT"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def parse_message(message_class: Any, body: bytes) -> dict:
    """A request body -> REST-form dict (camelCase, enum names), through the real proto."""
    from google.protobuf import json_format

    message = message_class.pb(message_class())
    try:
        json_format.Parse(body.decode("utf-8") or "{}", message, ignore_unknown_fields=False)
    except UnicodeDecodeError as exc:
        raise BadRequest(f"Invalid JSON payload received. Not UTF-8: {exc}") from exc
    except (json_format.ParseError, RecursionError) as exc:
        newer = newer_field_problem(str(exc))
        raise BadRequest(newer or f"Invalid JSON payload received. {exc}") from exc
    return json_format.MessageToDict(message)


def render_message(
    message_class: Any, resource: dict, int_enums: bool = False, read_mask: str = ""
) -> str:
    """A stored resource as the API answers it."""
    from google.protobuf import json_format

    message = message_class.pb(message_class())
    json_format.ParseDict(apply_read_mask(message_class, resource, read_mask), message)
    return json_format.MessageToJson(message, use_integers_for_enums=int_enums, indent=None)


def refuse_bad_read_mask(message_class: Any, read_mask: str) -> None:
    """A List call's readMask is checked once, before any resource is cut by it."""
    try:
        apply_read_mask(message_class, {}, read_mask)
    except ReadMaskError as exc:
        raise BadRequest(str(exc)) from exc


def wants_int_enums(request: Request) -> bool:
    """What the SDK's REST transport asks with ``$alt=json;enum-encoding=int``."""
    return "enum-encoding=int" in request.query_params.get("$alt", "")


def json_response(body: str) -> Response:
    return Response(body, media_type="application/json")


def page_start(token: str) -> int | None:
    """The position a ``pageToken`` names (None: the first page)."""
    if token and not (token.isdigit() and int(token) <= MAX_PAGE_TOKEN):
        raise BadRequest(f"invalid pageToken {token!r}: pass the nextPageToken given")
    return int(token) if token else None


def page_of(
    found: Sequence[tuple[int, dict]], size: int, token: str, newest_first: bool = True
) -> tuple[list[dict], str | None]:
    """One page of (position, resource), in the order given, after the token's position; the
    next token is the last position returned. Resources created while a client pages cannot
    shift what it has not seen yet."""
    start = page_start(token)
    if start is not None:
        found = [(p, r) for p, r in found if (p < start if newest_first else p > start)]
    size = size if size > 0 else DEFAULT_PAGE_SIZE
    page = list(found[:size])
    return [r for _, r in page], (str(page[-1][0]) if len(found) > size else None)


def page_after(
    found: Sequence[tuple[int, dict]], size: int, token: str
) -> tuple[list[dict], str | None]:
    """One page of (position, resource) in an order the client chose (``orderBy``): the
    resources after the one whose position the token names (the last of the previous page)."""
    start = page_start(token)
    if start is not None:
        index = next((i for i, (p, _) in enumerate(found) if p == start), None)
        if index is None:
            raise BadRequest(
                f"invalid pageToken {token!r}: the resource it continues after is no longer "
                f"listed; list again without pageToken"
            )
        found = found[index + 1 :]
    size = size if size > 0 else DEFAULT_PAGE_SIZE
    page = list(found[:size])
    return [r for _, r in page], (str(page[-1][0]) if len(found) > size else None)


def list_response(key: str, rendered: Sequence[str], next_token: str | None) -> Response:
    """A List call's answer from resources already rendered as JSON."""
    body = f'{{"{key}": [' + ",".join(rendered) + "]"
    if next_token:
        body += f', "nextPageToken": "{next_token}"'
    return json_response(body + "}")
