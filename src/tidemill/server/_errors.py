"""Errors as JSON: `{"type", "message", "hint"}`, with the status a client can act on.

The type is the Python exception's class name (`PermissionDenied`,
`ItemNotFound`, ...), so a client tells errors apart the way Python code
does. Bad input is a 4xx; only a fault of the server itself is a 500, and
its answer says nothing of the fault (the server's log does).

`document_errors` declares them in the app's OpenAPI document: each
operation lists, with the `ErrorBody` schema, the error statuses it can
answer (`ERROR_STATUSES` says when), so a generated client knows their shape.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from fastapi import FastAPI, Request
from fastapi.dependencies.models import Dependant
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
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
from tidemill.server._caller import caller, signed_in

__all__ = [
    "ERROR_STATUSES",
    "ErrorBody",
    "document_errors",
    "error_response",
    "error_responses",
    "install_error_handlers",
    "status_of",
]

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


ERROR_STATUSES: dict[int, str] = {
    400: "The request is not one the server can act on (an error with no more precise status).",
    401: "No one is signed in, or the credentials are not valid (malformed, expired, revoked).",
    403: "The caller may not do this: its rights, its token's scopes, or no valid CSRF token.",
    404: "What the request names does not exist, or the caller may not see it.",
    409: "It conflicts with what is stored (a `base_version` that is not the item's, a run "
    "that already ended, a decided approval, a name taken).",
    422: "The request does not fit the API's schema (`problems` says where), or its input is "
    "not valid.",
    429: "Too many failed sign-ins; `Retry-After` says when to try again.",
}
"""The error statuses the API declares, and when each is answered.

`document_errors` declares them on each operation: 401 and 403 where the
caller is read (every route but `/health` and sign-in, which declares its
own 401 and 429), 404 where the path has a parameter, 400, 404, 409 and
422 on every signed-in write (its body may name something too), and 422
wherever the request has parameters or a body.
"""

_SCHEMAS = "#/components/schemas/"
_REF = re.compile(r'"\$ref": "#/components/schemas/([^"]+)"')
_WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """A route's or router's `responses=`: each of `statuses` answered with an `ErrorBody`."""
    return {s: {"model": ErrorBody, "description": ERROR_STATUSES[s]} for s in statuses}


def _calls(dependant: Dependant, call: Callable[..., Any]) -> bool:
    return dependant.call is call or any(_calls(d, call) for d in dependant.dependencies)


def _route_errors(route: APIRoute, method: str) -> list[int]:
    statuses = []
    if _calls(route.dependant, caller):
        statuses += [401, 403]
    write = method in _WRITES and _calls(route.dependant, signed_in)
    if "{" in route.path_format or write:
        statuses.append(404)
    if write:
        statuses += [400, 409, 422]
    return statuses


def _api_routes(routes: Iterable[Any]) -> Iterator[APIRoute]:
    """The API routes of `routes`, also in the routers included there (with no prefix)."""
    for route in routes:
        if isinstance(route, APIRoute):
            yield route
        elif (router := getattr(route, "original_router", None)) is not None:
            yield from _api_routes(router.routes)  # FastAPI >= 0.130 includes lazily


def _refs(node: Any) -> set[str]:
    """The component schemas `node` names (not those they name in turn)."""
    return set(_REF.findall(json.dumps(node)))


def _reach(schemas: dict[str, Any], names: Iterable[str]) -> set[str]:
    found: set[str] = set()
    todo = [n for n in names if n in schemas]
    while todo:
        name = todo.pop()
        if name not in found:
            found.add(name)
            todo += [n for n in _refs(schemas[name]) if n in schemas]
    return found


def _answers_always_hold_defaults(document: dict[str, Any]) -> None:
    """Mark required a defaulted field of a schema only answers use: the server always sends it.

    (Not `ErrorBody`'s, which leaves out its null fields; a schema requests use keeps its
    defaults optional, so a generated client need not send them.)
    """
    schemas: dict[str, Any] = document.get("components", {}).get("schemas", {})
    asked, answered = set(), set()
    for operations in document.get("paths", {}).values():
        for op in operations.values():
            asked |= _refs([op.get("parameters", []), op.get("requestBody", {})])
            answered |= _refs([r for s, r in op.get("responses", {}).items() if s.startswith("2")])
    for name in _reach(schemas, answered) - _reach(schemas, asked) - {"ErrorBody"}:
        props = schemas[name].get("properties", {})
        defaulted = [k for k, v in props.items() if isinstance(v, dict) and "default" in v]
        required = schemas[name].get("required", [])
        if missing := [k for k in defaulted if k not in required]:
            schemas[name]["required"] = [*required, *missing]


def _declare(document: dict[str, Any], routes: Iterable[Any]) -> dict[str, Any]:
    schemas = document.setdefault("components", {}).setdefault("schemas", {})
    schemas.setdefault("ErrorBody", ErrorBody.model_json_schema(ref_template=_SCHEMAS + "{model}"))
    error = {"application/json": {"schema": {"$ref": _SCHEMAS + "ErrorBody"}}}
    for route in _api_routes(routes):
        if not route.include_in_schema:
            continue
        for method in route.methods or ():
            op = document["paths"].get(route.path_format, {}).get(method.lower())
            if op is None:
                continue
            responses: dict[str, Any] = op.setdefault("responses", {})
            if "422" in responses and "HTTPValidationError" in json.dumps(responses["422"]):
                del responses["422"]  # FastAPI's own shape: this server answers an ErrorBody
            statuses = _route_errors(route, method)
            if op.get("parameters") or op.get("requestBody"):
                statuses.append(422)
            for status in statuses:
                responses.setdefault(
                    str(status), {"description": ERROR_STATUSES[status], "content": error}
                )
            op["responses"] = dict(sorted(responses.items()))
    if not {"HTTPValidationError", "ValidationError"} & _refs(document["paths"]):
        schemas.pop("HTTPValidationError", None)
        schemas.pop("ValidationError", None)
    _answers_always_hold_defaults(document)
    return document


def document_errors(app: FastAPI) -> None:
    """Make `app.openapi()` declare each operation's `ErrorBody` errors (`ERROR_STATUSES`).

    It runs once, at the first request of the document, so it sees every route then mounted.
    """
    plain = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = _declare(plain(), app.routes)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
