"""The proxy passes on what it does not translate, translates what maps, and refuses by name.

Every vendor's upstream is a local replay server (127.0.0.1) playing a
recorded answer; the client is the official `openai` SDK. An OpenAI-format
upstream (OpenAI itself, Mistral) must receive every field the client sent,
as it sent it; Anthropic, Gemini, Bedrock and the Responses API the fields
their APIs have, in their own form; and a field one of them has no
equivalent for is a 400 that names it, before anything is sent upstream.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
from bedrock_replay import ACCESS_KEY, EVENT_STREAM, SECRET_KEY, isolate_aws
from llm_replay import API_KEY, ReplayServer, Reply, fixture_bytes
from proxy_serve import sdk, serve

from tidemill.llm.proxy import ModelRouter, create_app

WEATHER: list[Any] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    },
    {
        "type": "function",
        "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}},
    },
]
HELLO: list[Any] = [{"role": "user", "content": "Hello"}]

EXTRAS: dict[str, Any] = {
    "presence_penalty": 0.5,
    "frequency_penalty": 0.25,
    "user": "ann-42",
    "safety_identifier": "ann-42-hash",
    "parallel_tool_calls": False,
    "reasoning_effort": "low",
    "logit_bias": {"50256": -100},
    "metadata": {"run": "7"},
    "store": False,
    "service_tier": "flex",
    "prompt_cache_key": "tenant-1",
    "verbosity": "low",
    "n": 1,
    "modalities": ["text"],
}
"""Standard Chat Completions fields the proxy once dropped, with values OpenAI accepts."""

VENDOR_OWN: dict[str, Any] = {"top_k": 40, "repetition_penalty": 1.1}
"""Fields no OpenAI API has, which a vLLM or OpenRouter server does."""

REPLIES = {
    "openai": ("openai-chat/text-stream.sse", "openai-chat/text.json"),
    "mistral": ("mistral/thinking-stream.sse", "mistral/text.json"),
    "anthropic": ("anthropic/text-stream.sse", "anthropic/text.json"),
    "gemini": ("gemini/text-stream.sse", "gemini/text.json"),
    "bedrock": ("bedrock-converse/text-stream.bin", "bedrock-converse/text.json"),
    "openai-responses": ("openai-responses/text-stream.sse", "openai-responses/text.json"),
}


def reply(provider: str, stream: bool) -> Reply:
    streamed, whole = REPLIES[provider]
    if not stream:
        return Reply(fixture_bytes(whole), content_type="application/json")
    kind = EVENT_STREAM if provider == "bedrock" else "text/event-stream"
    return Reply(fixture_bytes(streamed), content_type=kind)


def router(server: ReplayServer) -> ModelRouter:
    url = server.url
    keyed = {"api_key": API_KEY}
    return ModelRouter(
        provider_options={
            "openai": {"base_url": f"{url}/v1", **keyed},
            "openai-responses": {"base_url": f"{url}/v1", **keyed},
            "mistral": {"base_url": f"{url}/v1", **keyed},
            "anthropic": {"base_url": url, **keyed},
            "gemini": {"base_url": f"{url}/v1beta", **keyed},
            "bedrock": {
                "base_url": url,
                "region": "us-east-1",
                "access_key_id": ACCESS_KEY,
                "secret_access_key": SECRET_KEY,
            },
        }
    )


@pytest.fixture(autouse=True)
def _no_aws_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    isolate_aws(monkeypatch, tmp_path)


@pytest.fixture
def proxy(server: ReplayServer) -> Iterator[str]:
    with serve(create_app(router(server), keepalive=5.0)) as url:
        yield url


def ask(proxy: str, model: str, *, stream: bool = False, **fields: Any) -> Any:
    """One chat completion through the proxy, with `fields` as the request's own."""
    client = sdk(proxy)
    if stream:
        chunks = client.chat.completions.create(
            model=model, messages=HELLO, stream=True, extra_body=fields
        )
        return list(chunks)
    return client.chat.completions.create(model=model, messages=HELLO, extra_body=fields)


def refusal(proxy: str, model: str, *, stream: bool = False, **fields: Any) -> dict[str, Any]:
    """The error body of a request the proxy must refuse with a 400."""
    with pytest.raises(openai.BadRequestError) as caught:
        ask(proxy, model, stream=stream, **fields)
    body: dict[str, Any] = caught.value.response.json()
    return body


# -- OpenAI-format upstreams get every field as it was sent --------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_an_openai_upstream_gets_every_field_as_the_client_sent_it(
    proxy: str, server: ReplayServer, stream: bool
) -> None:
    server.replies.append(reply("openai", stream))
    fields = {
        **EXTRAS,
        **VENDOR_OWN,
        "tools": WEATHER,
        "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
    }
    if stream:
        fields["stream_options"] = {"include_usage": True, "include_obfuscation": False}
    ask(proxy, "openai:gpt-4o", stream=stream, **fields)
    (seen,) = server.seen
    sent = seen.body
    for name, value in {**EXTRAS, **VENDOR_OWN}.items():
        assert sent.get(name) == value, f"{name}: {sent.get(name)!r}"
    assert sent["tools"] == WEATHER
    assert sent["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}
    assert sent["model"] == "gpt-4o"
    if stream:  # the proxy asks for usage itself; the client's other stream options go on
        assert sent["stream_options"] == {"include_usage": True, "include_obfuscation": False}
        assert seen.headers["user-agent"].endswith(" proxy")  # sent by the relay's fast path


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_a_compatible_upstream_gets_them_too(
    proxy: str, server: ReplayServer, stream: bool
) -> None:
    """Mistral: its own `random_seed` for `seed`, everything else as it came."""
    server.replies.append(reply("mistral", stream))
    ask(
        proxy,
        "mistral:mistral-large-latest",
        stream=stream,
        presence_penalty=0.5,
        parallel_tool_calls=True,
        safe_prompt=True,
        seed=3,
        tools=WEATHER,
        tool_choice="required",
    )
    sent = server.seen[0].body
    assert (sent["presence_penalty"], sent["parallel_tool_calls"], sent["safe_prompt"]) == (
        0.5,
        True,
        True,
    )
    assert (sent["random_seed"], sent["tool_choice"]) == (3, "required")
    assert "seed" not in sent


def test_tool_choice_none_keeps_the_tools(proxy: str, server: ReplayServer) -> None:
    """`none` with tools reaches an OpenAI upstream as it was sent (it once sent no tools)."""
    server.replies.append(reply("openai", False))
    ask(proxy, "openai:gpt-4o", tools=WEATHER, tool_choice="none")
    sent = server.seen[0].body
    assert (sent["tools"], sent["tool_choice"]) == (WEATHER, "none")


# -- translated vendors: what maps, in their own form --------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_anthropic_gets_each_field_in_its_own_form(
    proxy: str, server: ReplayServer, stream: bool
) -> None:
    server.replies.append(reply("anthropic", stream))
    ask(
        proxy,
        "anthropic:claude-sonnet-4-5",
        stream=stream,
        user="ann-42",
        service_tier="default",
        reasoning_effort="high",
        parallel_tool_calls=False,
        tools=WEATHER,
        tool_choice="required",
        store=False,
        n=1,
        logprobs=False,
    )
    sent = server.seen[0].body
    assert sent["metadata"] == {"user_id": "ann-42"}
    assert sent["service_tier"] == "standard_only"
    assert sent["output_config"] == {"effort": "high"}
    assert sent["tool_choice"] == {"type": "any", "disable_parallel_tool_use": True}
    assert not {"store", "n", "user", "parallel_tool_calls", "reasoning_effort", "logprobs"} & set(
        sent
    )


@pytest.mark.parametrize(
    ("choice", "expected"),
    [
        ("required", {"type": "any"}),
        (
            {"type": "function", "function": {"name": "get_time"}},
            {"type": "tool", "name": "get_time"},
        ),
        ("none", {"type": "none"}),
    ],
    ids=["required", "named", "none"],
)
def test_anthropic_is_made_to_call_a_tool(
    proxy: str, server: ReplayServer, choice: Any, expected: dict[str, Any]
) -> None:
    server.replies.append(reply("anthropic", False))
    ask(proxy, "anthropic:claude-sonnet-4-5", tools=WEATHER, tool_choice=choice)
    sent = server.seen[0].body
    assert sent["tool_choice"] == expected
    assert [tool["name"] for tool in sent["tools"]] == ["get_weather", "get_time"]


@pytest.mark.parametrize(
    ("choice", "expected"),
    [
        ("required", {"mode": "ANY"}),
        (
            {"type": "function", "function": {"name": "get_time"}},
            {"mode": "ANY", "allowedFunctionNames": ["get_time"]},
        ),
        ("none", {"mode": "NONE"}),
    ],
    ids=["required", "named", "none"],
)
def test_gemini_is_made_to_call_a_tool(
    proxy: str, server: ReplayServer, choice: Any, expected: dict[str, Any]
) -> None:
    server.replies.append(reply("gemini", False))
    ask(
        proxy,
        "gemini:gemini-2.5-flash",
        tools=WEATHER,
        tool_choice=choice,
        presence_penalty=0.5,
        frequency_penalty=0.25,
        reasoning_effort="low",
    )
    sent = server.seen[0].body
    assert sent["toolConfig"] == {"functionCallingConfig": expected}
    config = sent["generationConfig"]
    assert (config["presencePenalty"], config["frequencyPenalty"]) == (0.5, 0.25)
    assert config["thinkingConfig"] == {"thinkingBudget": 1024}


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize(
    ("choice", "expected"),
    [
        ("required", {"any": {}}),
        ({"type": "function", "function": {"name": "get_time"}}, {"tool": {"name": "get_time"}}),
    ],
    ids=["required", "named"],
)
def test_bedrock_is_made_to_call_a_tool(
    proxy: str, server: ReplayServer, choice: Any, expected: dict[str, Any], stream: bool
) -> None:
    server.replies.append(reply("bedrock", stream))
    ask(
        proxy,
        "bedrock:us.amazon.nova-micro-v1:0",
        stream=stream,
        tools=WEATHER,
        tool_choice=choice,
        metadata={"tenant": "acme"},
        service_tier="priority",
    )
    sent = server.seen[0].body
    assert sent["toolConfig"]["toolChoice"] == expected
    assert sent["requestMetadata"] == {"tenant": "acme"}
    assert sent["serviceTier"] == {"type": "priority"}


def test_the_responses_api_gets_its_own_names(proxy: str, server: ReplayServer) -> None:
    server.replies.append(reply("openai-responses", False))
    ask(
        proxy,
        "openai-responses:gpt-4.1-mini",
        user="ann",
        metadata={"run": "7"},
        reasoning_effort="low",
        verbosity="high",
        parallel_tool_calls=False,
        tools=WEATHER,
        tool_choice={"type": "function", "function": {"name": "get_time"}},
    )
    sent = server.seen[0].body
    assert (sent["user"], sent["metadata"], sent["parallel_tool_calls"]) == (
        "ann",
        {"run": "7"},
        False,
    )
    assert sent["reasoning"] == {"effort": "low"}
    assert sent["text"] == {"verbosity": "high"}
    assert sent["tool_choice"] == {"type": "function", "name": "get_time"}


# -- refused by name, before anything is sent ----------------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize(
    ("model", "fields", "param", "code"),
    [
        (
            "anthropic:claude-sonnet-4-5",
            {"presence_penalty": 0.5},
            "presence_penalty",
            "unsupported_parameter",
        ),
        ("anthropic:claude-sonnet-4-5", {"seed": 7}, "seed", "unsupported_parameter"),
        (
            "anthropic:claude-sonnet-4-5",
            {"logit_bias": {"1": 2}},
            "logit_bias",
            "unsupported_parameter",
        ),
        ("anthropic:claude-sonnet-4-5", {"top_k": 40}, "top_k", "unsupported_parameter"),
        (
            "anthropic:claude-sonnet-4-5",
            {"service_tier": "scale"},
            "service_tier",
            "unsupported_value",
        ),
        ("anthropic:claude-sonnet-4-5", {"store": True}, "store", "unsupported_value"),
        ("anthropic:claude-opus-4-7", {"temperature": 0.2}, "temperature", "unsupported_parameter"),
        ("gemini:gemini-2.5-flash", {"user": "ann"}, "user", "unsupported_parameter"),
        (
            "gemini:gemini-2.5-flash",
            {"parallel_tool_calls": False},
            "parallel_tool_calls",
            "unsupported_value",
        ),
        (
            "gemini:gemini-2.5-flash",
            {"reasoning_effort": "xhigh"},
            "reasoning_effort",
            "unsupported_value",
        ),
        ("bedrock:us.amazon.nova-micro-v1:0", {"seed": 7}, "seed", "unsupported_parameter"),
        ("bedrock:us.amazon.nova-micro-v1:0", {"user": "ann"}, "user", "unsupported_parameter"),
        (
            "bedrock:meta.llama3-70b-instruct-v1:0",
            {"tools": WEATHER, "tool_choice": "required"},
            "tool_choice",
            "unsupported_value",
        ),
        ("openai-responses:gpt-4.1-mini", {"stop": ["END"]}, "stop", "unsupported_parameter"),
        (
            "openai-responses:gpt-4.1-mini",
            {"frequency_penalty": 1.0},
            "frequency_penalty",
            "unsupported_parameter",
        ),
        ("anthropic:claude-sonnet-4-5", {"logprobs": True}, "logprobs", "unsupported_value"),
        (
            "anthropic:claude-sonnet-4-5",
            {"top_logprobs": 2},
            "top_logprobs",
            "unsupported_parameter",
        ),
        ("bedrock:us.amazon.nova-micro-v1:0", {"logprobs": True}, "logprobs", "unsupported_value"),
        (
            "bedrock:us.amazon.nova-micro-v1:0",
            {"logprobs": False, "top_logprobs": 0},
            "top_logprobs",
            "unsupported_parameter",
        ),
        ("gemini:gemini-2.5-flash", {"logprobs": True}, "logprobs", "unsupported_value"),
        (
            "openai-responses:gpt-4.1-mini",
            {"top_logprobs": "2"},
            "top_logprobs",
            "unsupported_value",
        ),
    ],
    ids=lambda value: value if isinstance(value, str) else None,
)
def test_a_field_the_api_has_no_equivalent_for_is_a_400_naming_it(
    proxy: str,
    server: ReplayServer,
    model: str,
    fields: dict[str, Any],
    param: str,
    code: str,
    stream: bool,
) -> None:
    error = refusal(proxy, model, stream=stream, **fields)["error"]
    assert (error["param"], error["code"], error["type"]) == (param, code, "invalid_request_error")
    assert f"'{param}'" in error["message"]
    assert server.seen == []  # nothing went upstream


def test_a_hostile_field_name_or_value_is_refused_in_a_few_words(
    proxy: str, server: ReplayServer
) -> None:
    name = "x" * 100_000
    error = refusal(proxy, "anthropic:claude-sonnet-4-5", **{name: 1})["error"]
    assert error["param"] == "x" * 80 + "..."
    assert len(error["message"]) < 400
    error = refusal(proxy, "anthropic:claude-sonnet-4-5", service_tier="s" * 100_000)["error"]
    assert error["param"] == "service_tier"
    assert len(error["message"]) < 400
    assert server.seen == []


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"tool_choice": "required"}, "tool_choice"),
        (
            {"tools": WEATHER, "tool_choice": {"type": "function", "function": {"name": "nope"}}},
            "tool_choice.function.name",
        ),
        (
            {"tools": WEATHER, "tool_choice": {"type": "function", "function": {}}},
            "tool_choice.function.name",
        ),
        ({"tools": WEATHER, "tool_choice": {"type": "allowed_tools"}}, "tool_choice"),
        ({"tools": WEATHER, "tool_choice": "sometimes"}, "tool_choice"),
    ],
)
def test_a_tool_choice_that_cannot_be_met_is_a_400(
    proxy: str, server: ReplayServer, fields: dict[str, Any], param: str
) -> None:
    error = refusal(proxy, "openai:gpt-4o", **fields)["error"]
    assert error["param"] == param
    assert server.seen == []


def test_null_is_the_same_as_leaving_a_field_out(proxy: str, server: ReplayServer) -> None:
    server.replies.append(reply("anthropic", False))
    ask(proxy, "anthropic:claude-sonnet-4-5", presence_penalty=None, seed=None, user=None)
    assert not {"presence_penalty", "seed", "user", "metadata"} & set(server.seen[0].body)


# -- no usage is no usage ------------------------------------------------------------------------

NO_USAGE_WHOLE = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "created": 0,
    "model": "local-model",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "Hi!"}, "finish_reason": "stop"}
    ],
}
NO_USAGE_STREAM = (
    'data: {"id":"c","object":"chat.completion.chunk","created":0,"model":"m","choices":'
    '[{"index":0,"delta":{"role":"assistant","content":"Hi!"},"finish_reason":null}]}\n\n'
    'data: {"id":"c","object":"chat.completion.chunk","created":0,"model":"m","choices":'
    '[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
    "data: [DONE]\n\n"
)


def test_an_answer_without_upstream_usage_has_no_usage(proxy: str, server: ReplayServer) -> None:
    server.replies.append(
        Reply(json.dumps(NO_USAGE_WHOLE).encode(), content_type="application/json")
    )
    completion = ask(proxy, "openai:gpt-4o")
    assert completion.choices[0].message.content == "Hi!"
    assert completion.usage is None


def test_a_stream_without_upstream_usage_has_no_usage_chunk(
    proxy: str, server: ReplayServer
) -> None:
    server.replies.append(Reply(NO_USAGE_STREAM.encode()))
    chunks = ask(proxy, "openai:gpt-4o", stream=True, stream_options={"include_usage": True})
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "Hi!"
    assert all(chunk.usage is None for chunk in chunks)
    assert all(chunk.choices for chunk in chunks)  # no usage chunk, whose choices are []


# -- hostile names and clashes -------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_a_field_name_with_dots_goes_on_as_one_name(
    proxy: str, server: ReplayServer, stream: bool
) -> None:
    server.replies.append(reply("openai", stream))
    ask(proxy, "openai:gpt-4o", stream=stream, **{"a.b": 1, "": "empty", "über": [None]})
    sent = server.seen[0].body
    assert (sent["a.b"], sent[""], sent["über"]) == (1, "empty", [None])
    assert "a" not in sent


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_a_field_that_clashes_with_a_translated_one_is_a_400(
    proxy: str, server: ReplayServer, stream: bool
) -> None:
    """Mistral's `seed` is sent as `random_seed`: both at once, with two values, cannot be."""
    error = refusal(proxy, "mistral:mistral-large-latest", stream=stream, seed=3, random_seed=4)[
        "error"
    ]
    assert error["param"] == "random_seed"
    assert "random_seed" in error["message"]
    assert server.seen == []
