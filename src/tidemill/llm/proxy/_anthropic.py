"""`POST /v1/messages`: Anthropic's Messages API, for text, over the same models.

For clients that speak only Anthropic's API (the `anthropic` SDK and the
tools built on it): a system prompt, user and assistant turns of text,
`max_tokens`, `temperature`, `top_p` and `stop_sequences`, streamed or not.
The `model` is resolved by the same router as a chat completion's, so any
upstream serves it. What this endpoint does not translate (tools, images,
documents, thinking) is refused with a 400 naming the field, never dropped
unseen; `/v1/chat/completions` serves those. Errors are in Anthropic's shape,
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
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.types import Scope

from tidemill.llm._failures import redact
from tidemill.llm._json import dumps, loads
from tidemill.llm._model import Model, ModelRequest, ModelSettings
from tidemill.llm.proxy._access import access_record
from tidemill.llm.proxy._errors import InvalidRequest, ProxyError, proxy_error
from tidemill.llm.proxy._router import ModelRouter
from tidemill.llm.proxy._streaming import log_failure
from tidemill.types import Message, ModelResponse, ResponseDone, TextDelta, Usage

__all__ = ["MessagesEndpoint", "message_body", "parse_messages_request"]

_FIELDS = frozenset(
    {"model", "messages", "max_tokens", "system", "stream", "temperature", "top_p"}
    | {"stop_sequences", "metadata"}
)
_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    529: "overloaded_error",
}
_EMPTY_TEXT = {"type": "text", "text": ""}
_STOP = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use"}


def _text(value: object, where: str) -> str:
    """A content: a string, or a list of text blocks (joined)."""
    if isinstance(value, str):
        return value
    if not isinstance(value, list):
        raise InvalidRequest(f"`{where}` must be a string or a list of content blocks.")
    parts: list[str] = []
    for index, block in enumerate(value):
        kind = block.get("type") if isinstance(block, dict) else None
        if kind != "text" or not isinstance(block.get("text"), str):
            raise InvalidRequest(
                f"`{where}[{index}]` is a {kind or 'malformed'} block; this endpoint takes text "
                "blocks only. Send tools and images to /v1/chat/completions.",
                param=f"{where}[{index}]",
            )
        parts.append(block["text"])
    return "".join(parts)


def _number(body: dict[str, Any], name: str) -> float | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidRequest(f"`{name}` must be a number.", param=name)
    return float(value)


def parse_messages_request(body: object) -> tuple[str, ModelRequest, bool]:
    """The model name, the request and whether to stream, from a Messages API body.

    Raises:
        InvalidRequest: A field this endpoint does not serve, or a malformed one.
    """
    if not isinstance(body, dict):
        raise InvalidRequest("The request body must be a JSON object.")
    unknown = sorted(set(body) - _FIELDS)
    if unknown:
        raise InvalidRequest(
            f"The field {unknown[0]!r} is not served by this proxy's Messages endpoint; "
            "/v1/chat/completions serves tools, images and the other options.",
            param=unknown[0],
        )
    name = body.get("model")
    if not isinstance(name, str) or not name:
        raise InvalidRequest("`model` must be a non-empty string.", param="model")
    max_tokens = body.get("max_tokens")
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise InvalidRequest(
            "`max_tokens` must be a whole number of at least 1.", param="max_tokens"
        )
    messages: list[Message] = []
    if body.get("system") is not None:
        messages.append(Message.system(_text(body["system"], "system")))
    turns = body.get("messages")
    if not isinstance(turns, list) or not turns:
        raise InvalidRequest("`messages` must be a non-empty list.", param="messages")
    for index, turn in enumerate(turns):
        role = turn.get("role") if isinstance(turn, dict) else None
        if role not in ("user", "assistant"):
            raise InvalidRequest(
                f"`messages[{index}].role` must be 'user' or 'assistant'.",
                param=f"messages[{index}]",
            )
        content = _text(turn.get("content"), f"messages[{index}].content")
        messages.append(Message.user(content) if role == "user" else Message.assistant(content))
    settings = ModelSettings(max_tokens=max_tokens)
    temperature, top_p = _number(body, "temperature"), _number(body, "top_p")
    if temperature is not None:
        settings["temperature"] = temperature
    if top_p is not None:
        settings["top_p"] = top_p
    stop = body.get("stop_sequences")
    if stop is not None:
        if not isinstance(stop, list) or not all(isinstance(s, str) for s in stop):
            raise InvalidRequest(
                "`stop_sequences` must be a list of strings.", param="stop_sequences"
            )
        settings["stop"] = list(stop)
    stream = body.get("stream")
    if stream is not None and not isinstance(stream, bool):
        raise InvalidRequest("`stream` must be true or false.", param="stream")
    return name, ModelRequest(messages, settings=settings), bool(stream)


def _usage(usage: Usage) -> dict[str, int]:
    return {"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens}


def message_body(response: ModelResponse, *, model: str, message_id: str) -> dict[str, Any]:
    """A Messages API answer for `response`."""
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [{"type": "text", "text": response.message.content}],
        "stop_reason": _STOP.get(response.finish_reason, "end_turn"),
        "stop_sequence": None,
        "usage": _usage(response.usage),
    }


def _error_body(error: ProxyError, secrets: tuple[str, ...]) -> dict[str, Any]:
    kind = _ERROR_TYPES.get(error.status, "api_error")
    return {"type": "error", "error": {"type": kind, "message": redact(error.message, secrets)}}


def _event(name: str, data: dict[str, Any]) -> bytes:
    return b"event: %s\ndata: %s\n\n" % (name.encode(), dumps(data).encode("utf-8"))


class MessagesEndpoint:
    """`POST /messages`: Anthropic's Messages API; `create` is the Starlette endpoint."""

    def __init__(
        self,
        router: ModelRouter,
        *,
        api_key: str | None,
        max_body_bytes: int,
        routing: Callable[[Scope, str | None], Awaitable[ModelRouter]] | None = None,
    ) -> None:
        self.router = router
        self.api_key = api_key
        self.max_body_bytes = max_body_bytes
        self.routing = routing

    async def create(self, request: Request) -> Response:
        """Answer one Messages API request, whole or streamed."""
        record = access_record(request.scope)
        router = self.router
        try:
            self._check_key(request)
            declared = request.headers.get("content-length", "")
            if declared.isdigit() and int(declared) > self.max_body_bytes:
                raise self._too_large()
            raw = await request.body()
            if len(raw) > self.max_body_bytes:
                raise self._too_large()
            try:
                payload = loads(raw)
            except ValueError:
                raise InvalidRequest("The request body is not valid JSON.") from None
            name, model_request, stream = parse_messages_request(payload)
            if record is not None:
                record.model_name = name
            if self.routing is not None:
                router = await self.routing(request.scope, name)
            model = router.resolve(name)
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
        empty = ModelResponse(message=Message.assistant())
        start = {
            **message_body(empty, model=name, message_id=message_id),
            "content": [],
            "stop_reason": None,
        }
        yield _event("message_start", {"type": "message_start", "message": start})
        opened = {"type": "content_block_start", "index": 0, "content_block": _EMPTY_TEXT}
        yield _event("content_block_start", opened)
        done: ModelResponse | None = None
        try:
            async for event in model.stream(model_request):
                if isinstance(event, TextDelta) and event.delta:
                    delta = {"type": "text_delta", "text": event.delta}
                    yield _event(
                        "content_block_delta",
                        {"type": "content_block_delta", "index": 0, "delta": delta},
                    )
                elif isinstance(event, ResponseDone):
                    done = event.response
        except Exception as exc:
            error = proxy_error(exc)
            secrets = self._secrets(router)
            log_failure(exc, error, secrets)
            yield _event("error", _error_body(error, secrets))
            return
        usage = done.usage if done is not None else Usage()
        record = access_record(request.scope)
        if record is not None:
            record.usage = usage
        reason = _STOP.get(done.finish_reason, "end_turn") if done is not None else "end_turn"
        yield _event("content_block_stop", {"type": "content_block_stop", "index": 0})
        yield _event(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": reason, "stop_sequence": None},
                "usage": _usage(usage),
            },
        )
        yield _event("message_stop", {"type": "message_stop"})

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
