"""`OpenAIChatModel`: the request it sends, whole responses, errors, and each vendor's quirks."""

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
    sse,
    summary,
    tokens,
)

from tidemill.errors import (
    AuthenticationError,
    ConfigurationError,
    ContextWindowExceeded,
    MalformedToolCall,
    ProviderError,
)
from tidemill.llm import ModelRequest, ModelSettings, OpenAIChatModel
from tidemill.llm.openai._dialects import mistral_call_id
from tidemill.types import (
    ImageRef,
    Message,
    Reasoning,
    ResponseDone,
    ToolCall,
    ToolDefinition,
    ToolResult,
    Usage,
)

WEATHER = ToolDefinition(
    name="get_weather",
    description="Current weather.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


def conversation(reasoning_provider: str = "openai", *, image: bool = True) -> ModelRequest:
    """A system prompt, an image, a tool call with reasoning, its result, and a follow-up."""
    return ModelRequest(
        [
            Message.system("You are terse."),
            Message.user(
                "What is in this picture, and the weather there?",
                images=(ImageRef(url="https://example.com/cat.png", detail="low"),)
                if image
                else (),
            ),
            Message.assistant(
                "Let me check.",
                tool_calls=(
                    ToolCall(id="call_1", name="get_weather", arguments={"city": "Paris"}),
                ),
                reasoning=(Reasoning(text="Looks like Paris.", provider=reasoning_provider),),
            ),
            Message.tool(ToolResult(call_id="call_1", name="get_weather", content="18C, sunny")),
            Message.user("Thanks!"),
        ],
        tools=[WEATHER],
        settings=ModelSettings(temperature=0.2, max_tokens=100, stop=["END"], seed=7),
    )


async def sent_body(provider: str, request: ModelRequest, **options: Any) -> dict[str, Any]:
    recorder = Recorder([sse(b'data: {"choices":[],"usage":{}}\n\ndata: [DONE]\n\n')])
    model = chat_model(provider, recorder, **options)
    [_ async for _ in model.stream(request)]
    await model.aclose()
    (body,) = recorder.bodies()
    assert isinstance(body, dict)
    return body


async def test_the_exact_openai_request() -> None:
    assert await sent_body("openai", conversation()) == {
        "model": "model-test",
        "messages": [
            {"role": "system", "content": "You are terse."},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "What is in this picture, and the weather there?"},
                    {
                        "type": "image_url",
                        "image_url": {"url": "https://example.com/cat.png", "detail": "low"},
                    },
                ],
            },
            {
                "role": "assistant",
                "content": "Let me check.",
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "18C, sunny"},
            {"role": "user", "content": "Thanks!"},
        ],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "get_weather",
                    "description": "Current weather.",
                    "parameters": {
                        "type": "object",
                        "properties": {"city": {"type": "string"}},
                        "required": ["city"],
                    },
                },
            }
        ],
        "stream": True,
        "stream_options": {"include_usage": True},
        "temperature": 0.2,
        "max_completion_tokens": 100,
        "stop": ["END"],
        "seed": 7,
    }


async def test_deepseek_sends_its_reasoning_back_and_plain_max_tokens() -> None:
    body = await sent_body("deepseek", conversation("deepseek", image=False))  # text only
    assistant = body["messages"][2]
    assert assistant == {
        "role": "assistant",
        "content": "Let me check.",
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
            }
        ],
        "reasoning_content": "Looks like Paris.",
    }
    assert body["max_tokens"] == 100 and "max_completion_tokens" not in body
    # Reasoning from another provider is not DeepSeek's to receive.
    other = await sent_body("deepseek", conversation("anthropic", image=False))
    assert "reasoning_content" not in other["messages"][2]


async def test_mistral_gets_nine_character_ids_and_no_stream_options() -> None:
    body = await sent_body("mistral", conversation())
    short = mistral_call_id("call_1")
    assert len(short) == 9 and short.isalnum()
    assert body["messages"][2]["tool_calls"][0]["id"] == short
    assert body["messages"][3] == {"role": "tool", "tool_call_id": short, "content": "18C, sunny"}
    assert "stream_options" not in body and body["max_tokens"] == 100


@pytest.mark.parametrize(
    ("provider", "url", "words"),
    [
        ("deepseek", "data:image/png;base64,iVBORw0KGgo=", "takes text only"),
        ("ollama", "https://example.com/cat.png", "cannot fetch the image"),
    ],
)
async def test_an_image_the_vendor_cannot_take_is_refused_before_sending(
    provider: str, url: str, words: str
) -> None:
    recorder = Recorder([])  # any request would fail: none may be sent
    model = chat_model(provider, recorder)
    request = ModelRequest([Message.user("What is this?", images=(ImageRef(url=url),))])
    with pytest.raises(ConfigurationError, match=words) as info:
        await model.request(request)
    assert info.value.hint
    assert recorder.requests == []


async def test_ollama_takes_an_inline_image() -> None:
    inline = ImageRef(url="data:image/png;base64,iVBORw0KGgo=")
    body = await sent_body(
        "ollama", ModelRequest([Message.user("What is this?", images=(inline,))])
    )
    assert body["messages"][0]["content"][1] == {
        "type": "image_url",
        "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="},
    }


async def test_openai_never_receives_reasoning_and_sends_null_content_for_pure_tool_turns() -> None:
    request = ModelRequest(
        [
            Message.user("go"),
            Message.assistant(
                tool_calls=(ToolCall(id="c", name="f", raw_arguments="{broken"),),
                reasoning=(Reasoning(text="secret", signature="sig", provider="openai"),),
            ),
        ]
    )
    body = await sent_body("openai", request)
    assert body["messages"][1] == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{broken"}}
        ],
    }


async def test_headers_and_endpoint() -> None:
    recorder = Recorder([json_reply(fixture_bytes("openai-chat/text.json"))])
    model = chat_model(
        "openai",
        recorder,
        organization="org-1",
        project="proj-1",
        headers={"X-Title": "tidemill-tests"},
        reasoning_effort="low",
    )
    await model.request(HELLO)
    (request,) = recorder.requests
    assert str(request.url) == "https://api.openai.com/v1/chat/completions"
    assert request.headers["authorization"] == f"Bearer {API_KEY}"
    assert request.headers["openai-organization"] == "org-1"
    assert request.headers["openai-project"] == "proj-1"
    assert request.headers["x-title"] == "tidemill-tests"
    assert request.headers["content-type"] == "application/json"
    assert request.headers["user-agent"].startswith("tidemill/")
    assert json.loads(request.content) == {
        "model": "model-test",
        "messages": [{"role": "user", "content": "Hello"}],
        "stream": False,
        "reasoning_effort": "low",
    }


@pytest.mark.parametrize(
    ("provider", "url"),
    [
        ("mistral", "https://api.mistral.ai/v1/chat/completions"),
        ("deepseek", "https://api.deepseek.com/chat/completions"),
        ("groq", "https://api.groq.com/openai/v1/chat/completions"),
        ("together", "https://api.together.xyz/v1/chat/completions"),
        ("openrouter", "https://openrouter.ai/api/v1/chat/completions"),
        ("ollama", "http://localhost:11434/v1/chat/completions"),
        ("vllm", "http://localhost:8000/v1/chat/completions"),
        ("openai-compatible", "https://llm.example.invalid/v1/chat/completions"),
    ],
)
async def test_each_vendor_has_its_base_url(provider: str, url: str) -> None:
    recorder = Recorder([json_reply(fixture_bytes("openai-chat/text.json"))])
    model = chat_model(provider, recorder)
    response = await model.request(HELLO)
    assert str(recorder.requests[0].url) == url
    assert response.provider == provider


def test_settings_defaults_are_overlaid_by_the_request() -> None:
    model = OpenAIChatModel(
        "gpt-4o", api_key="k", settings=ModelSettings(temperature=1.0, top_p=0.5)
    )
    request = ModelRequest([Message.user("x")], settings=ModelSettings(temperature=0.0))
    body = model.build_call(request, stream=False).body
    assert (body["temperature"], body["top_p"]) == (0.0, 0.5)


def test_an_unknown_vendor_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="not an OpenAI-compatible provider"):
        OpenAIChatModel("x", provider="gemini", api_key="k")


def test_repr_and_describe_never_show_the_key() -> None:
    model = OpenAIChatModel("gpt-4o", api_key=API_KEY)
    assert API_KEY not in repr(model.credentials) + json.dumps(model.describe())
    assert model.describe() == {
        "provider": "openai",
        "model": "gpt-4o",
        "base_url": "https://api.openai.com/v1",
        "api": "chat.completions",
    }


# -- whole responses --------------------------------------------------------------------------


def usage(inp: int, out: int, **extra: int) -> dict[str, int]:
    return tokens(Usage(requests=1, input_tokens=inp, output_tokens=out, **extra))


WHOLE = [
    ("openai", "openai-chat/text.json", "\\(4200 + 42 = 4242\\).", [], usage(16, 12), "stop"),
    (
        "openai",
        "openai-chat/parallel-tool-calls.json",
        "",
        [
            ("call_v6LacIrChvs6ITVpIZqy5tFc", "secret_retrieval_tool", {"password": "mellon"}),
            ("call_onyWzk4mLTGKzW9cthmf4Llq", "secret_retrieval_tool", {"password": "radiance"}),
        ],
        usage(75, 53),
        "tool_calls",
    ),
    ("mistral", "mistral/text.json", None, [], usage(4, 36), "stop"),
    (
        "mistral",
        "mistral/tool-call.json",
        "",
        [("FI5qQGzDE", "get_image", {})],
        usage(65, 16),
        "tool_calls",
    ),
    (
        "together",
        "together/text.json",
        "To find the answer, add 4200 and 42.\n\n4200 + 42 = 4242",
        [],
        usage(44, 23),
        "stop",
    ),
    ("ollama", "ollama/text.json", "4200 + 42 = 4242\n", [], usage(21, 16), "stop"),
    (
        "ollama",
        "ollama/structured-output.json",
        '{ "city": "Paris", "country": "France" }',
        [],
        usage(136, 15),
        "stop",
    ),
    (
        "ollama",
        "ollama/tool-call.json",
        "",
        [("call_o2vnpxrw", "final_result", {"city": "Paris", "country": "France"})],
        usage(206, 194),
        "tool_calls",
    ),
    (
        "deepseek",
        "deepseek/reasoning-parallel-tool-calls.json",
        "Let me get your name and roll the die!",
        [
            ("call_00_6edlnw3Z1MgeMfey687g8451", "get_player_name", {}),
            ("call_01_km02sac7sHxNDPATKLZy7705", "roll_dice", {}),
        ],
        usage(875, 79, reasoning_tokens=26),
        "tool_calls",
    ),
    (
        "openrouter",
        "openrouter/tool-call.json",
        "",
        [("3sniiMddS", "divide", {"numerator": 123, "denominator": 456, "on_inf": "infinity"})],
        usage(134, 43),
        "tool_calls",
    ),
]


@pytest.mark.parametrize(("provider", "file", "text", "calls", "usage_", "finish"), WHOLE)
async def test_recorded_whole_response(
    provider: str,
    file: str,
    text: str | None,
    calls: list[tuple[str, str, dict[str, Any]]],
    usage_: dict[str, int],
    finish: str,
) -> None:
    model = chat_model(provider, Recorder([json_reply(fixture_bytes(file))]))
    response = await model.request(HELLO)
    if text is not None:
        assert response.message.content == text
    assert [(c.id, c.name, c.arguments) for c in response.message.tool_calls] == calls
    assert tokens(response.usage) == usage_
    assert response.finish_reason == finish


async def test_whole_reasoning_is_kept() -> None:
    model = chat_model(
        "deepseek", Recorder([json_reply(fixture_bytes("deepseek/reasoning-json-content.json"))])
    )
    response = await model.request(HELLO)
    (reasoning,) = response.message.reasoning
    assert reasoning.provider == "deepseek"
    assert reasoning.text.startswith("I have the result from the weather tool.")
    assert response.usage.cache_read_tokens == 320


async def test_whole_and_streamed_answers_agree() -> None:
    """The same answer, streamed and whole, assembles to the same response shape."""
    body: dict[str, Any] = {
        "id": "x",
        "model": "m",
        "choices": [
            {
                "index": 0,
                "message": {
                    "content": "Sure.",
                    "reasoning_content": "think",
                    "tool_calls": [
                        {
                            "id": "a",
                            "type": "function",
                            "function": {"name": "f", "arguments": "{}"},
                        }
                    ],
                },
                "finish_reason": "tool_calls",
            }
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": 2},
    }
    whole = await chat_model("deepseek", Recorder([json_reply(body)])).request(HELLO)
    stream_body = dict(
        body, choices=[dict(body["choices"][0], delta=body["choices"][0]["message"])]
    )
    raw = b"data: " + json.dumps(stream_body).encode() + b"\n\ndata: [DONE]\n\n"
    streamed = [e async for e in chat_model("deepseek", Recorder([sse(raw)])).stream(HELLO)]
    last = streamed[-1]
    assert isinstance(last, ResponseDone)
    assert summary(last.response) == summary(whole)


# -- errors ------------------------------------------------------------------------------------


async def test_401_is_an_authentication_error_naming_the_variable() -> None:
    body = {
        "error": {"message": f"Incorrect API key provided: {API_KEY}", "code": "invalid_api_key"}
    }
    model = chat_model("openai", Recorder([json_reply(body, status=401)]))
    with pytest.raises(AuthenticationError) as caught:
        await model.request(HELLO)
    assert "OPENAI_API_KEY" in str(caught.value)
    assert API_KEY not in str(caught.value) and API_KEY not in (caught.value.body or "")


async def test_404_for_an_unknown_model_on_a_stream_request() -> None:
    reply = json_reply(fixture_bytes("openai-chat/error-404-model-not-found.json"), status=404)
    model = chat_model("openai", Recorder([reply]))
    with pytest.raises(ProviderError) as caught:
        [_ async for _ in model.stream(HELLO)]
    assert (caught.value.status_code, caught.value.code) == (404, "model_not_found")
    assert "Check the model id" in str(caught.value)


async def test_a_context_length_error() -> None:
    body = {
        "error": {
            "message": "This model's maximum context length is 128000 tokens. "
            "However, your messages resulted in 130000 tokens.",
            "type": "invalid_request_error",
            "code": "context_length_exceeded",
        }
    }
    model = chat_model("openai", Recorder([json_reply(body, status=400)]))
    with pytest.raises(ContextWindowExceeded, match="maximum context length"):
        await model.request(HELLO)


async def test_groq_400_tool_use_failed_is_a_malformed_tool_call() -> None:
    reply = json_reply(fixture_bytes("groq/error-400-tool-use-failed.json"), status=400)
    model = chat_model("groq", Recorder([reply]))
    with pytest.raises(MalformedToolCall) as caught:
        await model.request(HELLO)
    assert isinstance(caught.value.__cause__, ProviderError)


async def test_an_error_body_with_status_200() -> None:
    model = chat_model("openai-compatible", Recorder([json_reply({"error": {"message": "oops"}})]))
    with pytest.raises(ProviderError, match="oops"):
        await model.request(HELLO)


async def test_a_response_without_choices() -> None:
    model = chat_model("openai", Recorder([json_reply({"id": "x", "choices": []})]))
    with pytest.raises(ProviderError, match="no choices"):
        await model.request(HELLO)
