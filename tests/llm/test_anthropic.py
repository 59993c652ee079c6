"""`AnthropicModel`: its requests, whole responses, errors, signatures sent back verbatim."""

from __future__ import annotations

import json
from typing import Any

import pytest
from llm_replay import (
    API_KEY,
    HELLO,
    Recorder,
    chat_model,
    fixture_bytes,
    json_reply,
    replay_stream,
    sse,
    tokens,
)

from tidemill.errors import (
    AuthenticationError,
    ConfigurationError,
    ContextWindowExceeded,
    ProviderError,
    RateLimitError,
)
from tidemill.llm import AnthropicModel, ModelRequest, ModelSettings
from tidemill.types import ImageRef, Message, Reasoning, ToolCall, ToolDefinition, ToolResult, Usage

WEATHER = ToolDefinition(
    name="get_weather",
    description="Current weather.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
STOP = b'event: message_stop\ndata: {"type":"message_stop"}\n\n'


def conversation() -> ModelRequest:
    return ModelRequest(
        [
            Message.system("You are terse."),
            Message.user(
                "What is in this picture, and the weather there?",
                images=(ImageRef(url="https://example.com/cat.png"),),
            ),
            Message.assistant(
                "Let me check.",
                tool_calls=(
                    ToolCall(id="toolu_1", name="get_weather", arguments={"city": "Paris"}),
                ),
                reasoning=(
                    Reasoning(text="Looks like Paris.", signature="sig-1", provider="anthropic"),
                    Reasoning(redacted_data="opaque==", provider="anthropic"),
                ),
            ),
            Message.tool(ToolResult(call_id="toolu_1", name="get_weather", content="18C, sunny")),
            Message.user("Thanks!"),
        ],
        tools=[WEATHER],
        settings=ModelSettings(temperature=0.2, max_tokens=100, stop=["END"], seed=7),
    )


async def sent(request: ModelRequest, **options: Any) -> tuple[dict[str, Any], dict[str, str]]:
    recorder = Recorder([sse(STOP)])
    model = chat_model("anthropic", recorder, **options)
    [_ async for _ in model.stream(request)]
    await model.aclose()
    (http_request,) = recorder.requests
    return json.loads(http_request.content), dict(http_request.headers)


async def test_the_exact_anthropic_request() -> None:
    body, headers = await sent(conversation(), thinking_budget=50, betas=["b1", "b2"])
    assert body == {
        "model": "claude-test",
        "max_tokens": 100,
        "system": "You are terse.",
        "messages": [
            {
                "role": "user",
                "content": [
                    {
                        "type": "image",
                        "source": {"type": "url", "url": "https://example.com/cat.png"},
                    },
                    {"type": "text", "text": "What is in this picture, and the weather there?"},
                ],
            },
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "Looks like Paris.", "signature": "sig-1"},
                    {"type": "redacted_thinking", "data": "opaque=="},
                    {"type": "text", "text": "Let me check."},
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
                "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "18C, sunny"},
                    {"type": "text", "text": "Thanks!"},
                ],
            },
        ],
        "tools": [
            {
                "name": "get_weather",
                "description": "Current weather.",
                "input_schema": {
                    "type": "object",
                    "properties": {"city": {"type": "string"}},
                    "required": ["city"],
                },
            }
        ],
        "stream": True,
        "thinking": {"type": "enabled", "budget_tokens": 50},
        "temperature": 0.2,
        "stop_sequences": ["END"],
    }
    assert headers["x-api-key"] == API_KEY
    assert headers["anthropic-version"] == "2023-06-01"
    assert headers["anthropic-beta"] == "b1,b2"
    assert headers["accept"] == "text/event-stream"


async def test_parallel_results_merge_into_one_turn_and_errors_are_flagged() -> None:
    request = ModelRequest(
        [
            Message.user("Two things"),
            Message.assistant(
                tool_calls=(
                    ToolCall(id="a", name="f"),
                    ToolCall(id="b", name="g", raw_arguments="[1]"),
                )
            ),
            Message.tool(ToolResult(call_id="a", name="f", content="ok")),
            Message.tool(ToolResult(call_id="b", name="g", content="boom", is_error=True)),
        ]
    )
    body, _ = await sent(request)
    assert body["messages"][1:] == [
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "a", "name": "f", "input": {}},
                {"type": "tool_use", "id": "b", "name": "g", "input": {}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "a", "content": "ok"},
                {"type": "tool_result", "tool_use_id": "b", "content": "boom", "is_error": True},
            ],
        },
    ]
    assert "system" not in body and body["max_tokens"] == 8192


async def test_foreign_or_unsigned_reasoning_and_empty_turns_are_left_out() -> None:
    request = ModelRequest(
        [
            Message.user("q"),
            Message.assistant(
                "a",
                reasoning=(
                    Reasoning(text="deepseek thoughts", provider="deepseek"),
                    Reasoning(text="unsigned", provider="anthropic"),
                ),
            ),
            Message.assistant(""),
            Message.user("again"),
        ]
    )
    body, _ = await sent(request)
    assert body["messages"] == [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "a"},
        {"role": "user", "content": "again"},
    ]


async def test_a_data_url_image_is_sent_inline() -> None:
    image = ImageRef(url="data:image/jpeg;base64,/9j/4AAQ")
    body, _ = await sent(ModelRequest([Message.user("", images=(image,))]))
    assert body["messages"][0]["content"] == [
        {
            "type": "image",
            "source": {"type": "base64", "media_type": "image/jpeg", "data": "/9j/4AAQ"},
        }
    ]


async def test_thinking_signatures_go_back_verbatim() -> None:
    first = await replay_stream(
        "anthropic", [fixture_bytes("anthropic/thinking-tool-use-stream.sse")]
    )
    (reasoning,) = first.response.message.reasoning
    history = ModelRequest(
        [
            Message.user("Use the fixed_version tool."),
            first.response.message,
            Message.tool(
                ToolResult(
                    call_id="toolu_01825dXWLSoJwCst1qTsiWdb", name="fixed_version", content="1.0"
                )
            ),
        ]
    )
    body, _ = await sent(history)
    thinking, tool_use = body["messages"][1]["content"]
    assert thinking == {
        "type": "thinking",
        "thinking": reasoning.text,
        "signature": reasoning.signature,
    }
    assert thinking["signature"].startswith("EoQDCm0IDhgCKkCDzGs2kL2PgnDCZU")
    assert thinking["signature"].endswith("SBwUxgB")
    assert tool_use == {
        "type": "tool_use",
        "id": "toolu_01825dXWLSoJwCst1qTsiWdb",
        "name": "fixed_version",
        "input": {},
    }


async def test_redacted_thinking_goes_back_verbatim() -> None:
    first = await replay_stream(
        "anthropic", [fixture_bytes("anthropic/redacted-thinking-stream.sse")]
    )
    body, _ = await sent(
        ModelRequest([Message.user("x"), first.response.message, Message.user("y")])
    )
    blocks = body["messages"][1]["content"]
    assert [b["type"] for b in blocks] == ["redacted_thinking", "redacted_thinking", "text"]
    assert blocks[0]["data"].startswith("EqkECkYIBxgCKkA8AZ4noDfV5VcOJe")
    assert blocks[1]["data"].endswith("GAE=")


def test_thinking_budget_must_fit_under_max_tokens() -> None:
    with pytest.raises(ConfigurationError, match="below max_tokens"):
        AnthropicModel("claude-sonnet-4-5", api_key="k", thinking_budget=10_000)
    assert AnthropicModel(
        "claude-sonnet-4-5", api_key="k", thinking_budget=10_000, max_tokens=20_000
    )


def test_a_missing_key_names_anthropic_api_key() -> None:
    with pytest.raises(ConfigurationError, match="ANTHROPIC_API_KEY"):
        AnthropicModel("claude-sonnet-4-5")


# -- whole responses --------------------------------------------------------------------------


def usage(inp: int, out: int, **extra: int) -> dict[str, int]:
    return tokens(Usage(requests=1, input_tokens=inp, output_tokens=out, **extra))


async def test_recorded_whole_text_and_parallel_tools() -> None:
    replies = [
        json_reply(fixture_bytes("anthropic/text.json")),
        json_reply(fixture_bytes("anthropic/parallel-tool-use.json")),
    ]
    model = chat_model("anthropic", Recorder(replies))
    text = await model.request(HELLO)
    assert (text.message.content, text.finish_reason) == ("4200 + 42 = 4242", "stop")
    assert tokens(text.usage) == usage(17, 15)
    assert text.response_id == "msg_01EXuhhFC9buDpjCcznFPSDs"
    tools = await model.request(HELLO)
    assert tools.message.content == "I'll retrieve the secrets for both passwords you provided."
    assert [(c.id, c.arguments) for c in tools.message.tool_calls] == [
        ("toolu_01BUvqBj8Yb34pNAbCJJY1oc", {"password": "mellon"}),
        ("toolu_01VPuQJ1LonDBYXrr8pqPkqQ", {"password": "radiance"}),
    ]
    assert tools.finish_reason == "tool_calls" and tokens(tools.usage) == usage(416, 109)


async def test_recorded_whole_thinking() -> None:
    model = chat_model(
        "anthropic", Recorder([json_reply(fixture_bytes("anthropic/thinking.json"))])
    )
    response = await model.request(HELLO)
    (reasoning,) = response.message.reasoning
    assert response.message.content == "3"
    assert reasoning.text.startswith('I need to find all primes below 400 that contain "79"')
    assert reasoning.signature is not None and reasoning.signature.startswith(
        "EuURCkYICxgCKkALKYkU"
    )
    assert reasoning.provider == "anthropic"


async def test_cache_tokens_count_into_input() -> None:
    body = json.loads(fixture_bytes("anthropic/text.json"))
    body["usage"].update(
        input_tokens=10, cache_creation_input_tokens=200, cache_read_input_tokens=3000
    )
    response = await chat_model("anthropic", Recorder([json_reply(body)])).request(HELLO)
    assert tokens(response.usage) == usage(3210, 15, cache_read_tokens=3000, cache_write_tokens=200)


# -- errors ------------------------------------------------------------------------------------


async def test_recorded_404_on_a_stream_request() -> None:
    reply = json_reply(fixture_bytes("anthropic/error-404-not-found.json"), status=404)
    model = chat_model("anthropic", Recorder([reply]))
    with pytest.raises(ProviderError) as caught:
        [_ async for _ in model.stream(HELLO)]
    assert (caught.value.status_code, caught.value.code) == (404, "not_found_error")


@pytest.mark.parametrize(
    ("status", "error", "kind"),
    [
        (
            401,
            {"type": "authentication_error", "message": "invalid x-api-key"},
            AuthenticationError,
        ),
        (429, {"type": "rate_limit_error", "message": "slow down"}, RateLimitError),
        (
            400,
            {
                "type": "invalid_request_error",
                "message": "prompt is too long: 250000 tokens > 200000 maximum",
            },
            ContextWindowExceeded,
        ),
    ],
)
async def test_error_statuses(
    status: int, error: dict[str, str], kind: type[ProviderError]
) -> None:
    reply = json_reply({"type": "error", "error": error}, status=status)
    model = chat_model("anthropic", Recorder([reply]))
    with pytest.raises(kind) as caught:
        await model.request(HELLO)
    assert caught.value.provider == "anthropic" and API_KEY not in str(caught.value)


async def test_an_error_body_with_status_200() -> None:
    reply = json_reply({"type": "error", "error": {"type": "api_error", "message": "odd"}})
    with pytest.raises(ProviderError, match="odd"):
        await chat_model("anthropic", Recorder([reply])).request(HELLO)


@pytest.mark.parametrize(
    "body",
    [
        {"type": "message", "role": "assistant", "content": []},
        {"type": "message", "role": "assistant", "content": [], "stop_reason": None},
        {"id": "msg_1", "content": [], "usage": {"input_tokens": 3, "output_tokens": 0}},
    ],
)
async def test_an_empty_answer_with_no_stop_reason_is_a_provider_error(
    body: dict[str, Any],
) -> None:
    # Anthropic always says why a whole message stopped: without it, and without content,
    # the answer is broken, as the other vendors' empty bodies are.
    with pytest.raises(ProviderError, match="neither content nor a stop_reason") as caught:
        await chat_model("anthropic", Recorder([json_reply(body)])).request(HELLO)
    assert caught.value.status_code is None and caught.value.body is not None


async def test_an_empty_answer_that_says_why_it_stopped_is_an_answer() -> None:
    body = {"type": "message", "content": [], "stop_reason": "end_turn", "usage": {}}
    response = await chat_model("anthropic", Recorder([json_reply(body)])).request(HELLO)
    assert (response.message.content, response.finish_reason) == ("", "stop")
