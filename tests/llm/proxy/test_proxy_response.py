"""Writing Tidemill responses and streams back in OpenAI's format, with inline snapshots."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tidemill.llm.proxy import ChunkEncoder, completion_body, usage_body
from tidemill.types import (
    FinishReason,
    Message,
    ModelResponse,
    Reasoning,
    ReasoningDelta,
    ResponseDone,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    Usage,
)

USAGE = Usage(requests=1, input_tokens=20, output_tokens=7, cache_read_tokens=5, reasoning_tokens=2)
CALLS = (
    ToolCall(id="call_a", name="zoom", arguments={"factor": 2}),
    ToolCall(id="call_b", name="crop", raw_arguments='{"broken'),
)


def frames(data: bytes) -> list[Any]:
    """Decode a run of server-sent events: JSON objects, with `[DONE]` kept as a string."""
    events: list[Any] = []
    for block in data.decode().split("\n\n"):
        if not block:
            continue
        assert block.startswith("data: "), block
        payload = block[len("data: ") :]
        events.append(payload if payload == "[DONE]" else json.loads(payload))
    return events


def choices(data: bytes) -> list[Any]:
    return [e if e == "[DONE]" else e["choices"] for e in frames(data)]


def test_a_whole_answer_with_tool_calls_and_reasoning() -> None:
    response = ModelResponse(
        message=Message.assistant("", tool_calls=CALLS, reasoning=(Reasoning(text="Hmm."),)),
        usage=USAGE,
        finish_reason="tool_calls",
        model="gpt-4o-2024-08-06",
        provider="openai",
        response_id="upstream-id",
    )
    body = completion_body(response, model="fast", response_id="chatcmpl-1", created=1700000000)
    assert body == {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1700000000,
        "model": "fast",
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": None,
                    "refusal": None,
                    "tool_calls": [
                        {
                            "id": "call_a",
                            "type": "function",
                            "function": {"name": "zoom", "arguments": '{"factor":2}'},
                        },
                        {
                            "id": "call_b",
                            "type": "function",
                            "function": {"name": "crop", "arguments": '{"broken'},
                        },
                    ],
                    "reasoning_content": "Hmm.",
                },
                "finish_reason": "tool_calls",
                "logprobs": None,
            }
        ],
        "usage": {
            "prompt_tokens": 20,
            "completion_tokens": 7,
            "total_tokens": 27,
            "prompt_tokens_details": {"cached_tokens": 5},
            "completion_tokens_details": {"reasoning_tokens": 2},
        },
        "system_fingerprint": None,
    }


def test_finish_reasons_map_to_openai_ones() -> None:
    reasons = {}
    for reason in ("stop", "tool_calls", "length", "content_filter", "error", "unknown"):
        response = ModelResponse(message=Message.assistant("x"), finish_reason=reason)  # type: ignore[arg-type]
        body = completion_body(response, model="m", response_id="c", created=0)
        reasons[reason] = body["choices"][0]["finish_reason"]
    assert reasons == {
        "stop": "stop",
        "tool_calls": "tool_calls",
        "length": "length",
        "content_filter": "content_filter",
        "error": "stop",
        "unknown": "stop",
    }


def test_a_stream_with_text_reasoning_and_parallel_tool_calls() -> None:
    encoder = ChunkEncoder(model="m", response_id="chatcmpl-1", created=5, include_usage=True)
    done = ResponseDone(
        response=ModelResponse(
            message=Message.assistant("Hi there", tool_calls=CALLS),
            usage=USAGE,
            finish_reason="tool_calls",
        )
    )
    events = [
        ReasoningDelta(delta="Think"),
        ReasoningDelta(signature="sig"),  # signatures have no OpenAI field
        TextDelta(delta="Hi"),
        TextDelta(delta=""),
        TextDelta(delta=" there"),
        # Upstream indexes need not start at 0 (Anthropic block numbers, gateways).
        ToolCallDelta(index=3, call_id="call_a", name="zoom", arguments_delta=""),
        ToolCallDelta(index=5, call_id="call_b", name="crop", arguments_delta='{"bro'),
        ToolCallDelta(index=3, arguments_delta='{"factor":'),
        ToolCallDelta(index=3, arguments_delta=""),
        ToolCallDelta(index=3, arguments_delta="2}"),
        ToolCallDelta(index=5, arguments_delta="ken"),
        done,
    ]
    data = encoder.start() + b"".join(encoder.event(event) for event in events)
    decoded = frames(data)
    heads = {(e["id"], e["object"], e["created"], e["model"]) for e in decoded if e != "[DONE]"}
    assert heads == {("chatcmpl-1", "chat.completion.chunk", 5, "m")}
    assert [e["usage"] for e in decoded[:-2]] == [None] * (len(decoded) - 2)
    assert choices(data) == [
        [{"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None,
          "finish_reason": None}],
        [{"index": 0, "delta": {"reasoning_content": "Think"}, "logprobs": None,
          "finish_reason": None}],
        [{"index": 0, "delta": {"content": "Hi"}, "logprobs": None, "finish_reason": None}],
        [{"index": 0, "delta": {"content": " there"}, "logprobs": None, "finish_reason": None}],
        [{"index": 0, "delta": {"tool_calls": [
            {"index": 0, "id": "call_a", "type": "function",
             "function": {"name": "zoom", "arguments": ""}}]},
          "logprobs": None, "finish_reason": None}],
        [{"index": 0, "delta": {"tool_calls": [
            {"index": 1, "id": "call_b", "type": "function",
             "function": {"name": "crop", "arguments": '{"bro'}}]},
          "logprobs": None, "finish_reason": None}],
        [{"index": 0, "delta": {"tool_calls": [
            {"index": 0, "function": {"arguments": '{"factor":'}}]},
          "logprobs": None, "finish_reason": None}],
        [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": "2}"}}]},
          "logprobs": None, "finish_reason": None}],
        [{"index": 0, "delta": {"tool_calls": [{"index": 1, "function": {"arguments": "ken"}}]},
          "logprobs": None, "finish_reason": None}],
        [{"index": 0, "delta": {}, "logprobs": None, "finish_reason": "tool_calls"}],
        [],
        "[DONE]",
    ]  # fmt: skip
    assert decoded[-2]["usage"] == {
        "prompt_tokens": 20,
        "completion_tokens": 7,
        "total_tokens": 27,
        "prompt_tokens_details": {"cached_tokens": 5},
        "completion_tokens_details": {"reasoning_tokens": 2},
    }


def test_a_model_that_does_not_stream_has_its_whole_answer_sent_at_the_end() -> None:
    encoder = ChunkEncoder(model="m", response_id="c", created=0)
    done = ResponseDone(
        response=ModelResponse(
            message=Message.assistant("All at once.", tool_calls=CALLS[:1]),
            finish_reason="tool_calls",
        )
    )
    data = encoder.finish(done)
    decoded = frames(data)
    assert all("usage" not in e for e in decoded if e != "[DONE]")
    assert choices(data) == [
        [{"index": 0, "delta": {"content": "All at once."}, "logprobs": None,
          "finish_reason": None}],
        [{"index": 0, "delta": {"tool_calls": [
            {"index": 0, "id": "call_a", "type": "function",
             "function": {"name": "zoom", "arguments": '{"factor":2}'}}]},
          "logprobs": None, "finish_reason": None}],
        [{"index": 0, "delta": {}, "logprobs": None, "finish_reason": "tool_calls"}],
        "[DONE]",
    ]  # fmt: skip


def test_a_call_without_an_upstream_id_gets_one_and_a_late_name_is_sent() -> None:
    encoder = ChunkEncoder(model="m", response_id="c", created=0)
    first = frames(encoder.event(ToolCallDelta(index=0, arguments_delta="{")))
    late = frames(encoder.event(ToolCallDelta(index=0, name="zoom")))
    call = first[0]["choices"][0]["delta"]["tool_calls"][0]
    assert call["id"].startswith("call_") and call["function"] == {"name": "", "arguments": "{"}
    assert late[0]["choices"][0]["delta"]["tool_calls"] == [
        {"index": 0, "function": {"arguments": "", "name": "zoom"}}
    ]
    assert encoder.event(ToolCallDelta(index=0)) == b""


def test_text_is_escaped_as_json() -> None:
    encoder = ChunkEncoder(model='we"ird', response_id="c", created=0)
    text = 'quote " backslash \\ newline \n unicode é \u2028 emoji 🐦'
    decoded = frames(encoder.event(TextDelta(delta=text)))
    assert decoded[0]["choices"][0]["delta"]["content"] == text
    assert decoded[0]["model"] == 'we"ird'


@pytest.mark.parametrize("include_usage", [False, True])
@pytest.mark.parametrize("reason", ["stop", "length", "tool_calls", "content_filter"])
def test_every_chunk_is_the_whole_chunk_object_encoded_in_field_order(
    include_usage: bool, reason: FinishReason
) -> None:
    # The encoder writes chunks from templates; they must be the bytes the whole objects give.
    encoder = ChunkEncoder(
        model='m "é"', response_id="chatcmpl-9", created=17, include_usage=include_usage
    )

    def chunk(choices: list[Any], usage: Any = None) -> bytes:
        body: dict[str, Any] = {
            "id": "chatcmpl-9",
            "object": "chat.completion.chunk",
            "created": 17,
            "model": 'm "é"',
            "system_fingerprint": None,
            "choices": choices,
        }
        if include_usage:
            body["usage"] = usage
        text = json.dumps(body, ensure_ascii=False, separators=(",", ":"))
        return b"data: " + text.encode() + b"\n\n"

    def choice(delta: dict[str, Any], finish: str | None = None) -> list[Any]:
        return [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]

    done = ResponseDone(
        response=ModelResponse(message=Message.assistant("Hi"), usage=USAGE, finish_reason=reason)
    )
    assert encoder.start() == chunk(choice({"role": "assistant", "content": ""}))
    assert encoder.event(TextDelta(delta="Hi")) == chunk(choice({"content": "Hi"}))
    closing = chunk(choice({}, reason))
    if include_usage:
        closing += chunk([], usage_body(USAGE))
    assert encoder.finish(done) == closing + b"data: [DONE]\n\n"
    # What the relay sends instead, from the finish reason and usage alone.
    assert encoder.closing(reason, USAGE) == closing + b"data: [DONE]\n\n"
