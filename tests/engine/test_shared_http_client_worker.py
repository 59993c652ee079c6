"""A worker's models share one `httpx` client: one connection pool for every provider.

The steps talk to a local HTTP/1.1 server that counts the TCP connections it
accepts: models of two providers in one worker reach it over one kept-alive
connection, which only happens when they send through the same client.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

import tidemill.engine.workers._worker as worker_module
from provider_answers import ANTHROPIC_ANSWER, OPENAI_ANSWER
from tidemill.engine import AsyncEngine
from tidemill.flows import Flow

pytestmark = pytest.mark.timeout(90)

KEY_ENV = "TIDEMILL_TEST_SHARED_KEY"


def answer_for(path: str) -> dict[str, Any]:
    return ANTHROPIC_ANSWER if path.endswith("/messages") else OPENAI_ANSWER


def stream_for(path: str) -> bytes:
    """The answer of `path` as an event stream (agent steps stream their model calls)."""
    assert path.endswith("/messages"), path
    message = {**ANTHROPIC_ANSWER, "content": [], "stop_reason": None}
    events = [
        ("message_start", {"type": "message_start", "message": message}),
        ("content_block_start", {"type": "content_block_start", "index": 0,
                                 "content_block": {"type": "text", "text": ""}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                 "delta": {"type": "text_delta", "text": "B"}}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                           "usage": {"output_tokens": 1}}),
        ("message_stop", {"type": "message_stop"}),
    ]  # fmt: skip
    return "".join(f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in events).encode()


class Upstream:
    """A keep-alive HTTP/1.1 server on 127.0.0.1 answering OpenAI and Anthropic calls."""

    def __init__(self) -> None:
        self.connections = 0
        self.requests: list[tuple[str, int]] = []
        upstream = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def setup(self) -> None:  # once per accepted connection
                super().setup()
                upstream.connections += 1

            def do_POST(self) -> None:
                sent = json.loads(self.rfile.read(int(self.headers.get("content-length", "0"))))
                upstream.requests.append((self.path, self.client_address[1]))
                streamed = bool(sent.get("stream"))
                body = (
                    stream_for(self.path)
                    if streamed
                    else json.dumps(answer_for(self.path)).encode()
                )
                self.send_response(200)
                self.send_header(
                    "content-type", "text/event-stream" if streamed else "application/json"
                )
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self._thread.start()

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)


@pytest.fixture
def upstream(monkeypatch: pytest.MonkeyPatch) -> Iterator[Upstream]:
    monkeypatch.setenv(KEY_ENV, "sk-test-shared")
    server = Upstream()
    try:
        yield server
    finally:
        server.stop()


def two_providers(url: str) -> Flow:
    """An `ai_action` step on OpenAI, then an `ai_agent` step on Anthropic, both at `url`."""
    key = f"env:{KEY_ENV}"
    ask = {"model": "openai:gpt-4o-mini", "base_url": f"{url}/v1", "api_key": key, "prompt": "a?"}
    agent = {"model": "anthropic:claude-sonnet-4-5", "base_url": url, "api_key": key}
    return Flow.model_validate(
        {
            "steps": [
                {"id": "ask", "ai_action": ask},
                {"id": "agent", "ai_agent": agent, "inputs": {"user_message": "b?"}},
            ]
        }
    )


async def test_a_worker_shares_one_client_across_providers_and_closes_it(
    engine: AsyncEngine, upstream: Upstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[httpx.AsyncClient] = []
    real = worker_module.new_http_client

    def spy() -> httpx.AsyncClient:
        made.append(real())
        return made[-1]

    monkeypatch.setattr(worker_module, "new_http_client", spy)
    async with engine.worker(concurrency=1, poll=0.1, pool_size=1):
        run_id = await engine.submit(two_providers(upstream.url))
        result = await engine.wait(run_id, timeout=60)
        assert len(made) == 1
        assert not made[0].is_closed
    assert result == "B"
    assert [path for path, _ in upstream.requests] == ["/v1/chat/completions", "/v1/messages"]
    # One pool: the second provider's call reused the first one's connection.
    assert upstream.connections == 1
    assert len({port for _, port in upstream.requests}) == 1
    assert made[0].is_closed  # the worker made it, so the worker closed it


async def test_a_worker_uses_a_client_it_is_given_and_leaves_it_open(
    engine: AsyncEngine, upstream: Upstream
) -> None:
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.path)
        if json.loads(request.content).get("stream"):
            headers = {"content-type": "text/event-stream"}
            return httpx.Response(200, content=stream_for(request.url.path), headers=headers)
        return httpx.Response(200, json=answer_for(request.url.path))

    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    try:
        async with engine.worker(concurrency=1, poll=0.1, pool_size=1, http_client=client):
            run_id = await engine.submit(two_providers(upstream.url))
            assert await engine.wait(run_id, timeout=60) == "B"
        assert seen == ["/v1/chat/completions", "/v1/messages"]
        assert upstream.requests == []  # every call went through the given client
        assert not client.is_closed
    finally:
        await client.aclose()


async def test_a_worker_whose_models_are_offline_makes_no_client(
    engine: AsyncEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[httpx.AsyncClient] = []
    monkeypatch.setattr(worker_module, "new_http_client", lambda: made.append(httpx.AsyncClient()))
    flow = Flow.model_validate(
        {"steps": [{"id": "ask", "ai_action": {"model": "fake", "prompt": "hi"}}]}
    )
    async with engine.worker(concurrency=1, poll=0.1, pool_size=1):
        run_id = await engine.submit(flow)
        await engine.wait(run_id, timeout=60)
    assert made == []
