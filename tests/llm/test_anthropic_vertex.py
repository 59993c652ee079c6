"""`AnthropicVertexModel`: Claude on Vertex AI, the Anthropic body and parsers at rawPredict.

There is no recording of Claude-on-Vertex traffic in a permissively
licensed source, so the replies used here are HAND-MADE FROM DOCUMENTATION
(`fixtures/providers/handmade/anthropic-vertex-*`, listed under "Hand-made
from documentation" in MANIFEST.md). They check URL, header and body
handling, not Vertex AI's real behaviour.
"""

from __future__ import annotations

import pytest
from llm_replay import HELLO, Recorder, ReplayServer, Reply, fixture_bytes, json_reply, stream_all
from replay_models import TOKEN, anthropic_vertex_model, replay, sent_body

from tidemill.errors import AuthenticationError, ConfigurationError, ProviderError
from tidemill.llm import (
    AnthropicVertexModel,
    ModelRequest,
    ModelSettings,
    RetryPolicy,
    resolve_model,
)
from tidemill.llm.anthropic._adapter import build_messages_request
from tidemill.types import Message, Reasoning, ToolCall, ToolResult

STREAM = "handmade/anthropic-vertex-tool-use-stream.sse"  # hand-made, not a recording
NOT_FOUND = "handmade/anthropic-vertex-error-404.json"  # hand-made, not a recording


def conversation() -> ModelRequest:
    return ModelRequest(
        [
            Message.system("You are terse."),
            Message.user("Weather in Paris?"),
            Message.assistant(
                tool_calls=(
                    ToolCall(id="toolu_1", name="get_weather", arguments={"city": "Paris"}),
                ),
                reasoning=(Reasoning(text="Paris.", signature="sig-1", provider="anthropic"),),
            ),
            Message.tool(ToolResult(call_id="toolu_1", name="get_weather", content="18C")),
        ],
        settings=ModelSettings(max_tokens=300, temperature=0.5),
    )


async def test_the_url_headers_and_body() -> None:
    body, http_request = await sent_body(
        anthropic_vertex_model, conversation(), fixture_bytes(STREAM), betas=["b1"]
    )
    assert str(http_request.url) == (
        "https://us-east5-aiplatform.googleapis.com/v1/projects/acme/locations/us-east5/"
        "publishers/anthropic/models/claude-sonnet-4-5@20250929:streamRawPredict"
    )
    assert http_request.headers["authorization"] == f"Bearer {TOKEN}"
    assert http_request.headers["anthropic-beta"] == "b1"
    assert (
        "x-api-key" not in http_request.headers and "anthropic-version" not in http_request.headers
    )
    assert body == {
        "anthropic_version": "vertex-2023-10-16",
        "max_tokens": 300,
        "system": "You are terse.",
        "messages": [
            {"role": "user", "content": "Weather in Paris?"},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "Paris.", "signature": "sig-1"},
                    {
                        "type": "tool_use",
                        "id": "toolu_1",
                        "name": "get_weather",
                        "input": {"city": "Paris"},
                    },
                ],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "18C"}],
            },
        ],
        "stream": True,
        "temperature": 0.5,
    }
    # Everything but the model and the version is the Anthropic adapter's own body.
    anthropic = dict(
        build_messages_request("claude-sonnet-4-5@20250929", conversation(), stream=True)
    )
    assert {k: v for k, v in anthropic.items() if k != "model"} == {
        k: v for k, v in body.items() if k != "anthropic_version"
    }


async def test_the_handmade_stream_parses_with_the_anthropic_parser() -> None:
    streamed = await replay(anthropic_vertex_model, [fixture_bytes(STREAM)])
    response = streamed.response
    assert response.message.content == "Let me check the weather."
    (call,) = response.message.tool_calls
    assert (call.id, call.name, call.arguments) == (
        "toolu_vrtx_handmade01",
        "get_weather",
        {"city": "Paris"},
    )
    assert response.finish_reason == "tool_calls" and response.provider == "anthropic-vertex"
    assert (response.usage.input_tokens, response.usage.output_tokens) == (412, 58)


async def test_a_whole_call_goes_to_raw_predict_over_a_real_server(server: ReplayServer) -> None:
    whole = {
        "id": "msg_vrtx_handmade02",  # hand-made from documentation
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5-20250929",
        "content": [{"type": "text", "text": "Hi."}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 8, "output_tokens": 3},
    }
    import json

    server.replies.append(Reply(json.dumps(whole).encode(), content_type="application/json"))
    model = AnthropicVertexModel(
        "claude-haiku-4-5@20251001",
        project="p",
        location="global",
        access_token=TOKEN,
        base_url=server.url,
    )
    try:
        response = await model.request(HELLO)
    finally:
        await model.aclose()
    assert response.message.content == "Hi."
    (seen,) = server.seen
    assert seen.path == (
        "/v1/projects/p/locations/global/publishers/anthropic/models/"
        "claude-haiku-4-5@20251001:rawPredict"
    )
    assert "model" not in seen.body and seen.body["anthropic_version"] == "vertex-2023-10-16"
    assert seen.body["stream"] is False


async def test_a_vertex_404_over_a_real_server(server: ReplayServer) -> None:
    server.replies.append(
        Reply(fixture_bytes(NOT_FOUND), status=404, content_type="application/json")
    )
    model = AnthropicVertexModel(
        "claude-nope@20990101",
        project="acme",
        location="us-east5",
        access_token=TOKEN,
        base_url=server.url,
        retry=RetryPolicy(max_retries=0),
    )
    try:
        with pytest.raises(ProviderError, match="not found") as caught:
            await stream_all(model)
    finally:
        await model.aclose()
    assert caught.value.status_code == 404 and TOKEN not in str(caught.value)


async def test_an_expired_token() -> None:
    body = {
        "error": {
            "code": 401,
            "message": "Request had invalid authentication credentials.",
            "status": "UNAUTHENTICATED",
        }
    }
    model = anthropic_vertex_model(Recorder([json_reply(body, status=401)]))
    with pytest.raises(AuthenticationError) as caught:
        await model.request(HELLO)
    assert "gcloud auth print-access-token" in str(caught.value)


def test_the_spec_and_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "env-p")
    monkeypatch.setenv("GOOGLE_OAUTH_ACCESS_TOKEN", "ya29.env")
    model = resolve_model("anthropic-vertex:claude-sonnet-4-5@20250929", thinking_budget=2048)
    assert isinstance(model, AnthropicVertexModel)
    assert (model.project, model.location, model.thinking_budget) == ("env-p", "global", 2048)
    assert model.describe()["api"] == "messages"
    with pytest.raises(ConfigurationError, match="thinking budget"):
        AnthropicVertexModel("claude-3-haiku@20240307", thinking_budget=5000)
