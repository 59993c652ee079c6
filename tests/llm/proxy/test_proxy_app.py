"""The chat handler called as a plain ASGI app: request reading, errors, and the stream's task."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncGenerator
from typing import Any

import pytest

from tidemill.llm import ModelRequest, ScriptedModel
from tidemill.llm._model import ModelStreamEvent
from tidemill.llm.proxy import EventStreamResponse, ModelRouter, create_app
from tidemill.types import Message, ModelResponse, ResponseDone, TextDelta

HELLO = [{"role": "user", "content": "Hello"}]
KEY = [(b"authorization", b"Bearer proxy-key")]


async def call(
    app: Any,
    body: bytes | list[bytes],
    *,
    path: str = "/v1/chat/completions",
    method: str = "POST",
    headers: list[tuple[bytes, bytes]] | None = None,
    root_path: str = "",
    disconnect: bool = False,
) -> list[dict[str, Any]]:
    """Call `app` with one request; return every message it sent.

    With `disconnect`, every part of the body says more follows, and the client leaves instead.
    """
    parts = body if isinstance(body, list) else [body]
    inbox: list[dict[str, Any]] = [
        {"type": "http.request", "body": part, "more_body": disconnect or i < len(parts) - 1}
        for i, part in enumerate(parts)
    ]
    if disconnect:
        inbox.append({"type": "http.disconnect"})
    sent: list[dict[str, Any]] = []
    finished = asyncio.Event()

    async def receive() -> dict[str, Any]:
        if inbox:
            return inbox.pop(0)
        await finished.wait()  # the client stays until the response is complete
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)
        if message["type"] == "http.response.body" and not message.get("more_body", False):
            finished.set()

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": root_path + path,
        "raw_path": (root_path + path).encode(),
        "root_path": root_path,
        "query_string": b"",
        "headers": headers if headers is not None else [(b"content-type", b"application/json")],
        "client": ("127.0.0.1", 5000),
        "server": ("127.0.0.1", 4000),
    }
    await app(scope, receive, send)
    return sent


def answer(sent: list[dict[str, Any]]) -> tuple[int, bytes]:
    assert sent[0]["type"] == "http.response.start"
    return sent[0]["status"], b"".join(m.get("body", b"") for m in sent[1:])


def request(**fields: Any) -> bytes:
    return json.dumps({"model": "echo", "messages": HELLO, **fields}).encode()


def echo_app(**options: Any) -> Any:
    return create_app(ModelRouter(aliases={"echo": ScriptedModel(["Hi!"])}), **options)


async def test_a_chat_request_is_answered_whole_and_streamed() -> None:
    status, body = answer(await call(echo_app(), request()))
    assert status == 200
    assert json.loads(body)["choices"][0]["message"]["content"] == "Hi!"

    status, body = answer(await call(echo_app(), request(stream=True)))
    assert status == 200
    assert b'"content":"Hi!"' in body and body.endswith(b"data: [DONE]\n\n")


async def test_a_body_in_several_messages_is_joined() -> None:
    whole = request()
    status, body = answer(await call(echo_app(), [whole[:5], b"", whole[5:20], whole[20:]]))
    assert status == 200
    assert json.loads(body)["choices"][0]["message"]["content"] == "Hi!"


@pytest.mark.parametrize(
    ("body", "headers", "status", "code", "param"),
    [
        (b"{not json", None, 400, "invalid_json", None),
        (b"[1, 2]", None, 400, "invalid_body", None),
        (json.dumps({"messages": HELLO}).encode(), None, 400, None, "model"),
        (request(model="nope:such-model"), None, 404, "model_not_found", "model"),
        (request(model="ech"), None, 404, "model_not_found", "model"),
        (request(n=2), None, 400, None, "n"),
        (request(), [(b"authorization", b"Bearer wrong")], 401, "invalid_api_key", None),
        (request(), [(b"authorization", b"Basic proxy-key")], 401, "invalid_api_key", None),
        (request(), [], 401, "invalid_api_key", None),
        (request(), [*KEY, (b"content-length", b"999999")], 413, "request_too_large", None),
    ],
)
async def test_bad_requests_get_typed_openai_errors(
    body: bytes,
    headers: list[tuple[bytes, bytes]] | None,
    status: int,
    code: str | None,
    param: str | None,
) -> None:
    app = echo_app(api_key="proxy-key", max_body_bytes=1000)
    sent = await call(app, body, headers=KEY if headers is None else headers)
    got, raw = answer(sent)
    error = json.loads(raw)["error"]
    assert (got, error["code"], error["param"]) == (status, code, param)
    assert error["type"] in ("invalid_request_error", "authentication_error")
    assert (b"content-type", b"application/json") in sent[0]["headers"]


async def test_a_body_larger_than_the_limit_without_a_length_is_a_413() -> None:
    sent = await call(echo_app(max_body_bytes=1000), [b"x" * 600, b"x" * 600])
    status, raw = answer(sent)
    assert status == 413 and json.loads(raw)["error"]["code"] == "request_too_large"


async def test_a_client_that_leaves_before_its_body_ends_gets_nothing_and_logs_no_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    partial = request()[:10]
    with caplog.at_level(logging.INFO, logger="tidemill.llm.proxy"):
        sent = await call(echo_app(), [partial, partial], disconnect=True)
    assert sent == []
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


async def test_other_methods_and_paths_still_go_through_starlette() -> None:
    status, raw = answer(await call(echo_app(), b"", method="GET"))
    assert status == 405 and json.loads(raw)["error"]["code"] == "method_not_allowed"
    status, raw = answer(await call(echo_app(), b"", path="/v1/chat/completions/x"))
    assert status == 404 and json.loads(raw)["error"]["code"] == "unknown_url"


async def test_a_chat_path_under_a_root_path_is_served() -> None:
    status, body = answer(await call(echo_app(), request(), root_path="/api"))
    assert status == 200
    assert json.loads(body)["choices"][0]["message"]["content"] == "Hi!"


async def test_the_stream_is_served_in_the_task_that_called_the_response() -> None:
    # So the upstream request goes out without waiting for a turn of the event loop.
    seen: list[asyncio.Task[Any] | None] = []

    class Recording(ScriptedModel):
        async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelStreamEvent, None]:
            seen.append(asyncio.current_task())
            yield TextDelta(delta="Hi")
            yield ResponseDone(response=ModelResponse(message=Message.assistant("Hi")))

    app = create_app(ModelRouter(aliases={"echo": Recording()}))
    task = asyncio.create_task(call(app, request(stream=True)))
    status, body = answer(await task)
    assert status == 200 and body.endswith(b"data: [DONE]\n\n")
    assert seen == [task]


async def test_a_response_whose_client_left_ends_quietly_and_closes_its_frames() -> None:
    closed = asyncio.Event()

    async def frames() -> AsyncGenerator[tuple[bytes, bool], None]:
        try:
            yield b"data: 1\n\n", False
            await asyncio.sleep(30)
            yield b"data: [DONE]\n\n", True
        finally:
            closed.set()

    inbox = asyncio.Queue[dict[str, Any]]()
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)
        if len(sent) == 2:  # the first frame went out: the client leaves
            inbox.put_nowait({"type": "http.disconnect"})

    response = EventStreamResponse(frames(), keepalive=5.0)
    await asyncio.wait_for(response({"type": "http"}, inbox.get, send), 5)
    assert closed.is_set()
    assert [m["type"] for m in sent] == ["http.response.start", "http.response.body"]
    assert not asyncio.current_task().cancelling()  # type: ignore[union-attr]


async def test_a_request_with_a_lone_surrogate_escape_is_answered() -> None:
    """Decoded as it is, the text could be neither sent on nor written back as UTF-8."""
    echo = ScriptedModel(handler=lambda r: f"you said {r.messages[-1].content}")
    app = create_app(ModelRouter(aliases={"echo": echo}))
    body = b'{"model": "echo", "messages": [{"role": "user", "content": "hi\\ud83d"}]}'
    status, reply = answer(await call(app, body))
    assert status == 200, reply
    assert json.loads(reply)["choices"][0]["message"]["content"] == "you said hi\ufffd"
    status, reply = answer(await call(app, body[:-1] + b', "stream": true}'))
    assert status == 200, reply
    assert '"content":" hi\ufffd"' in reply.decode("utf-8")
