"""The access log, CORS and the request-read timeout."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import socket
from typing import Any, ClassVar

import httpx
import pytest
from llm_replay import ReplayServer, Reply, fixture_bytes
from proxy_serve import serve, upstream_router
from starlette.testclient import TestClient
from test_proxy_app import answer, call

from tidemill.errors import ConfigurationError
from tidemill.llm import ModelRequest, ScriptedModel
from tidemill.llm.proxy import ModelRouter, create_app
from tidemill.types import Message, ModelResponse, Usage

ACCESS = "tidemill.llm.proxy.access"
HELLO = [{"role": "user", "content": "Hello"}]


def echo_app(**options: Any) -> Any:
    return create_app(ModelRouter(aliases={"echo": ScriptedModel(["Hi there!"])}), **options)


def lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == ACCESS]


class TestAccessLog:
    async def test_the_query_string_is_never_logged(self, caplog: pytest.LogCaptureFixture) -> None:
        app = echo_app(api_key="proxy-key-0123")
        scope_query = b"api_key=proxy-key-0123&x=1"
        with caplog.at_level(logging.INFO, logger=ACCESS):
            sent = await call_with_query(app, "/v1/models", scope_query)
        assert sent[0]["status"] == 401
        (line,) = lines(caplog)
        assert '"GET /v1/models"' in line and " 401 " in line
        assert "proxy-key-0123" not in line and "api_key" not in line and "?" not in line

    async def test_a_chat_line_has_the_model_tokens_cost_and_latency(
        self, caplog: pytest.LogCaptureFixture, server: ReplayServer
    ) -> None:
        server.replies.append(
            Reply(fixture_bytes("openai-chat/text.json"), content_type="application/json")
        )
        body = json.dumps({"model": "openai:gpt-4o", "messages": HELLO}).encode()
        router = upstream_router(server)
        with caplog.at_level(logging.INFO, logger=ACCESS):
            status, raw = answer(await call(create_app(router), body))
        await router.aclose()  # no lifespan here to close its connections
        assert status == 200, raw
        (line,) = lines(caplog)
        assert re.search(
            r'"POST /v1/chat/completions" 200 model=openai:gpt-4o tokens=16\+12 '
            r"cost=\$0\.\d+ \d+ms$",
            line,
        ), line

    @pytest.mark.parametrize("usage", [True, False])
    def test_a_relayed_stream_is_logged_with_its_tokens_and_cost(
        self, caplog: pytest.LogCaptureFixture, server: ReplayServer, usage: bool
    ) -> None:
        server.replies.append(Reply(fixture_bytes("openai-chat/text-stream.sse")))
        body: dict[str, Any] = {"model": "openai:gpt-4o", "messages": HELLO, "stream": True}
        if usage:
            body["stream_options"] = {"include_usage": True}
        with caplog.at_level(logging.INFO, logger=ACCESS):
            with serve(create_app(upstream_router(server))) as url:
                reply = httpx.post(f"{url}/v1/chat/completions", json=body, timeout=10)
            assert reply.status_code == 200 and reply.text.endswith("data: [DONE]\n\n")
        (line,) = lines(caplog)
        assert re.search(r" 200 model=openai:gpt-4o tokens=16\+10 cost=\$0\.\d+ \d+ms$", line)

    async def test_an_offline_stream_is_logged_unpriced(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        body = json.dumps({"model": "echo", "messages": HELLO, "stream": True}).encode()
        with caplog.at_level(logging.INFO, logger=ACCESS):
            status, _ = answer(await call(echo_app(), body))
        assert status == 200
        (line,) = lines(caplog)
        assert re.search(r" 200 model=echo tokens=\d+\+\d+ cost=\? \d+ms$", line), line

    async def test_usage_the_upstream_did_not_report_is_not_logged_as_zero(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        class Unmetered(ScriptedModel):
            async def request(self, request: ModelRequest) -> ModelResponse:
                usage = Usage(requests=1, unreported_requests=1)
                return ModelResponse(message=Message.assistant("Hi"), usage=usage)

        app = create_app(ModelRouter(aliases={"m": Unmetered()}))
        body = json.dumps({"model": "m", "messages": HELLO}).encode()
        with caplog.at_level(logging.INFO, logger=ACCESS):
            status, _ = answer(await call(app, body))
        assert status == 200
        (line,) = lines(caplog)
        assert re.search(r" 200 model=m tokens=\? cost=\? \d+ms$", line), line

    async def test_a_hostile_model_name_stays_on_one_short_line(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        body = json.dumps({"model": "x\n200 forged line\r\x1b[2J" + "y" * 5000, "messages": HELLO})
        with caplog.at_level(logging.INFO, logger=ACCESS):
            await call(echo_app(), body.encode())
        (line,) = lines(caplog)
        assert "\n" not in line and "\r" not in line and "\x1b" not in line
        assert " 400 " in line and len(line) < 400

    async def test_it_can_be_turned_off(self, caplog: pytest.LogCaptureFixture) -> None:
        with caplog.at_level(logging.INFO, logger=ACCESS):
            await call(echo_app(access_log=False), json.dumps({"model": "echo"}).encode())
        assert lines(caplog) == []


async def call_with_query(app: Any, path: str, query: bytes) -> list[dict[str, Any]]:
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": query,
        "headers": [],
        "client": ("127.0.0.1", 5000),
        "server": ("127.0.0.1", 4000),
    }
    await app(scope, receive, send)
    return sent


class TestCors:
    ORIGIN = "https://app.example"
    PREFLIGHT: ClassVar[dict[str, str]] = {
        "origin": ORIGIN,
        "access-control-request-method": "POST",
        "access-control-request-headers": "authorization, content-type, x-stainless-os",
    }

    def test_it_is_off_by_default(self) -> None:
        with TestClient(echo_app()) as client:
            preflight = client.options("/v1/chat/completions", headers=self.PREFLIGHT)
            posted = client.post(
                "/v1/chat/completions",
                json={"model": "echo", "messages": HELLO},
                headers={"origin": self.ORIGIN},
            )
        assert preflight.status_code == 405
        assert "access-control-allow-origin" not in preflight.headers
        assert posted.status_code == 200
        assert "access-control-allow-origin" not in posted.headers

    def test_a_configured_origin_is_allowed(self) -> None:
        with TestClient(echo_app(cors_origins=[self.ORIGIN])) as client:
            preflight = client.options("/v1/chat/completions", headers=self.PREFLIGHT)
            posted = client.post(
                "/v1/chat/completions",
                json={"model": "echo", "messages": HELLO},
                headers={"origin": self.ORIGIN},
            )
            listed = client.get("/v1/models", headers={"origin": self.ORIGIN})
        assert preflight.status_code == 200
        assert preflight.headers["access-control-allow-origin"] == self.ORIGIN
        assert "x-stainless-os" in preflight.headers["access-control-allow-headers"].lower()
        assert "POST" in preflight.headers["access-control-allow-methods"]
        for response in (posted, listed):
            assert response.status_code == 200
            assert response.headers["access-control-allow-origin"] == self.ORIGIN

    def test_another_origin_is_not(self) -> None:
        with TestClient(echo_app(cors_origins=[self.ORIGIN])) as client:
            preflight = client.options(
                "/v1/chat/completions", headers={**self.PREFLIGHT, "origin": "https://evil.example"}
            )
            posted = client.post(
                "/v1/chat/completions",
                json={"model": "echo", "messages": HELLO},
                headers={"origin": "https://evil.example"},
            )
        assert preflight.status_code == 400
        assert "access-control-allow-origin" not in posted.headers

    @pytest.mark.parametrize("origin", ["", "app.example", "https://app.example/path"])
    def test_an_origin_that_is_no_origin_is_refused_at_start(self, origin: str) -> None:
        with pytest.raises(ConfigurationError, match="origin"):
            echo_app(cors_origins=[origin])


class TestReadTimeout:
    async def test_a_body_that_stops_arriving_is_a_408(self) -> None:
        parts = [{"type": "http.request", "body": b'{"model": "echo", ', "more_body": True}]
        never = asyncio.Event()
        sent: list[dict[str, Any]] = []

        async def receive() -> dict[str, Any]:
            if parts:
                return parts.pop(0)
            await never.wait()
            raise AssertionError("unreachable")

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        scope = {
            "type": "http",
            "method": "POST",
            "path": "/v1/chat/completions",
            "root_path": "",
            "query_string": b"",
            "headers": [(b"content-length", b"500")],
            "client": ("127.0.0.1", 5000),
        }
        await asyncio.wait_for(echo_app(read_timeout=0.05)(scope, receive, send), 10)
        status, raw = answer(sent)
        assert status == 408
        assert json.loads(raw)["error"]["code"] == "request_timeout"
        assert (b"connection", b"close") in sent[0]["headers"]

    def test_a_trickling_client_is_cut_off_by_the_server(self) -> None:
        with serve(echo_app(read_timeout=0.2)) as url:
            port = int(url.rsplit(":", 1)[1])
            with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
                sock.sendall(
                    b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\n"
                    b"content-type: application/json\r\ncontent-length: 1000\r\n\r\n{"
                )
                received = b""
                while chunk := sock.recv(65536):  # the server closes the connection
                    received += chunk
        assert received.startswith(b"HTTP/1.1 408 ")
        assert b'"request_timeout"' in received

    def test_whole_bodies_within_the_limit_are_served(self) -> None:
        with TestClient(echo_app(read_timeout=5.0)) as client:
            reply = client.post("/v1/chat/completions", json={"model": "echo", "messages": HELLO})
        assert reply.status_code == 200

    @pytest.mark.parametrize("value", [0, -1.0, float("nan")])
    def test_it_must_be_positive(self, value: float) -> None:
        with pytest.raises(ConfigurationError, match="read timeout"):
            echo_app(read_timeout=value)
