"""Errors as JSON: `{"type", "message", "hint"}`, with the status a client can act on.

The type is the Python exception's class name (`PermissionDenied`,
`ItemNotFound`, ...), so a client tells errors apart the way Python code
does. Bad input is a 4xx; only a fault of the server itself is a 500, and
its answer says nothing of the fault (the server's log does).
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from starlette.exceptions import HTTPException

from tidemill.errors import (
    ApprovalDecisionError,
    ConfigurationError,
    FlowInputError,
    ItemNotFound,
    PermissionDenied,
    RunNotFound,
    RunStateError,
    SignInFailed,
    SignInThrottled,
    TidemillError,
    VersionConflict,
    WorkspaceError,
)

__all__ = ["ErrorBody", "error_response", "install_error_handlers", "status_of"]

_log = logging.getLogger("tidemill.server")

# Most specific first: the first class an error is an instance of decides.
_STATUS: tuple[tuple[type[TidemillError], int], ...] = (
    (SignInThrottled, 429),
    (SignInFailed, 401),
    (PermissionDenied, 403),
    (ItemNotFound, 404),
    (RunNotFound, 404),
    (VersionConflict, 409),
    (RunStateError, 409),
    (ApprovalDecisionError, 409),
    (FlowInputError, 422),
    (ConfigurationError, 422),
    (WorkspaceError, 409),
)

_HTTP_TYPES = {
    400: "BadRequest",
    401: "SignInRequired",
    403: "PermissionDenied",
    404: "NotFound",
    405: "MethodNotAllowed",
    413: "RequestTooLarge",
    415: "UnsupportedMediaType",
}


class ErrorBody(BaseModel):
    """What every error answer holds."""

    type: str
    """The error's kind: the Python exception's class name (`ItemNotFound`, ...)."""
    message: str
    """What went wrong."""
    hint: str | None = None
    """What to do about it."""
    problems: list[str] | None = None
    """For a request that does not fit its schema: each problem, `at <where>: <what>`."""


def status_of(error: TidemillError) -> int:
    """The HTTP status of a Tidemill error (400 for one without a more precise status)."""
    for kind, status in _STATUS:
        if isinstance(error, kind):
            return status
    return 400


def error_response(
    status: int,
    kind: str,
    message: str,
    hint: str | None = None,
    *,
    problems: list[str] | None = None,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    """A JSON error answer."""
    body = ErrorBody(type=kind, message=message, hint=hint, problems=problems)
    return JSONResponse(body.model_dump(exclude_none=True), status_code=status, headers=headers)


def _where(location: Any) -> str:
    return ".".join(str(part) for part in location) or "body"


async def _tidemill(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, TidemillError)
    headers = None
    retry = exc.context.get("retry_after")
    if isinstance(exc, SignInThrottled) and isinstance(retry, int | float):
        headers = {"Retry-After": str(max(1, round(retry)))}
    if isinstance(exc, SignInFailed) and not isinstance(exc, SignInThrottled):
        headers = {"WWW-Authenticate": 'Bearer realm="tidemill"'}
    problems = getattr(exc, "problems", None)
    return error_response(
        status_of(exc),
        type(exc).__name__,
        exc.message,
        exc.hint,
        problems=[str(p) for p in problems] if isinstance(problems, list | tuple) else None,
        headers=headers,
    )


async def _invalid(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    problems = [f"at {_where(e.get('loc', ()))}: {e.get('msg', 'invalid')}" for e in exc.errors()]
    return error_response(
        422,
        "InvalidRequest",
        "The request does not fit the API's schema.",
        "See /docs for what this route takes.",
        problems=problems,
    )


async def _http(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, HTTPException)
    kind = _HTTP_TYPES.get(exc.status_code, "HTTPError")
    message = exc.detail if isinstance(exc.detail, str) else kind
    hint = "See /docs for the API's routes." if exc.status_code in (404, 405) else None
    headers = dict(exc.headers) if exc.headers else None
    return error_response(exc.status_code, kind, message, hint, headers=headers)


async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    _log.exception("%s %s failed", request.method, request.url.path, exc_info=exc)
    return error_response(
        500,
        "ServerError",
        "The server failed to answer this request.",
        "The server's log has the details; please report it.",
    )


def install_error_handlers(app: FastAPI) -> None:
    """Answer every error of `app` as an `ErrorBody`."""
    app.add_exception_handler(TidemillError, _tidemill)
    app.add_exception_handler(RequestValidationError, _invalid)
    app.add_exception_handler(HTTPException, _http)
    app.add_exception_handler(Exception, _unexpected)
