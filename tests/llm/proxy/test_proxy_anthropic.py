"""`POST /v1/messages`: Anthropic's Messages API over the proxy's models, text only."""

from __future__ import annotations

import json

from starlette.testclient import TestClient

from tidemill.llm import ScriptedModel
from tidemill.llm.proxy import ModelRouter, create_app

HELLO = {"role": "user", "content": "Hello"}


def client(*replies: str, api_key: str | None = None) -> TestClient:
    router = ModelRouter(aliases={"echo": ScriptedModel(list(replies))}, allow_unlisted=False)
    return TestClient(create_app(router, api_key=api_key, access_log=False))


def test_a_message_is_answered_in_anthropic_s_shape() -> None:
    with client("Hi there!") as proxy:
        answer = proxy.post(
            "/v1/messages",
            json={"model": "echo", "max_tokens": 16, "system": [{"type": "text", "text": "x"}],
                  "messages": [HELLO]},
        )  # fmt: skip
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert (body["type"], body["role"], body["model"]) == ("message", "assistant", "echo")
    assert body["content"] == [{"type": "text", "text": "Hi there!"}]
    assert body["stop_reason"] == "end_turn" and set(body["usage"]) == {
        "input_tokens",
        "output_tokens",
    }


def test_a_stream_sends_anthropic_s_events_in_order() -> None:
    with client("Hi there!") as proxy:
        answer = proxy.post(
            "/v1/messages",
            json={"model": "echo", "max_tokens": 16, "messages": [HELLO], "stream": True},
        )
    assert answer.headers["content-type"].startswith("text/event-stream")
    events = [
        line.removeprefix("event: ")
        for line in answer.text.splitlines()
        if line.startswith("event: ")
    ]
    assert events[:2] == ["message_start", "content_block_start"]
    assert events[-3:] == ["content_block_stop", "message_delta", "message_stop"]
    data = [json.loads(line[6:]) for line in answer.text.splitlines() if line.startswith("data: ")]
    text = "".join(d["delta"]["text"] for d in data if d["type"] == "content_block_delta")
    assert text == "Hi there!"


def test_what_it_does_not_translate_is_refused_in_anthropic_s_error_shape() -> None:
    with client("x") as proxy:
        thinking = proxy.post(
            "/v1/messages",
            json={"model": "echo", "max_tokens": 8, "messages": [HELLO],
                  "thinking": {"type": "enabled", "budget_tokens": 1024}},
        )  # fmt: skip
        image = proxy.post(
            "/v1/messages",
            json={"model": "echo", "max_tokens": 8,
                  "messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}]},
        )  # fmt: skip
        unknown = proxy.post(
            "/v1/messages", json={"model": "nope", "max_tokens": 8, "messages": [HELLO]}
        )
        no_limit = proxy.post("/v1/messages", json={"model": "echo", "messages": [HELLO]})
    assert thinking.status_code == 400 and "'thinking'" in thinking.json()["error"]["message"]
    assert thinking.json()["type"] == "error"
    assert thinking.json()["error"]["type"] == "invalid_request_error"
    assert image.status_code == 400 and "image" in image.json()["error"]["message"]
    assert unknown.status_code == 404 and unknown.json()["error"]["type"] == "not_found_error"
    assert no_limit.status_code == 400


def test_the_proxy_key_may_come_as_x_api_key() -> None:
    body = {"model": "echo", "max_tokens": 8, "messages": [HELLO]}
    with client("a", "b", api_key="secret-key") as proxy:
        assert proxy.post("/v1/messages", json=body).status_code == 401
        assert (
            proxy.post("/v1/messages", json=body, headers={"x-api-key": "nope"}).status_code == 401
        )
        assert (
            proxy.post("/v1/messages", json=body, headers={"x-api-key": "secret-key"}).status_code
            == 200
        )
