"""gRPC <-> REST for one call: a request message as the HTTP request its ``google.api.http`` rule
makes of it, the HTTP answer as the response message or the gRPC status.

The HTTP request is the one the SDK's own REST transport sends for the same message
(``services/*/transports/rest_base.py``): the path from ``google.api_core.path_template.transcode``,
the body and the query through protobuf's ``json_format`` with the JSON (camelCase) names and enums
as numbers, and ``$alt=json;enum-encoding=int``. So the routes see one request whichever
transport the client chose. Errors: Google's JSON error carries its canonical code's name
(``status``), which is the gRPC code; without one, the HTTP code is mapped as
google/rpc/code.proto maps them (docs/vertex-facts.md, "gRPC and REST").
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import grpc
from google.api_core import path_template
from google.protobuf import json_format
from google.protobuf.message import Message
from google.rpc import status_pb2

from jobs.local.api.grpc_methods import Method

INT_ENUMS = ("$alt", "json;enum-encoding=int")
"""What the SDK's REST transport adds to every query: enums as numbers, both ways."""
HTTP_TO_GRPC = {
    400: grpc.StatusCode.INVALID_ARGUMENT,
    401: grpc.StatusCode.UNAUTHENTICATED,
    403: grpc.StatusCode.PERMISSION_DENIED,
    404: grpc.StatusCode.NOT_FOUND,
    409: grpc.StatusCode.ABORTED,
    412: grpc.StatusCode.FAILED_PRECONDITION,
    429: grpc.StatusCode.RESOURCE_EXHAUSTED,
    499: grpc.StatusCode.CANCELLED,
    500: grpc.StatusCode.INTERNAL,
    501: grpc.StatusCode.UNIMPLEMENTED,
    503: grpc.StatusCode.UNAVAILABLE,
    504: grpc.StatusCode.DEADLINE_EXCEEDED,
}
"""google/rpc/code.proto's HTTP mapping, for an error that does not name its code; 409 is
ABORTED unless the error says ALREADY_EXISTS."""
STATUS_DETAILS_KEY = "grpc-status-details-bin"
"""Where a gRPC server puts the whole google.rpc.Status (google.api_core reads it)."""


class NoBinding(ValueError):
    """The request's fields fit none of the method's path templates (a name left empty, or
    naming a resource of another kind)."""


@dataclass(frozen=True)
class HttpRequest:
    verb: str
    path: str
    query: list[tuple[str, str]]
    body: bytes | None


@dataclass(frozen=True)
class GrpcError:
    """How a REST error answers over gRPC: the code, the message, the whole google.rpc.Status
    when the REST error carried details (else None)."""

    code: grpc.StatusCode
    message: str
    status: status_pb2.Status | None = None

    def trailing_metadata(self) -> tuple[tuple[str, bytes], ...]:
        if self.status is None:
            return ()
        return ((STATUS_DETAILS_KEY, self.status.SerializeToString()),)


def http_request(method: Method, message: Message) -> HttpRequest:
    """The HTTP request the method's first fitting rule makes of ``message``."""
    try:
        transcoded = path_template.transcode(list(method.http_rules), message=message)
    except ValueError as exc:
        raise NoBinding(
            f"{method.name}: the request fits none of the method's HTTP paths ({exc})"
        ) from exc
    body = transcoded.get("body")
    body_json = None
    if body is not None:
        body_json = json_format.MessageToJson(body, use_integers_for_enums=True).encode()
    query = _query(
        json_format.MessageToDict(transcoded["query_params"], use_integers_for_enums=True)
    )
    return HttpRequest(
        transcoded["method"].upper(), transcoded["uri"], [*query, INT_ENUMS], body_json
    )


def _query(fields: dict[str, Any], prefix: str = "") -> list[tuple[str, str]]:
    """A message's JSON form as query parameters: nested fields by dotted name, repeated ones
    repeated (google.api.http's rule for query parameters)."""
    pairs: list[tuple[str, str]] = []
    for key, value in fields.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            pairs += _query(value, f"{name}.")
        else:
            for item in value if isinstance(value, list) else [value]:
                pairs.append((name, _scalar(item)))
    return pairs


def _scalar(value: Any) -> str:
    return json.dumps(value) if isinstance(value, bool) else str(value)


def response_message(method: Method, body: bytes) -> Message:
    """A 2xx answer's JSON as the method's response message. Unknown fields are skipped, as
    the SDK's REST transport skips them."""
    return json_format.Parse(body or b"{}", method.response(), ignore_unknown_fields=True)


def grpc_error(http_code: int, body: bytes) -> GrpcError:
    """A REST error answer (Google's ``{"error": {"code", "message", "status", "details"}}``)
    as its gRPC status."""
    try:
        error = json.loads(body)["error"]
        message = str(error.get("message", ""))
        named = str(error.get("status", ""))
    except (ValueError, KeyError, TypeError, AttributeError):
        error, message, named = {}, body.decode(errors="replace"), ""
    code = grpc.StatusCode.__members__.get(named) or HTTP_TO_GRPC.get(
        http_code, grpc.StatusCode.UNKNOWN
    )
    status = None
    if error.get("details"):
        status = status_pb2.Status(code=code.value[0], message=message)
        try:
            json_format.ParseDict({"details": error["details"]}, status, ignore_unknown_fields=True)
        except json_format.ParseError:
            status = None  # a detail of a type this process does not know: the code still holds
    return GrpcError(code, message, status)
