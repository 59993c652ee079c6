"""A vendor that sends no usage: the response says so (`unreported_requests`), never zeros."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tidemill.llm._failures import ErrorReporter
from tidemill.llm._json import JsonObject
from tidemill.llm._pricing import price_usage
from tidemill.llm.anthropic._stream import MessagesStreamParser, parse_message
from tidemill.llm.bedrock._stream import parse_converse
from tidemill.llm.google._stream import GeminiStreamParser, parse_generate_content
from tidemill.llm.http._sse import ServerSentEvent
from tidemill.llm.openai._chat_stream import ChatStreamParser, parse_chat_completion
from tidemill.llm.openai._responses_stream import parse_response_object
from tidemill.types import ModelResponse, Usage

Parse = Callable[[JsonObject, ErrorReporter], ModelResponse]

WHOLE: list[tuple[str, Parse, JsonObject, JsonObject]] = [
    (
        "openai",
        parse_chat_completion,
        {"choices": [{"message": {"content": "hi"}, "finish_reason": "stop"}]},
        {"usage": {"prompt_tokens": 3, "completion_tokens": 1}},
    ),
    (
        "openai-responses",
        parse_response_object,
        {
            "object": "response",
            "status": "completed",
            "output": [
                {"type": "message", "content": [{"type": "output_text", "text": "hi"}]},
            ],
        },
        {"usage": {"input_tokens": 3, "output_tokens": 1}},
    ),
    (
        "anthropic",
        parse_message,
        {"content": [{"type": "text", "text": "hi"}], "stop_reason": "end_turn"},
        {"usage": {"input_tokens": 3, "output_tokens": 1}},
    ),
    (
        "gemini",
        parse_generate_content,
        {"candidates": [{"content": {"parts": [{"text": "hi"}]}, "finishReason": "STOP"}]},
        {"usageMetadata": {"promptTokenCount": 3, "candidatesTokenCount": 1}},
    ),
    (
        "bedrock",
        parse_converse,
        {"output": {"message": {"content": [{"text": "hi"}]}}, "stopReason": "end_turn"},
        {"usage": {"inputTokens": 3, "outputTokens": 1}},
    ),
]


@pytest.mark.parametrize(("provider", "parse", "body", "usage"), WHOLE)
def test_a_whole_answer_without_usage_reports_it_absent(
    provider: str, parse: Parse, body: JsonObject, usage: JsonObject
) -> None:
    errors = ErrorReporter(provider)
    absent = parse(body, errors)
    assert absent.message.content == "hi"
    assert absent.usage.requests == 1 and absent.usage.unreported_requests == 1
    assert absent.usage.total_tokens == 0
    present = parse({**body, **usage}, errors)
    assert present.usage.unreported_requests == 0
    assert (present.usage.input_tokens, present.usage.output_tokens) == (3, 1)


def events(*payloads: str) -> list[ServerSentEvent]:
    return [ServerSentEvent(data=payload) for payload in payloads]


def test_a_chat_stream_without_usage_reports_it_absent() -> None:
    parser = ChatStreamParser(ErrorReporter("openai"))
    for event in events(
        '{"choices":[{"delta":{"content":"hi"},"finish_reason":"stop"}]}', "[DONE]"
    ):
        parser.feed(event)
    assert parser.finish().usage.unreported_requests == 1
    assert parser.end().usage.unreported_requests == 1  # what the proxy's relay reads


def test_an_anthropic_stream_without_usage_reports_it_absent() -> None:
    parser = MessagesStreamParser(ErrorReporter("anthropic"))
    payloads: list[JsonObject] = [
        {"type": "message_start", "message": {"id": "msg_1"}},
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "text", "text": "hi"},
        },
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}},
        {"type": "message_stop"},
    ]
    for payload in payloads:
        parser.add(payload)
    assert parser.finish().usage.unreported_requests == 1


def test_a_gemini_stream_without_usage_reports_it_absent() -> None:
    parser = GeminiStreamParser(ErrorReporter("gemini"))
    chunk: dict[str, Any] = {
        "candidates": [{"content": {"parts": [{"text": "hi"}]}, "finishReason": "STOP"}]
    }
    parser.add_chunk(chunk)
    assert parser.finish().usage.unreported_requests == 1


def test_unreported_requests_add_up() -> None:
    reported = Usage(requests=1, input_tokens=3, output_tokens=1)
    unknown = Usage(requests=1, unreported_requests=1)
    total = reported + unknown + unknown
    assert (total.requests, total.unreported_requests, total.total_tokens) == (3, 2, 4)
    assert Usage.total([]).unreported_requests == 0


def test_an_unreported_usage_is_not_priced_as_free() -> None:
    priced = price_usage(
        Usage(requests=1, unreported_requests=1), provider="openai", models=["gpt-4o-mini"]
    )
    assert priced.unpriced_requests == 1 and priced.cost_usd == 0.0
