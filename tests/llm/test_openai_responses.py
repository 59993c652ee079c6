"""`OpenAIResponsesModel`: its requests, reasoning items sent back, credentials."""

from __future__ import annotations

import pytest
from llm_replay import API_KEY, fixture_bytes
from replay_models import replay, responses_model, sent_body

from tidemill.errors import ConfigurationError
from tidemill.llm import ModelRequest, ModelSettings, OpenAIResponsesModel, resolve_model
from tidemill.types import ImageRef, Message, Reasoning, ToolCall, ToolDefinition, ToolResult

DONE = (
    b"event: response.completed\n"
    b'data: {"type": "response.completed", "response": {"id": "resp_x", "status": "completed",'
    b' "output": [], "usage": {"input_tokens": 1, "output_tokens": 1}}}\n\n'
)
WEATHER = ToolDefinition(
    name="get_weather",
    description="Current weather.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


def conversation() -> ModelRequest:
    return ModelRequest(
        [
            Message.system("You are terse."),
            Message.user(
                "What is in this picture, and the weather there?",
                images=(
                    ImageRef(url="https://example.com/cat.png", detail="low"),
                    ImageRef(url="data:image/jpeg;base64,/9j/4AAQ"),
                ),
            ),
            Message.assistant(
                "Let me check.",
                tool_calls=(
                    ToolCall(id="call_1", name="get_weather", arguments={"city": "Paris"}),
                    ToolCall(id="call_2", name="get_weather", raw_arguments='{"city": "Par'),
                ),
                reasoning=(
                    Reasoning(
                        text="First part.",
                        id="rs_1",
                        redacted_data="gAAAA-opaque",
                        provider="openai-responses",
                    ),
                    Reasoning(text="Second part.", id="rs_1", provider="openai-responses"),
                    Reasoning(id="rs_2", provider="openai-responses"),  # stored at OpenAI only
                    Reasoning(text="Claude's thinking", signature="sig", provider="anthropic"),
                ),
            ),
            Message.tool(ToolResult(call_id="call_1", name="get_weather", content="18C")),
            Message.tool(
                ToolResult(call_id="call_2", name="get_weather", content="bad JSON", is_error=True)
            ),
        ],
        tools=[WEATHER],
        settings=ModelSettings(temperature=0.2, top_p=0.9, max_tokens=100, stop=["END"], seed=7),
    )


async def test_the_exact_responses_request() -> None:
    body, http_request = await sent_body(
        responses_model, conversation(), DONE, reasoning_effort="high", reasoning_summary="auto"
    )
    assert body == {
        "model": "gpt-5",
        "input": [
            {"role": "system", "content": "You are terse."},
            {
                "role": "user",
                "content": [
                    {
                        "type": "input_text",
                        "text": "What is in this picture, and the weather there?",
                    },
                    {
                        "type": "input_image",
                        "image_url": "https://example.com/cat.png",
                        "detail": "low",
                    },
                    {
                        "type": "input_image",
                        "image_url": "data:image/jpeg;base64,/9j/4AAQ",
                        "detail": "auto",
                    },
                ],
            },
            {
                "type": "reasoning",
                "id": "rs_1",
                "summary": [
                    {"type": "summary_text", "text": "First part."},
                    {"type": "summary_text", "text": "Second part."},
                ],
                "encrypted_content": "gAAAA-opaque",
            },
            {"role": "assistant", "content": "Let me check."},
            {
                "type": "function_call",
                "call_id": "call_1",
                "name": "get_weather",
                "arguments": '{"city":"Paris"}',
            },
            {
                "type": "function_call",
                "call_id": "call_2",
                "name": "get_weather",
                "arguments": '{"city": "Par',
            },
            {"type": "function_call_output", "call_id": "call_1", "output": "18C"},
            {"type": "function_call_output", "call_id": "call_2", "output": "bad JSON"},
        ],
        "tools": [
            {
                "type": "function",
                "name": "get_weather",
                "parameters": {
                    "type": "object",
                    "properties": {"city": {"type": "string"}},
                    "required": ["city"],
                },
                "strict": False,
                "description": "Current weather.",
            }
        ],
        "stream": True,
        "store": False,
        "include": ["reasoning.encrypted_content"],
        "reasoning": {"effort": "high", "summary": "auto"},
        "temperature": 0.2,
        "top_p": 0.9,
        "max_output_tokens": 100,
    }
    assert str(http_request.url) == "https://api.openai.com/v1/responses"
    assert http_request.headers["authorization"] == f"Bearer {API_KEY}"
    assert http_request.headers["accept"] == "text/event-stream"


async def test_with_store_reasoning_is_referenced_by_id() -> None:
    body, _ = await sent_body(responses_model, conversation(), DONE, store=True)
    reasoning = [item for item in body["input"] if item.get("type") == "reasoning"]
    assert [item["id"] for item in reasoning] == ["rs_1", "rs_2"]
    assert reasoning[1] == {"type": "reasoning", "id": "rs_2", "summary": []}
    assert body["store"] is True and "include" not in body and "reasoning" not in body


async def test_recorded_reasoning_goes_back_as_input_items() -> None:
    first = await replay(
        responses_model,
        [fixture_bytes("openai-responses/reasoning-message-function-call-stream.sse")],
    )
    message = first.response.message
    (call,) = message.tool_calls
    (reasoning,) = message.reasoning
    request = ModelRequest(
        [
            Message.user("What is the capital of PotatoLand?"),
            message,
            Message.tool(ToolResult(call_id=call.id, name=call.name, content="Spudville")),
        ]
    )
    body, _ = await sent_body(responses_model, request, DONE)
    assert body["input"][1:] == [
        {
            "type": "reasoning",
            "id": reasoning.id,
            "summary": [],
            "encrypted_content": reasoning.redacted_data,
        },
        {"role": "assistant", "content": "I’ll check the capital lookup tool for “PotatoLand.”"},
        {
            "type": "function_call",
            "call_id": "call_LabG58Uhrq9kZvR52BYKjToD",
            "name": "get_capital",
            "arguments": '{"country":"PotatoLand"}',
        },
        {
            "type": "function_call_output",
            "call_id": "call_LabG58Uhrq9kZvR52BYKjToD",
            "output": "Spudville",
        },
    ]


async def test_a_whole_request_says_stream_false() -> None:
    from llm_replay import Recorder, json_reply

    recorder = Recorder([json_reply(fixture_bytes("openai-responses/text.json"))])
    model = responses_model(recorder, organization="org-1", project="proj-1")
    await model.request(ModelRequest([Message.user("4200 + 42?")]))
    (sent,) = recorder.requests
    assert sent.headers["openai-organization"] == "org-1"
    assert sent.headers["openai-project"] == "proj-1"
    assert recorder.bodies()[0]["stream"] is False


def test_the_key_and_base_url_are_openai_s(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    monkeypatch.setenv("OPENAI_BASE_URL", "https://gateway.example/v1/")
    model = resolve_model("openai-responses:gpt-5", reasoning_effort="low")
    assert isinstance(model, OpenAIResponsesModel)
    assert model.credentials.api_key == "sk-env"
    assert model.describe() == {
        "provider": "openai-responses",
        "model": "gpt-5",
        "base_url": "https://gateway.example/v1",
        "api": "responses",
        "store": False,
    }


def test_a_missing_key_names_the_variable() -> None:
    with pytest.raises(ConfigurationError, match="OPENAI_API_KEY"):
        OpenAIResponsesModel("gpt-5")
