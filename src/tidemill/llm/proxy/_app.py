"""The ASGI app: OpenAI's Chat Completions and Models endpoints over any Tidemill model.

Routes: `POST /v1/chat/completions` (streamed or not), `GET /v1/models`
(plus `GET /v1/models/{id}`) and, for Anthropic's clients, `POST /v1/messages`
(with tools and images, `_anthropic`), also without the `/v1` prefix for clients
configured with a bare base URL, and `GET /health`. Every error, including
unknown paths and methods, is answered in OpenAI's error shape.

`POST` to a chat path goes straight to its handler, a plain ASGI callable that
reads the scope's headers and the body itself, without Starlette's middleware
stack, router and `Request` (about a tenth of a request's own work); every
other request, and the lifespan, go through Starlette. In front of both sit
the access log (`_access`) and, when origins are configured, CORS.
"""

from __future__ import annotations

import asyncio
import gc
import hmac
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import urlsplit

from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tidemill.errors import ConfigurationError
from tidemill.llm._json import dumps
from tidemill.llm._pricing import load_prices
from tidemill.llm._spec import parse_model_spec
from tidemill.llm.proxy._access import AccessLog, MeteredEncoder, access_record
from tidemill.llm.proxy._anthropic import MessagesEndpoint
from tidemill.llm.proxy._disconnect import CancelOnDisconnect
from tidemill.llm.proxy._errors import InvalidRequest, ProxyError, proxy_error
from tidemill.llm.proxy._files import FilePolicy
from tidemill.llm.proxy._limits import (
    MAX_BODY_BYTES,
    MAX_DEPTH,
    MAX_MESSAGES,
    MAX_VALUES,
    RequestLimits,
    parse_body,
)
from tidemill.llm.proxy._request import check_fields
from tidemill.llm.proxy._response import completion_body, completion_id, now
from tidemill.llm.proxy._router import ModelRouter
from tidemill.llm.proxy._streaming import (
    EventStreamResponse,
    encoded,
    error_response,
    log_failure,
)
from tidemill.llm.proxy._wire import ModelCard, ModelList

__all__ = ["DEFAULT_KEEPALIVE", "DEFAULT_READ_TIMEOUT", "MAX_BODY_BYTES", "Routing", "create_app"]

DEFAULT_KEEPALIVE = 15.0
"""Seconds of upstream silence before a streamed answer gets a keep-alive comment."""

DEFAULT_READ_TIMEOUT = 60.0
"""Seconds a client has to send its whole request body once its headers are in."""

Routing = Callable[[Scope, "str | None"], Awaitable[ModelRouter]]
"""Picks the router that serves one request: given its ASGI scope and the `model`
it names (None for `/v1/models`), the `ModelRouter` to resolve it with. It may
refuse the request by raising `ProxyError` (a 401, a 403, a 404), which is
answered in OpenAI's error shape."""

_CHAT_PATHS = frozenset({"/v1/chat/completions", "/chat/completions"})


def create_app(
    router: ModelRouter | None = None,
    *,
    keepalive: float = DEFAULT_KEEPALIVE,
    api_key: str | None = None,
    max_body_bytes: int = MAX_BODY_BYTES,
    max_messages: int = MAX_MESSAGES,
    max_depth: int = MAX_DEPTH,
    max_values: int = MAX_VALUES,
    read_timeout: float = DEFAULT_READ_TIMEOUT,
    cors_origins: Sequence[str] = (),
    allow_file_prefixes: Sequence[str] = (),
    access_log: bool = True,
    routing: Routing | None = None,
) -> Starlette:
    """Build the OpenAI-compatible proxy as an ASGI app.

    Args:
        router: Turns request `model` strings into models; by default any
            spec string is served, with credentials from the environment.
        keepalive: Seconds of upstream silence before a `: keep-alive` comment.
        api_key: When set, clients must send it as `Authorization: Bearer <key>`.
        max_body_bytes: The largest request body accepted (a 413 past it).
        max_messages: The most messages a request may hold (a 400 past it).
        max_depth: How deeply objects and arrays may nest in a body (a 400 past it).
        max_values: The most JSON values a body may hold, counted before it
            is parsed as its commas and opening brackets (a 413 past it).
        read_timeout: Seconds a client has to send its whole body; a slower
            one is answered 408 and its connection closed.
        cors_origins: Browser origins allowed to call the proxy
            (`https://app.example`, or `*` for any); none by default.
        allow_file_prefixes: Stored files clients may send as images, which
            the upstream reads with the proxy's own credentials (`s3://bucket`,
            `gs://bucket/folder/`); none by default (`FilePolicy`).
        access_log: Write a line per request on the `tidemill.llm.proxy.access`
            logger, with the model, tokens, cost and latency.
        routing: Picks the router of each request, for an app that serves
            each caller models of its own (`tidemill.server` does); `router`
            then serves only what `routing` does not replace, and is closed
            with the app. The `routing` callable is called after `api_key` is
            checked and, for a chat completion, once its body is read.

    Raises:
        ConfigurationError: For a keep-alive interval or read timeout that is
            not positive, an origin that is not `scheme://host[:port]`, a
            file prefix that names no bucket, or a limit that is not a
            positive whole number.

    Examples:
        >>> from starlette.testclient import TestClient
        >>> from tidemill.llm import ScriptedModel
        >>> app = create_app(ModelRouter(aliases={"echo": ScriptedModel(["Hi!"])}))
        >>> with TestClient(app) as client:
        ...     answer = client.post("/v1/chat/completions", json={
        ...         "model": "echo", "messages": [{"role": "user", "content": "Hello"}]})
        >>> answer.status_code, answer.json()["choices"][0]["message"]["content"]
        (200, 'Hi!')
    """
    if not keepalive > 0:
        raise ConfigurationError(
            f"The keep-alive interval must be positive, not {keepalive!r}.",
            hint="Pass keepalive= in seconds, e.g. 15.",
        )
    if not read_timeout > 0:
        raise ConfigurationError(
            f"The read timeout must be positive, not {read_timeout!r}.",
            hint="Pass read_timeout= in seconds, e.g. 60.",
        )
    router = router or ModelRouter()
    limits = RequestLimits(max_body_bytes, max_messages, max_depth, max_values)
    files = FilePolicy(allow_file_prefixes)
    chat = _ChatCompletions(
        router,
        keepalive=keepalive,
        api_key=api_key,
        limits=limits,
        read_timeout=read_timeout,
        files=files,
        routing=routing,
    )
    models = _Models(router, api_key=api_key, routing=routing)
    messages = MessagesEndpoint(
        router,
        api_key=api_key,
        max_body_bytes=max_body_bytes,
        routing=routing,
        limits=limits,
        files=files,
    )

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        _settle()
        try:
            yield
        finally:
            await router.aclose()

    routes = []
    for prefix in ("/v1", ""):
        routes += [
            Route(f"{prefix}/chat/completions", chat, methods=["POST"]),
            Route(f"{prefix}/messages", messages.create, methods=["POST"]),
            Route(f"{prefix}/models", models.list, methods=["GET"]),
            Route(f"{prefix}/models/{{model_id:path}}", models.retrieve, methods=["GET"]),
        ]
    routes.append(Route("/health", _health, methods=["GET"]))
    return _ProxyApp(
        chat,
        cors_origins=[_origin(origin) for origin in cors_origins],
        access_log=access_log,
        routes=routes,
        lifespan=lifespan,
        exception_handlers={HTTPException: _http_error, Exception: _internal_error},
    )


class _ProxyApp(Starlette):
    """Starlette, except that a `POST` to a chat path goes straight to its handler.

    The chat handler answers every failure itself, in OpenAI's shape, so
    Starlette's error middleware has nothing to add there; a path under a
    `root_path` still goes through Starlette's router, which knows how to strip it.
    The access log and CORS wrap both.
    """

    def __init__(
        self,
        chat: _ChatCompletions,
        *,
        cors_origins: Sequence[str],
        access_log: bool,
        **options: Any,
    ) -> None:
        super().__init__(**options)
        self._chat = chat
        entry: ASGIApp = self._dispatch
        if cors_origins:
            entry = CORSMiddleware(
                entry,
                allow_origins=cors_origins,
                allow_methods=["GET", "POST"],
                allow_headers=["*"],  # the SDKs send headers of their own (x-stainless-*)
                expose_headers=["retry-after", "retry-after-ms"],
            )
        self._entry = AccessLog(entry) if access_log else entry

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._entry(scope, receive, send)

    async def _dispatch(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] == "http"
            and scope["method"] == "POST"
            and scope["path"] in _CHAT_PATHS
            and not scope.get("root_path")
        ):
            await self._chat(scope, receive, send)
            return
        await super().__call__(scope, receive, send)


def _settle() -> None:
    """Load at startup what the first request would, then spare it the garbage collector.

    The price table takes most of a second to read. `gc.freeze` moves every
    object alive at startup (modules, the price table: some 100,000) out of
    the collector's reach; a full collection walks them all otherwise, and
    stalls every open stream for about 30 ms when it runs.
    """
    load_prices()
    gc.freeze()


def _origin(text: str) -> str:
    """A CORS origin, checked: `*`, or `scheme://host[:port]` with nothing after."""
    if text == "*":
        return text
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.path or parts.query:
        raise ConfigurationError(
            f"The CORS origin {text!r} is not an origin.",
            hint="Write it as scheme://host[:port], e.g. https://app.example, or * for any.",
        )
    return text


def _check_key(expected: str | None, authorization: str | None) -> None:
    if expected is None:
        return
    scheme, _, given = (authorization or "").partition(" ")
    # Compared as bytes: `compare_digest` refuses non-ASCII text, which a header may hold.
    matches = hmac.compare_digest(given.strip().encode(), expected.encode())
    if scheme.lower() != "bearer" or not matches:
        raise ProxyError(
            "Incorrect or missing API key for this proxy; send it as 'Authorization: Bearer "
            "<key>'.",
            status=401,
            code="invalid_api_key",
        )


class _ChatCompletions:
    """`POST /chat/completions`, as a plain ASGI app so a stream is sent as it arrives."""

    def __init__(
        self,
        router: ModelRouter,
        *,
        keepalive: float,
        api_key: str | None,
        limits: RequestLimits,
        read_timeout: float = DEFAULT_READ_TIMEOUT,
        files: FilePolicy | None = None,
        routing: Routing | None = None,
    ) -> None:
        self.router = router
        self.routing = routing
        self.keepalive = keepalive
        self.api_key = api_key
        self.limits = limits
        self.limit = limits.max_body_bytes
        self.read_timeout = read_timeout
        self.files = files or FilePolicy()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        record = access_record(scope)
        router = self.router
        try:
            authorization, declared = _request_headers(scope)
            _check_key(self.api_key, authorization)
            body = await self._body(receive, declared)
            if body is None:  # the client left before it sent its whole request
                return
            payload, parsed = await parse_body(body, self.limits)
            if record is not None:
                record.model_name = parsed.model
            self.files.check(parsed.request.messages, payload)
            if self.routing is not None:
                router = await self.routing(scope, parsed.model)
            model = router.resolve(parsed.model)
            check_fields(parsed, model)
            if record is not None:
                record.model = model
            if parsed.stream:
                encoder = MeteredEncoder(
                    record,
                    model=parsed.model,
                    response_id=completion_id(),
                    created=now(),
                    include_usage=parsed.include_usage,
                )
                relay = router.relay(model)
                frames = (
                    relay.frames(parsed.request, encoder)
                    if relay is not None and relay.handles(parsed.request)
                    else encoded(model.stream(parsed.request), encoder)
                )
                stream = EventStreamResponse(
                    frames,
                    preamble=encoder.start,
                    keepalive=self.keepalive,
                    secrets=router.secrets(),
                )
        except Exception as exc:
            await self._fail(send, exc, router)
            return
        if parsed.stream:
            await stream(scope, receive, send)
            return
        response_id, created = completion_id(), now()
        try:
            # A client that gives up cancels the upstream call, as a stream's does.
            async with CancelOnDisconnect(receive) as watch:
                response = await model.request(parsed.request)
            if watch.gone:
                return
            if record is not None:
                record.usage = response.usage
            answer = completion_body(
                response, model=parsed.model, response_id=response_id, created=created
            )
            body = dumps(answer).encode("utf-8")
        except Exception as exc:
            await self._fail(send, exc, router)
            return
        await _send_json(send, body)

    async def _body(self, receive: Receive, declared: bytes) -> bytes | None:
        """The request body; None when the client disconnected first.

        Raises:
            ProxyError: A 413 when the body is (or says it is) larger than the
                limit; a 408, closing the connection, when it has not all
                arrived within the read timeout.
        """
        if declared.isdigit() and int(declared) > self.limit:
            raise self._too_large()
        try:
            async with asyncio.timeout(self.read_timeout):
                return await self._read(receive)
        except TimeoutError:
            raise ProxyError(
                f"The request body did not arrive within {self.read_timeout:g} seconds.",
                status=408,
                code="request_timeout",
                headers={"connection": "close"},
            ) from None

    async def _read(self, receive: Receive) -> bytes | None:
        parts: list[bytes] = []
        size = 0
        while True:
            message: Message = await receive()
            if message["type"] != "http.request":
                return None
            part: bytes = message.get("body", b"")
            size += len(part)
            if size > self.limit:
                raise self._too_large()
            if not message.get("more_body", False):
                return b"".join((*parts, part)) if parts else part
            parts.append(part)

    def _too_large(self) -> ProxyError:
        return ProxyError(
            f"The request body is larger than {self.limit} bytes.",
            status=413,
            code="request_too_large",
        )

    async def _fail(self, send: Send, exc: Exception, router: ModelRouter) -> None:
        error = proxy_error(_as_request_error(exc))
        secrets = self.router.secrets()
        if router is not self.router:  # a routed request: its own credentials first
            secrets = (*router.secrets(), *secrets)
        log_failure(exc, error, secrets)
        await error_response(send, error, secrets)


def _as_request_error(exc: Exception) -> Exception:
    """A model type refusing a parsed value is still the request's fault."""
    if isinstance(exc, ValidationError):
        first = exc.errors()[0] if exc.errors() else {"msg": str(exc)}
        return InvalidRequest(f"Invalid request: {first['msg']}.")
    return exc


def _request_headers(scope: Scope) -> tuple[str | None, bytes]:
    """The `authorization` header (the first, as text) and `content-length` (b"" when absent)."""
    authorization: str | None = None
    declared = b""
    for name, value in scope["headers"]:  # ASGI servers send names in lowercase
        if name == b"authorization":
            if authorization is None:
                authorization = value.decode("latin-1")
        elif name == b"content-length":
            declared = value
    return authorization, declared


async def _send_json(send: Send, body: bytes, status: int = 200) -> None:
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})


class _Models:
    """`GET /models` and `GET /models/{id}`."""

    def __init__(
        self, router: ModelRouter, *, api_key: str | None, routing: Routing | None = None
    ) -> None:
        self.router = router
        self.api_key = api_key
        self.routing = routing

    async def _router(self, request: Request) -> ModelRouter:
        _check_key(self.api_key, request.headers.get("authorization"))
        if self.routing is None:
            return self.router
        return await self.routing(request.scope, None)

    async def list(self, request: Request) -> Response:
        try:
            router = await self._router(request)
        except ProxyError as exc:
            return _error_json(exc, self.router)
        body: ModelList = {
            "object": "list",
            "data": [self._card(router, name) for name in router.listed()],
        }
        return JSONResponse(body)

    async def retrieve(self, request: Request) -> Response:
        model_id = str(request.path_params["model_id"])
        try:
            router = await self._router(request)
            if model_id not in router.listed():
                raise router.unknown(model_id, f"The model {model_id!r} is not listed.")
        except ProxyError as exc:
            return _error_json(exc, self.router)
        return JSONResponse(self._card(router, model_id))

    def _card(self, router: ModelRouter, name: str) -> ModelCard:
        target = router.aliases.target(name) or name
        if isinstance(target, str):
            try:
                owner = parse_model_spec(target).provider
            except ConfigurationError:
                owner = "tidemill"
        else:
            owner = target.provider
        return {"id": name, "object": "model", "created": 0, "owned_by": owner}


def _error_json(error: ProxyError, router: ModelRouter | None = None) -> JSONResponse:
    secrets = router.secrets() if router is not None else ()
    return JSONResponse(error.body(secrets), status_code=error.status, headers=error.headers)


async def _health(request: Request) -> Response:
    return JSONResponse({"status": "ok"})


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    if exc.status_code == 404:
        message = f"Unknown path {request.url.path!r}; this proxy serves /v1/chat/completions."
        code: str | None = "unknown_url"
    else:
        message = f"{request.method} is not allowed on {request.url.path!r}."
        code = "method_not_allowed" if exc.status_code == 405 else None
    return _error_json(ProxyError(message, status=exc.status_code, code=code))


async def _internal_error(request: Request, exc: Exception) -> Response:
    error = proxy_error(exc)
    log_failure(exc, error)
    return _error_json(error)
