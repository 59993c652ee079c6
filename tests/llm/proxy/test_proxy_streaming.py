"""Streams through the served proxy: keep-alives, disconnects, and what never leaks."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import AsyncGenerator, Sequence
from typing import Any

import httpx
import openai
import pytest
from llm_replay import API_KEY, ReplayServer, Reply, fixture_bytes
from proxy_serve import sdk, serve, upstream_router

from tidemill.llm import Model, ModelRequest, ScriptedModel
from tidemill.llm._model import ModelStreamEvent
from tidemill.llm.proxy import ModelRouter, create_app
from tidemill.types import Message, ModelResponse, ResponseDone, TextDelta

HELLO: list[Any] = [{"role": "user", "content": "Hello"}]


class SteppedModel(Model):
    """Streams `steps` of (seconds to wait, text), then finishes; records when it is closed."""

    provider = "stepped"

    def __init__(self, steps: Sequence[tuple[float, str]], *, forever: bool = False) -> None:
        self.steps = list(steps)
        self.forever = forever
        self.closed = threading.Event()

    async def request(self, request: ModelRequest) -> ModelResponse:
        raise AssertionError("only streamed in these tests")

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelStreamEvent, None]:
        try:
            text = ""
            while True:
                for delay, piece in self.steps:
                    await asyncio.sleep(delay)
                    text += piece
                    yield TextDelta(delta=piece)
                if not self.forever:
                    break
            yield ResponseDone(response=ModelResponse(message=Message.assistant(text)))
        finally:
            self.closed.set()


def raw_stream(url: str, model: str) -> list[bytes]:
    """Every line of a streamed answer, comments included."""
    body = {"model": model, "messages": HELLO, "stream": True}
    with httpx.stream("POST", f"{url}/v1/chat/completions", json=body, timeout=10) as answer:
        assert answer.status_code == 200
        assert answer.headers["content-type"].startswith("text/event-stream")
        return [line.encode() for line in answer.iter_lines() if line]


def test_keep_alives_flow_while_the_upstream_is_silent_before_its_first_event() -> None:
    async def slow(request: ModelRequest) -> str:
        await asyncio.sleep(0.6)
        return "Finally."

    app = create_app(ModelRouter(aliases={"slow": ScriptedModel(handler=slow)}), keepalive=0.1)
    with serve(app) as url:
        lines = raw_stream(url, "slow")
        chunks = list(sdk(url).chat.completions.create(model="slow", messages=HELLO, stream=True))
    first_text = next(i for i, line in enumerate(lines) if b'"content":"Finally."' in line)
    assert lines[0].startswith(b"data: ") and b'"role":"assistant"' in lines[0]
    assert lines[1:first_text].count(b": keep-alive") >= 2
    assert lines[-1] == b"data: [DONE]"
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == "Finally."


def test_keep_alives_flow_while_the_upstream_is_silent_mid_stream() -> None:
    model = SteppedModel([(0.0, "Hello"), (0.45, " world")])
    app = create_app(ModelRouter(aliases={"stepped": model}), keepalive=0.1)
    with serve(app) as url:
        lines = raw_stream(url, "stepped")
    hello = next(i for i, line in enumerate(lines) if b'"content":"Hello"' in line)
    world = next(i for i, line in enumerate(lines) if b'"content":" world"' in line)
    assert hello == 1  # the first event starts the response at once, after the role chunk
    assert lines[hello + 1 : world].count(b": keep-alive") >= 2
    assert model.closed.is_set()


def test_a_busy_stream_sends_no_keep_alives() -> None:
    model = SteppedModel([(0.01, "x")] * 20)
    app = create_app(ModelRouter(aliases={"stepped": model}), keepalive=0.1)
    with serve(app) as url:
        lines = raw_stream(url, "stepped")
    assert b": keep-alive" not in lines


def test_a_client_that_disconnects_closes_the_upstream_stream() -> None:
    model = SteppedModel([(0.02, "tick ")], forever=True)
    app = create_app(ModelRouter(aliases={"forever": model}), keepalive=5.0)
    with serve(app) as url:
        stream = sdk(url).chat.completions.create(model="forever", messages=HELLO, stream=True)
        for index, _ in enumerate(stream):
            if index == 3:
                break
        stream.close()
        assert model.closed.wait(5), "the upstream stream was not closed"


def test_an_unexpected_failure_is_a_500_that_names_no_internals() -> None:
    def broken(request: ModelRequest) -> str:
        raise RuntimeError(f"database password is {API_KEY}")

    app = create_app(ModelRouter(aliases={"broken": ScriptedModel(handler=broken)}))
    with serve(app) as url:
        with pytest.raises(openai.InternalServerError) as caught:
            sdk(url).chat.completions.create(model="broken", messages=HELLO)
        answer = httpx.post(
            f"{url}/v1/chat/completions",
            json={"model": "broken", "messages": HELLO, "stream": True},
        )
    assert caught.value.status_code == 500
    assert "database" not in caught.value.response.text
    assert answer.status_code == 500
    assert answer.json()["error"]["code"] == "internal_error"


def test_unknown_paths_and_methods_answer_in_openai_shape() -> None:
    with serve(create_app()) as url:
        missing = httpx.post(f"{url}/v1/completions", json={})
        wrong = httpx.get(f"{url}/v1/chat/completions")
        health = httpx.get(f"{url}/health")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "unknown_url"
    assert wrong.status_code == 405 and wrong.json()["error"]["code"] == "method_not_allowed"
    assert health.json() == {"status": "ok"}


def test_a_body_over_the_limit_is_a_413() -> None:
    with serve(create_app(max_body_bytes=1000)) as url:
        answer = httpx.post(
            f"{url}/v1/chat/completions",
            json={"model": "openai:gpt-4o", "messages": [{"role": "user", "content": "x" * 2000}]},
        )
    assert answer.status_code == 413
    assert answer.json()["error"]["code"] == "request_too_large"


def test_api_keys_never_appear_in_any_response_body(server: ReplayServer) -> None:
    echo = f"Incorrect API key provided: {API_KEY}"
    error = {"error": {"message": echo, "type": "invalid_request_error", "code": "invalid_api_key"}}
    in_stream = (
        b'data: {"choices":[{"index":0,"delta":{"content":"Hi"}}]}\n\n'
        b"data: " + json.dumps({"error": {"message": echo}}).encode() + b"\n\n"
    )
    for status in (400, 401, 403, 404, 429, 500):
        server.replies.append(
            Reply(json.dumps(error).encode(), status=status, content_type="application/json")
        )
    server.replies.append(Reply(in_stream))
    server.replies.append(Reply(fixture_bytes("openai-chat/text-stream.sse")))
    requests: list[dict[str, Any]] = [
        {"model": "openai:gpt-4o", "messages": HELLO} for _ in range(6)
    ]
    requests += [
        {"model": "openai:gpt-4o", "messages": HELLO, "stream": True},
        {"model": "openai:gpt-4o", "messages": HELLO, "stream": True},
        {"model": f"openai:{API_KEY}", "messages": HELLO},  # an upstream error echoes the model
        {"model": API_KEY, "messages": HELLO},
        {"model": "openai:gpt-4o", "messages": [{"role": API_KEY}]},
    ]
    server.replies.append(
        Reply(json.dumps(error).encode(), status=404, content_type="application/json")
    )
    bodies: list[bytes] = []
    with serve(create_app(upstream_router(server))) as url:
        for body in requests:
            answer = httpx.post(f"{url}/v1/chat/completions", json=body, timeout=10)
            bodies.append(answer.content)
    assert len(bodies) == len(requests)
    assert [b[:9] for b in bodies[6:8]] == [b'data: {"i'] * 2
    for body in bodies:
        assert API_KEY.encode() not in body, body
        assert b"SECRET" not in body, body


def test_the_lifespan_closes_the_models_the_router_built(server: ReplayServer) -> None:
    from starlette.testclient import TestClient

    router = upstream_router(server)
    with TestClient(create_app(router)):
        model = router.resolve("openai:gpt-4o")
        client = router._client
    assert client is not None and client.is_closed
    assert router.resolve("openai:gpt-4o") is not model


def test_many_concurrent_streams_share_the_proxy(server: ReplayServer) -> None:
    body = fixture_bytes("openai-chat/text-stream.sse")
    for _ in range(8):
        server.replies.append(Reply(body))
    with serve(create_app(upstream_router(server))) as url:

        async def one(client: openai.AsyncOpenAI) -> str:
            stream = await client.chat.completions.create(
                model="openai:gpt-4o", messages=HELLO, stream=True
            )
            return "".join([c.choices[0].delta.content or "" async for c in stream])

        async def all_of_them() -> list[str]:
            client = openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0)
            async with client:
                return await asyncio.gather(*(one(client) for _ in range(8)))

        started = time.monotonic()
        texts = asyncio.run(all_of_them())
    assert texts == ["4200 + 42 equals 4242."] * 8
    assert time.monotonic() - started < 10
