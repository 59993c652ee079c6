"""Cost: `Usage.cost_usd` for priced calls, `unpriced_requests` for the rest, summed by agents."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from bedrock_replay import bedrock_model, delta, finish, isolate_aws, replay_bedrock
from llm_replay import (
    HELLO,
    Recorder,
    chat_model,
    fixture_bytes,
    fixture_json,
    json_reply,
    sse,
    stream_all,
)
from replay_models import gemini_model

from tidemill import agent, tool
from tidemill.llm import OpenAIChatModel
from tidemill.llm import _pricing as pricing
from tidemill.types import Usage

genai_prices: Any = pytest.importorskip(
    "genai_prices", reason="the `prices` extra is not installed"
)


@pytest.fixture(autouse=True)
def _clean_aws(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    isolate_aws(monkeypatch, tmp_path)


def package_price(raw: dict[str, Any], provider_id: str, api_flavor: str = "default") -> float:
    """The package's own price of a raw response: its usage extraction, its model lookup."""
    extracted = genai_prices.extract_usage(raw, provider_id=provider_id, api_flavor=api_flavor)
    return float(extracted.calc_price().total_price)


@pytest.mark.parametrize(
    ("provider", "file", "provider_id", "flavor"),
    [
        ("anthropic", "anthropic/text.json", "anthropic", "default"),
        ("anthropic", "anthropic/parallel-tool-use.json", "anthropic", "default"),
        ("openai", "openai-chat/text.json", "openai", "chat"),
        ("openai", "openai-chat/parallel-tool-calls.json", "openai", "chat"),
    ],
)
async def test_a_recorded_response_costs_what_the_package_says(
    provider: str, file: str, provider_id: str, flavor: str
) -> None:
    model = chat_model(provider, Recorder([json_reply(fixture_bytes(file))]))
    response = await model.request(HELLO)
    assert response.usage.unpriced_requests == 0 and response.usage.cost_usd > 0
    assert response.usage.cost_usd == pytest.approx(
        package_price(fixture_json(file), provider_id, flavor), rel=1e-12
    )


async def test_gemini_reasoning_tokens_are_priced_as_the_package_prices_them() -> None:
    model = gemini_model(Recorder([json_reply(fixture_bytes("gemini/text.json"))]))
    response = await model.request(HELLO)
    assert response.usage.reasoning_tokens == 25
    assert response.usage.cost_usd == pytest.approx(
        package_price(fixture_json("gemini/text.json"), "google"), rel=1e-12
    )


async def test_cache_reads_and_writes_are_priced_at_their_own_rates() -> None:
    raw = {
        "id": "msg_cache",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-20250514",
        "content": [{"type": "text", "text": "ok"}],
        "stop_reason": "end_turn",
        "usage": {
            "input_tokens": 50,
            "cache_creation_input_tokens": 2000,
            "cache_read_input_tokens": 30000,
            "output_tokens": 10,
        },
    }
    model = chat_model("anthropic", Recorder([json_reply(raw)]))
    usage = (await model.request(HELLO)).usage
    assert (usage.input_tokens, usage.cache_read_tokens, usage.cache_write_tokens) == (
        32050,
        30000,
        2000,
    )
    assert usage.cost_usd == pytest.approx(package_price(raw, "anthropic"), rel=1e-12)
    all_plain = genai_prices.calc_price(
        genai_prices.Usage(input_tokens=32050, output_tokens=10),
        "claude-sonnet-4-20250514",
        provider_id="anthropic",
    )
    assert usage.cost_usd < float(all_plain.total_price) / 3  # cache reads are much cheaper


async def test_bedrock_prices_the_requested_model_id_with_its_cache_tokens() -> None:
    claude = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
    raw = fixture_json("bedrock-converse/thinking-tool-use.json")
    response = await bedrock_model(
        Recorder([json_reply(fixture_bytes("bedrock-converse/thinking-tool-use.json"))]), claude
    ).request(HELLO)
    extracted = genai_prices.extract_usage(raw, provider_id="aws")
    expected = genai_prices.calc_price(extracted.usage, claude, provider_id="aws")
    assert response.usage.cost_usd == pytest.approx(float(expected.total_price), rel=1e-12)
    used = {"inputTokens": 12, "outputTokens": 7, "cacheReadInputTokens": 900}
    streamed = await replay_bedrock([delta(0, text="hi"), *finish(**used)], model=claude)
    expected = genai_prices.calc_price(
        genai_prices.extract_usage({"usage": used}, provider_id="aws").usage,
        claude,
        provider_id="aws",
    )
    assert streamed.response.usage.cost_usd == pytest.approx(float(expected.total_price))


async def test_a_stream_is_priced_like_the_whole_response() -> None:
    streamed = await stream_all(
        chat_model("anthropic", Recorder([sse(fixture_bytes("anthropic/text-stream.sse"))]))
    )
    used = streamed.response.usage
    expected = genai_prices.calc_price(
        genai_prices.Usage(input_tokens=used.input_tokens, output_tokens=used.output_tokens),
        streamed.response.model,
        provider_id="anthropic",
    )
    assert used.unpriced_requests == 0
    assert used.cost_usd == pytest.approx(float(expected.total_price), rel=1e-12)


@pytest.mark.parametrize(
    ("provider", "model"),
    [("openai", "model-test-unknown"), ("ollama", "gpt-4o"), ("openai-compatible", "gpt-4o")],
)
async def test_an_unknown_model_or_a_provider_without_a_price_list_is_unpriced(
    provider: str, model: str
) -> None:
    raw = json.loads(fixture_bytes("openai-chat/text.json"))
    raw["model"] = model
    chat = chat_model(provider, Recorder([json_reply(raw)]))
    chat.model_name = model
    usage = (await chat.request(HELLO)).usage
    assert (usage.cost_usd, usage.unpriced_requests, usage.requests) == (0.0, 1, 1)
    assert usage.input_tokens == 16  # the tokens are still counted


async def test_without_the_package_every_call_is_unpriced(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pricing, "_package", lambda: None)
    assert not pricing.prices_available()
    usage = (
        await chat_model(
            "openai", Recorder([json_reply(fixture_bytes("openai-chat/text.json"))])
        ).request(HELLO)
    ).usage
    assert (usage.cost_usd, usage.unpriced_requests) == (0.0, 1)


def test_the_reported_model_is_tried_before_the_requested_one() -> None:
    used = Usage(requests=1, input_tokens=1000, output_tokens=100)
    by_reported = pricing.price_usage(used, provider="openai", models=["gpt-4o-mini", "nope"])
    by_requested = pricing.price_usage(used, provider="openai", models=["nope", "gpt-4o-mini"])
    assert by_reported == by_requested and by_reported.cost_usd > 0
    refused = pricing.price_usage(
        Usage(requests=1, input_tokens=1, cache_read_tokens=5), provider="openai", models=["gpt-4o"]
    )
    assert refused.unpriced_requests == 1  # counts the package refuses are not guessed at


# -- the agent sums them ------------------------------------------------------------------------


@tool
def get_weather(city: str) -> str:
    """Return the weather in a city."""
    return f"Sunny in {city}."


def tool_call_reply(model: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": model,
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                        }
                    ],
                },
            }
        ],
        "usage": {"prompt_tokens": 120, "completion_tokens": 20, "total_tokens": 140},
    }


def answer_reply(model: str) -> dict[str, Any]:
    raw = dict(fixture_json("openai-chat/text.json"))
    raw["model"] = model
    return raw


def tool_call_stream(model: str) -> bytes:
    """`tool_call_reply` as a Chat Completions stream, usage in its last chunk."""
    whole = tool_call_reply(model)
    call = whole["choices"][0]["message"]["tool_calls"][0]
    chunks = [
        {
            "choices": [
                {"index": 0, "delta": {"role": "assistant", "tool_calls": [{"index": 0, **call}]}}
            ]
        },
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
        {"choices": [], "usage": whole["usage"]},
    ]
    lines = [
        json.dumps({"id": "c1", "object": "chat.completion.chunk", "model": model, **c})
        for c in chunks
    ]
    return "".join(f"data: {line}\n\n" for line in [*lines, "[DONE]"]).encode()


def replies(streaming: bool) -> list[Any]:
    if streaming:
        return [sse(tool_call_stream("gpt-4o")), sse(fixture_bytes("openai-chat/text-stream.sse"))]
    return [json_reply(tool_call_reply("gpt-4o")), json_reply(answer_reply("gpt-4o"))]


@pytest.mark.parametrize("streaming", [False, True])
async def test_the_agent_response_sums_the_cost_of_its_calls(streaming: bool) -> None:
    model = OpenAIChatModel(
        "gpt-4o", api_key="sk-test", http_client=Recorder(replies(streaming)).client()
    )
    alone = OpenAIChatModel(
        "gpt-4o", api_key="sk-test", http_client=Recorder(replies(streaming)).client()
    )
    if streaming:
        costs = [(await stream_all(alone)).response.usage.cost_usd for _ in range(2)]
    else:
        costs = [(await alone.request(HELLO)).usage.cost_usd for _ in range(2)]
    bot = agent().llm(model).tool(get_weather)
    if streaming:
        events = [event async for event in bot.astream("Weather in Paris?")]
        response = events[-1].response  # type: ignore[union-attr]
    else:
        response = await bot.arun("Weather in Paris?")
    assert response.usage.requests == 2
    assert all(cost > 0 for cost in costs)
    assert response.usage.cost_usd == pytest.approx(sum(costs))
    assert response.usage.unpriced_requests == 0


async def test_the_agent_counts_unpriced_calls() -> None:
    replies = [json_reply(tool_call_reply("in-house-7b")), json_reply(answer_reply("in-house-7b"))]
    model = OpenAIChatModel(
        "in-house-7b",
        provider="openai-compatible",
        base_url="https://llm.example.invalid/v1",
        api_key="k",
        http_client=Recorder(replies).client(),
    )
    response = await agent().llm(model).tool(get_weather).arun("Weather in Paris?")
    assert (response.usage.cost_usd, response.usage.unpriced_requests) == (0.0, 2)
