"""The official SDKs as clients of the same recorded streams: they must read what we read.

Each recorded stream is served twice by a real local HTTP server: once to the
vendor's own SDK (its stream helper assembles the final message), once to
Tidemill's adapter. Text, every tool call with its arguments, the stop
reason and the token counts must agree.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from llm_replay import API_KEY, ReplayServer, Reply, fixture_bytes, fixtures_dir

from tidemill.llm import HttpModel, ModelRequest, RetryPolicy, resolve_model
from tidemill.types import Message, ModelResponse, ToolDefinition

pytest.importorskip("anthropic")
pytest.importorskip("openai")

TOOL = ToolDefinition(name="lookup", parameters={"type": "object", "properties": {}})
REQUEST = ModelRequest([Message.user("hi")], tools=[TOOL])


# Streams the SDK itself cannot read: a gateway whose first tool call has
# index 1 (the openai SDK fails with IndexError), and several choices (we keep
# choice 0 only). Our own replay tests cover both.
SDK_CANNOT_READ = {"gateway-tool-index-1-stream.sse", "multiple-choices-stream.sse"}


def recorded(folder: str) -> list[str]:
    root = fixtures_dir() / folder
    return sorted(
        f"{folder}/{p.name}"
        for p in Path(root).glob("*-stream.sse")
        if "error" not in p.name and p.name not in SDK_CANNOT_READ
    )


async def ours(provider: str, server: ReplayServer) -> ModelResponse:
    base = server.url if provider == "anthropic" else server.url + "/v1"
    model = resolve_model(
        f"{provider}:model-x", api_key=API_KEY, base_url=base, retry=RetryPolicy(max_retries=0)
    )
    assert isinstance(model, HttpModel)
    try:
        async for event in model.stream(REQUEST):
            if event.type == "response":
                return event.response
    finally:
        await model.aclose()
    raise AssertionError("no response")


@pytest.mark.parametrize("file", recorded("anthropic"))
async def test_the_anthropic_sdk_reads_what_we_read(server: ReplayServer, file: str) -> None:
    import anthropic

    body = fixture_bytes(file)
    server.replies += [Reply(body), Reply(body)]
    client = anthropic.AsyncAnthropic(api_key=API_KEY, base_url=server.url, max_retries=0)
    async with client.messages.stream(
        model="model-x", max_tokens=100, messages=[{"role": "user", "content": "hi"}]
    ) as stream:
        final = await stream.get_final_message()
    await client.close()
    mine = await ours("anthropic", server)

    text = "".join(b.text for b in final.content if b.type == "text")
    calls = [(b.id, b.name, b.input) for b in final.content if b.type == "tool_use"]
    assert mine.message.content == text
    assert [(c.id, c.name) for c in mine.message.tool_calls] == [c[:2] for c in calls]
    for call, (_, _, sdk_input) in zip(mine.message.tool_calls, calls, strict=True):
        if call.raw_arguments is not None:
            # Cut off mid-arguments: the SDK guesses a partial object; Tidemill keeps
            # the raw text so the runtime refuses the call rather than run half of it.
            assert final.stop_reason == "max_tokens"
            assert mine.finish_reason == "length"
        else:
            assert call.arguments == sdk_input
    thinking = [b.signature for b in final.content if b.type == "thinking"]
    assert [r.signature for r in mine.message.reasoning if r.signature] == thinking
    usage = final.usage
    cached = (usage.cache_read_input_tokens or 0) + (usage.cache_creation_input_tokens or 0)
    assert mine.usage.input_tokens == usage.input_tokens + cached
    assert mine.usage.output_tokens == usage.output_tokens
    stops = {"end_turn": "stop", "tool_use": "tool_calls", "max_tokens": "length"}
    assert mine.finish_reason == stops.get(final.stop_reason or "", mine.finish_reason)


@pytest.mark.parametrize("file", recorded("openai-chat"))
async def test_the_openai_sdk_reads_what_we_read(server: ReplayServer, file: str) -> None:
    import openai

    body = fixture_bytes(file)
    server.replies += [Reply(body), Reply(body)]
    client = openai.AsyncOpenAI(api_key=API_KEY, base_url=server.url + "/v1", max_retries=0)
    async with client.chat.completions.stream(
        model="model-x", messages=[{"role": "user", "content": "hi"}]
    ) as stream:
        async for _ in stream:
            pass
        # The snapshot, not get_final_completion(), which refuses a length-cut answer.
        completion = stream.current_completion_snapshot
    await client.close()
    mine = await ours("openai", server)

    choice = completion.choices[0]
    assert mine.message.content == (choice.message.content or choice.message.refusal or "")
    calls = [
        (c.id, c.function.name, json.loads(c.function.arguments or "{}"))
        for c in choice.message.tool_calls or []
    ]
    assert [(c.id, c.name, c.arguments) for c in mine.message.tool_calls] == calls
    if completion.usage is not None:
        assert mine.usage.input_tokens == completion.usage.prompt_tokens
        assert mine.usage.output_tokens == completion.usage.completion_tokens
    stops = {"stop": "stop", "tool_calls": "tool_calls", "length": "length"}
    expected = stops.get(choice.finish_reason or "", mine.finish_reason)
    if choice.message.refusal:
        expected = "content_filter"  # Tidemill reports a refusal as a filtered answer
    assert mine.finish_reason == expected
