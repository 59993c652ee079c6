"""`POST /v1/messages`: Anthropic's Messages API, with tools and images, over the same models.

For clients that speak only Anthropic's API (the `anthropic` SDK and the
tools built on it): a system prompt, user and assistant turns of text and
images, tools with `tool_choice`, the assistant's `tool_use` blocks and the
user's `tool_result` blocks, `max_tokens`, `temperature`, `top_p` and
`stop_sequences`, streamed or not; the request is read by
`_anthropic_request` and the answer written by `_anthropic_response`. The
`model` is resolved by the same router as a chat completion's, so any
upstream serves it, and a tool-use loop runs through the proxy against an
OpenAI model as against Claude. What this endpoint does not translate
(documents, thinking, server tools) is refused with a 400 naming the field,
never dropped unseen. Errors are in Anthropic's shape,
`{"type": "error", "error": {"type", "message"}}`, with the same statuses as
the chat endpoint's, and a stream that fails midway ends with an `error` event.

Examples:
    >>> name, request, stream = parse_messages_request({"model": "claude", "max_tokens": 8,
    ...     "system": "Be brief.", "messages": [{"role": "user", "content": "Hi"}]})
    >>> name, [m.role.value for m in request.messages], request.settings, stream
    ('claude', ['system', 'user'], {'max_tokens': 8}, False)
"""

from __future__ import annotations

import hmac
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import aclosing
from typing import Any

from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.types import Scope

from tidemill.llm._failures import redact
from tidemill.llm._model import Model, ModelRequest
from tidemill.llm.proxy._access import access_record
from tidemill.llm.proxy._anthropic_request import PARALLEL_PARAM, parse_messages_request
from tidemill.llm.proxy._anthropic_response import MessageEvents, event, message_body
from tidemill.llm.proxy._errors import InvalidRequest, ProxyError, proxy_error
from tidemill.llm.proxy._files import FilePolicy
from tidemill.llm.proxy._limits import RequestLimits, check_payload
from tidemill.llm.proxy._request import ChatCompletionRequest, check_fields, parse_json
from tidemill.llm.proxy._router import ModelRouter
from tidemill.llm.proxy._streaming import log_failure
from tidemill.types import ResponseDone

__all__ = ["MessagesEndpoint", "message_body", "parse_messages_request"]

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    529: "overloaded_error",
}


def _error_body(error: ProxyError, secrets: tuple[str, ...]) -> dict[str, Any]:
    kind = _ERROR_TYPES.get(error.status, "api_error")
    return {"type": "error", "error": {"type": kind, "message": redact(error.message, secrets)}}


def _check_options(name: str, request: ModelRequest, model: Model) -> None:
    """Refuse `disable_parallel_tool_use` for an upstream with no such switch, by its name."""
    if not request.options:
        return
    parsed = ChatCompletionRequest(model=name, request=request, sent=dict(request.options))
    try:
        check_fields(parsed, model)
    except InvalidRequest as exc:
        raise InvalidRequest(f"'{PARALLEL_PARAM}': {exc.message}", param=PARALLEL_PARAM) from None


class MessagesEndpoint:
    """`POST /messages`: Anthropic's Messages API; `create` is the Starlette endpoint."""

    def __init__(
        self,
        router: ModelRouter,
        *,
        api_key: str | None,
        max_body_bytes: int,
        routing: Callable[[Scope, str | None], Awaitable[ModelRouter]] | None = None,
        limits: RequestLimits | None = None,
        files: FilePolicy | None = None,
    ) -> None:
        self.router = router
        self.api_key = api_key
        self.max_body_bytes = max_body_bytes
        self.routing = routing
        self.limits = limits or RequestLimits(max_body_bytes=max_body_bytes)
        """How many messages a body may hold and how deeply it may nest (`check_payload`)."""
        self.files = files or FilePolicy()
        """Which image URLs may be passed upstream; by default no stored file."""

    async def create(self, request: Request) -> Response:
        """Answer one Messages API request, whole or streamed."""
        record = access_record(request.scope)
        router = self.router
        try:
            self._check_key(request)
            declared = request.headers.get("content-length", "")
            if declared.isdigit() and int(declared) > self.max_body_bytes:
                raise self._too_large()
            parts: list[bytes] = []
            size = 0
            async for part in request.stream():
                size += len(part)
                if size > self.max_body_bytes:
                    raise self._too_large()
                parts.append(part)
            payload = parse_json(b"".join(parts))
            check_payload(payload, self.limits)
            try:
                name, model_request, stream = parse_messages_request(payload, self.files)
            except ValidationError as exc:  # a model type refusing a parsed value
                first = exc.errors()[0]["msg"] if exc.errors() else str(exc)
                raise InvalidRequest(f"Invalid request: {first}.") from None
            if record is not None:
                record.model_name = name
            if self.routing is not None:
                router = await self.routing(request.scope, name)
            model = router.resolve(name)
            _check_options(name, model_request, model)
            if record is not None:
                record.model = model
        except Exception as exc:
            return self._failed(exc, router)
        message_id = f"msg_{uuid.uuid4().hex}"
        if stream:
            events = self._events(model, model_request, name, message_id, request, router)
            return StreamingResponse(
                events,
                media_type="text/event-stream",
                headers={"cache-control": "no-cache", "x-accel-buffering": "no"},
            )
        try:
            response = await model.request(model_request)
        except Exception as exc:
            return self._failed(exc, router)
        if record is not None:
            record.usage = response.usage
        return JSONResponse(message_body(response, model=name, message_id=message_id))

    async def _events(
        self,
        model: Model,
        model_request: ModelRequest,
        name: str,
        message_id: str,
        request: Request,
        router: ModelRouter,
    ) -> AsyncIterator[bytes]:
        writer = MessageEvents(model=name, message_id=message_id)
        yield writer.start()
        done: ResponseDone | None = None
        try:
            async with aclosing(model.stream(model_request)) as items:
                async for item in items:
                    if isinstance(item, ResponseDone):
                        done = item
                        break
                    data = writer.event(item)
                    if data:
                        yield data
            if done is None:
                raise ProxyError(
                    "The upstream stream ended without its final event.",
                    status=502,
                    type="api_error",
                    code="upstream_incomplete",
                )
        except Exception as exc:
            error = proxy_error(exc)
            secrets = self._secrets(router)
            log_failure(exc, error, secrets)
            yield event("error", _error_body(error, secrets))
            return
        record = access_record(request.scope)
        if record is not None:
            record.usage = done.response.usage
        yield writer.finish(done.response)

    def _check_key(self, request: Request) -> None:
        if self.api_key is None:
            return
        scheme, _, bearer = request.headers.get("authorization", "").partition(" ")
        given = request.headers.get("x-api-key") or (bearer if scheme.lower() == "bearer" else "")
        if not hmac.compare_digest(given.strip().encode(), self.api_key.encode()):
            raise ProxyError(
                "Incorrect or missing API key for this proxy; send it as 'x-api-key: <key>'.",
                status=401,
                code="invalid_api_key",
            )

    def _too_large(self) -> ProxyError:
        return ProxyError(
            f"The request body is larger than {self.max_body_bytes} bytes.",
            status=413,
            code="request_too_large",
        )

    def _secrets(self, router: ModelRouter) -> tuple[str, ...]:
        if router is self.router:
            return router.secrets()
        return (*router.secrets(), *self.router.secrets())

    def _failed(self, exc: Exception, router: ModelRouter) -> Response:
        error = proxy_error(exc)
        secrets = self._secrets(router)
        log_failure(exc, error, secrets)
        return JSONResponse(
            _error_body(error, secrets), status_code=error.status, headers=error.headers
        )
