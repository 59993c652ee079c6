"""A client that gives up: the upstream request is cancelled, streamed or not."""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import socketserver
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from proxy_serve import serve

from tidemill.llm import ModelRequest, ScriptedModel
from tidemill.llm.proxy import ModelRouter, create_app
from tidemill.types import ModelResponse

HELLO = [{"role": "user", "content": "Hello"}]


class CountingUpstream:
    """An upstream that reads each request and never answers; counts the ones still open."""

    def __init__(self) -> None:
        self.open = 0
        self.seen = 0
        self._lock = threading.Lock()
        upstream = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                data = b""
                while b"\r\n\r\n" not in data:
                    chunk = self.request.recv(65536)
                    if not chunk:
                        return
                    data += chunk
                with upstream._lock:
                    upstream.open += 1
                    upstream.seen += 1
                try:
                    while self.request.recv(65536):  # until the proxy closes the connection
                        pass
                except OSError:
                    pass
                finally:
                    with upstream._lock:
                        upstream.open -= 1

        self._server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    @contextmanager
    def running(self) -> Iterator[CountingUpstream]:
        self._thread.start()
        try:
            yield self
        finally:
            self._server.shutdown()
            self._server.server_close()


def wait_until(condition: Any, what: str) -> None:
    """Wait for a state the test needs (not a timing assertion: the deadline only stops a hang)."""
    deadline = time.monotonic() + 15
    while not condition():
        assert time.monotonic() < deadline, f"never reached: {what}"
        time.sleep(0.01)


def post(port: int, body: dict[str, Any]) -> socket.socket:
    data = json.dumps(body).encode()
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.sendall(
        b"POST /v1/chat/completions HTTP/1.1\r\nhost: proxy\r\ncontent-type: application/json\r\n"
        b"content-length: %d\r\n\r\n%s" % (len(data), data)
    )
    return sock


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_clients_that_give_up_leave_no_upstream_request_open(stream: bool) -> None:
    clients = 8
    with CountingUpstream().running() as upstream:
        router = ModelRouter(
            provider_options={"openai": {"base_url": upstream.url, "api_key": "sk-up-0123456789"}}
        )
        with serve(create_app(router)) as url:
            port = int(url.rsplit(":", 1)[1])
            body = {"model": "openai:gpt-4o", "messages": HELLO, "stream": stream}
            socks = [post(port, body) for _ in range(clients)]
            wait_until(lambda: upstream.seen == clients, "every request reached the upstream")
            assert upstream.open == clients
            for sock in socks:  # every client gives up
                sock.close()
            wait_until(lambda: upstream.open == 0, "the proxy closed every upstream request")


async def test_a_whole_answer_is_cancelled_when_its_client_leaves(
    caplog: pytest.LogCaptureFixture,
) -> None:
    started, cancelled = asyncio.Event(), asyncio.Event()

    class Slow(ScriptedModel):
        async def request(self, request: ModelRequest) -> ModelResponse:
            started.set()
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                cancelled.set()
                raise
            raise AssertionError("not cancelled")

    app = create_app(ModelRouter(aliases={"slow": Slow()}))
    body = json.dumps({"model": "slow", "messages": HELLO}).encode()
    inbox = [{"type": "http.request", "body": body, "more_body": False}]
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        if inbox:
            return inbox.pop(0)
        await started.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "method": "POST",
        "path": "/v1/chat/completions",
        "root_path": "",
        "query_string": b"",
        "headers": [],
        "client": ("127.0.0.1", 5000),
    }
    with caplog.at_level(logging.INFO, logger="tidemill.llm.proxy"):
        await asyncio.wait_for(app(scope, receive, send), 10)
    assert cancelled.is_set()
    assert sent == []
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    task = asyncio.current_task()
    assert task is not None and not task.cancelling()


async def test_a_whole_answer_still_goes_out_when_its_client_stays() -> None:
    app = create_app(ModelRouter(aliases={"echo": ScriptedModel(["Hi!"])}))
    body = json.dumps({"model": "echo", "messages": HELLO}).encode()
    inbox = [{"type": "http.request", "body": body, "more_body": False}]
    sent: list[dict[str, Any]] = []
    done = asyncio.Event()

    async def receive() -> dict[str, Any]:
        if inbox:
            return inbox.pop(0)
        await done.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)
        if message["type"] == "http.response.body":
            done.set()

    scope = {
        "type": "http",
        "method": "POST",
        "path": "/v1/chat/completions",
        "root_path": "",
        "query_string": b"",
        "headers": [],
        "client": ("127.0.0.1", 5000),
    }
    await app(scope, receive, send)
    assert sent[0]["status"] == 200
    assert json.loads(sent[1]["body"])["choices"][0]["message"]["content"] == "Hi!"
