"""Replaying recorded provider traffic: fixture files, mock transports, a real local server.

The recorded responses live in `tests/fixtures/providers/` (see its
MANIFEST.md); `TIDEMILL_PROVIDER_FIXTURES` points elsewhere. Tests that need
them are skipped, saying why, when they are absent.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import threading
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from tidemill.llm import HttpModel, ModelRequest, RetryPolicy
from tidemill.llm._model import ModelStreamEvent
from tidemill.types import (
    Message,
    ModelResponse,
    ReasoningDelta,
    ResponseDone,
    TextDelta,
    ToolCallDelta,
    Usage,
)

FIXTURES_ENV = "TIDEMILL_PROVIDER_FIXTURES"
_DEFAULT_FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "providers"

API_KEY = "sk-test-0123456789abcdefSECRET"
"""The fake key every test model uses; no error may ever show it."""

NO_RETRY = RetryPolicy(max_retries=0)
FAST_RETRY = RetryPolicy(max_retries=3, initial_delay=0.0, jitter=0.0)

HELLO = ModelRequest([Message.user("Hello")])


def fixtures_dir() -> Path:
    """The providers fixture directory; skips the calling test when it is missing."""
    root = Path(os.environ.get(FIXTURES_ENV, _DEFAULT_FIXTURES))
    if not (root / "index.json").is_file():
        pytest.skip(f"provider fixtures not found at {root}; set {FIXTURES_ENV}")
    return root


def fixture_bytes(name: str) -> bytes:
    """The bytes of one fixture file, e.g. `openai-chat/text-stream.sse`.

    `.chunks.jsonl` files (one parsed chunk per line) are re-framed as SSE,
    with the final `[DONE]` that OpenAI-compatible streams end with.
    """
    path = fixtures_dir() / name
    data = path.read_bytes()
    if name.endswith(".chunks.jsonl"):
        lines = [line for line in data.decode("utf-8").splitlines() if line.strip()]
        framed = "".join(f"data: {line}\n\n" for line in lines) + "data: [DONE]\n\n"
        return framed.encode("utf-8")
    return data


def fixture_json(name: str) -> Any:
    """A JSON fixture, decoded."""
    return json.loads(fixture_bytes(name))


def split(data: bytes, sizes: Iterable[int]) -> list[bytes]:
    """Cut `data` into pieces of the given sizes (cycled), the last one taking the rest."""
    pieces: list[bytes] = []
    sizes = list(sizes) or [len(data) or 1]
    start, i = 0, 0
    while start < len(data):
        size = max(1, sizes[i % len(sizes)])
        pieces.append(data[start : start + size])
        start += size
        i += 1
    return pieces


# -- mock transport ------------------------------------------------------------------------


Handler = Callable[[httpx.Request], httpx.Response | Coroutine[None, None, httpx.Response]]
Answer = httpx.Response | Exception | Handler


class Recorder:
    """A mock transport that answers from a list of responses and records each request."""

    def __init__(self, replies: Iterable[Answer] = ()) -> None:
        self.replies: list[Answer] = list(replies)
        self.requests: list[httpx.Request] = []

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if not self.replies:
            raise AssertionError(f"unexpected extra request to {request.url}")
        reply = self.replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        if isinstance(reply, httpx.Response):
            return reply
        answer = reply(request)
        return await answer if inspect.isawaitable(answer) else answer

    def client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=httpx.MockTransport(self))

    def bodies(self) -> list[Any]:
        return [json.loads(request.content) for request in self.requests]


def sse(body: bytes, *, chunks: Sequence[bytes] | None = None, status: int = 200) -> httpx.Response:
    """A streamed response delivering `body` (or the given `chunks`) piece by piece."""
    pieces = list(chunks) if chunks is not None else [body]

    async def stream() -> AsyncIterator[bytes]:
        for piece in pieces:
            yield piece

    return httpx.Response(status, headers={"content-type": "text/event-stream"}, content=stream())


def json_reply(
    body: bytes | Any, *, status: int = 200, headers: dict[str, str] | None = None
) -> httpx.Response:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return httpx.Response(
        status, headers={"content-type": "application/json", **(headers or {})}, content=content
    )


# -- running a model --------------------------------------------------------------------------


@dataclass
class Streamed:
    """What one streamed call produced."""

    events: list[ModelStreamEvent]
    response: ModelResponse

    @property
    def text(self) -> str:
        return "".join(e.delta for e in self.events if isinstance(e, TextDelta))

    @property
    def reasoning(self) -> str:
        return "".join(e.delta for e in self.events if isinstance(e, ReasoningDelta))

    @property
    def signatures(self) -> list[str]:
        return [e.signature for e in self.events if isinstance(e, ReasoningDelta) and e.signature]

    def calls_from_deltas(self) -> dict[int, tuple[str | None, str | None, str]]:
        """Each call index → (id, name, arguments) as rebuilt from the deltas alone."""
        calls: dict[int, tuple[str | None, str | None, str]] = {}
        for event in self.events:
            if isinstance(event, ToolCallDelta):
                cid, name, args = calls.get(event.index, (None, None, ""))
                calls[event.index] = (
                    cid or event.call_id,
                    name or event.name,
                    args + event.arguments_delta,
                )
        return calls


async def stream_all(model: HttpModel, request: ModelRequest = HELLO) -> Streamed:
    events = [event async for event in model.stream(request)]
    assert isinstance(events[-1], ResponseDone), events[-1]
    assert not any(isinstance(e, ResponseDone) for e in events[:-1])
    return Streamed(events, events[-1].response)


PRICE_FIELDS = frozenset({"cost_usd", "unpriced_requests"})


def tokens(usage: Usage) -> dict[str, Any]:
    """A usage's request and token counts, without its price (test_pricing.py checks that)."""
    return usage.model_dump(exclude=PRICE_FIELDS)


def summary(response: ModelResponse) -> dict[str, Any]:
    """The parts of a response the fixture tests compare, as plain data."""
    message = response.message
    return {
        "text": message.content,
        "calls": [
            (call.id, call.name, call.arguments, call.raw_arguments) for call in message.tool_calls
        ],
        "reasoning": [
            (r.text, r.signature, r.redacted_data, r.provider) for r in message.reasoning
        ],
        "usage": response.usage.model_dump(),
        "finish": response.finish_reason,
        "model": response.model,
        "id": response.response_id,
    }


def run(coroutine: Any) -> Any:
    """Run a coroutine on a fresh loop, from sync code (hypothesis tests)."""
    return asyncio.run(coroutine)


# -- a real HTTP server ---------------------------------------------------------------------


@dataclass
class Reply:
    """What the local server sends for one request."""

    body: bytes = b""
    status: int = 200
    content_type: str = "text/event-stream"
    headers: dict[str, str] = field(default_factory=dict)
    chunk_sizes: Sequence[int] = (7, 64, 1, 300, 13)
    """The body is written in pieces of these sizes (cycled), flushed one by one."""
    cut_after: int | None = None
    """Close the connection after this many body bytes, without finishing the chunked body."""
    stall_after: int | None = None
    """Stop sending after this many body bytes and hold the connection open."""


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: Any
    client_port: int = 0


class ReplayServer:
    """A threaded stdlib HTTP/1.1 server on 127.0.0.1 that plays `Reply`s in order.

    Bodies go out with chunked transfer encoding in small flushed pieces, so
    the client meets real sockets and real chunk boundaries.
    """

    def __init__(self) -> None:
        self.replies: list[Reply] = []
        self.seen: list[Seen] = []
        self._stop = threading.Event()
        server = self

        class _Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", "0"))
                raw = self.rfile.read(length)
                server.seen.append(
                    Seen(
                        "POST",
                        self.path,
                        {k.lower(): v for k, v in self.headers.items()},
                        json.loads(raw or b"null"),
                        self.client_address[1],
                    )
                )
                reply = server.replies.pop(0) if server.replies else Reply(b"no reply", 500)
                self.send_response(reply.status)
                self.send_header("content-type", reply.content_type)
                self.send_header("transfer-encoding", "chunked")
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                sent = 0
                for piece in split(reply.body, reply.chunk_sizes):
                    for limit in (reply.cut_after, reply.stall_after):
                        if limit is not None and sent + len(piece) > limit:
                            piece = piece[: limit - sent]
                    if piece:
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                        self.wfile.flush()
                        sent += len(piece)
                    if reply.cut_after is not None and sent >= reply.cut_after:
                        self.close_connection = True
                        return  # the socket closes with the chunked body unfinished
                    if reply.stall_after is not None and sent >= reply.stall_after:
                        server._stop.wait(10)
                        self.close_connection = True
                        return
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> ReplayServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)


# -- models over a mock transport -----------------------------------------------------------


def chat_model(provider: str, recorder: Recorder, **options: Any) -> HttpModel:
    """An `OpenAIChatModel` (or `AnthropicModel` for `anthropic`) that talks to `recorder`."""
    from tidemill.llm import AnthropicModel, OpenAIChatModel

    options.setdefault("retry", NO_RETRY)
    if provider == "anthropic":
        return AnthropicModel(
            "claude-test", api_key=API_KEY, http_client=recorder.client(), **options
        )
    if provider == "openai-compatible":
        options.setdefault("base_url", "https://llm.example.invalid/v1")
    return OpenAIChatModel(
        "model-test", provider=provider, api_key=API_KEY, http_client=recorder.client(), **options
    )


async def replay_stream(
    provider: str, chunks: Sequence[bytes], request: ModelRequest = HELLO
) -> Streamed:
    """Stream `chunks` (one response body) through a model of `provider`."""
    model = chat_model(provider, Recorder([sse(b"", chunks=chunks)]))
    try:
        return await stream_all(model, request)
    finally:
        await model.aclose()


def event_dump(streamed: Streamed) -> list[dict[str, Any]]:
    return [event.model_dump() for event in streamed.events]
