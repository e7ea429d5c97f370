"""The routes' errors in Google's JSON error shape: ``ApiError`` (an HTTP code, a message, the
google.rpc status it stands for) and how a request that fails validation is described."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fastapi.responses import JSONResponse

from jobs.core.problems import field_path
from jobs.local.plumbing.guard import error_body

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
