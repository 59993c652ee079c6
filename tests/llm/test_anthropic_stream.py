"""Anthropic Messages streams: recorded traffic and edge cases."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from llm_replay import (
    API_KEY,
    event_dump,
    fixture_bytes,
    replay_stream,
    run,
    split,
    summary,
    tokens,
)

from tidemill.errors import ProviderError, RateLimitError, TidemillError
from tidemill.types import ReasoningDelta, Usage


@dataclass(frozen=True)
class Case:
    file: str
    text: str | None = None
    text_start: str = ""
    calls: list[tuple[str, str, dict[str, Any], str | None]] = field(default_factory=list)
    usage: dict[str, int] = field(default_factory=dict)
    finish: str = "stop"
    thinking: list[tuple[str, str, str]] = field(default_factory=list)
    """(text start, signature start, redacted data start) per reasoning block."""


def usage(inp: int, out: int, **extra: int) -> dict[str, int]:
    return tokens(Usage(requests=1, input_tokens=inp, output_tokens=out, **extra))


CASES = [
    Case("anthropic/text-stream.sse", "4200 + 42 = 4242", usage=usage(17, 15)),
    Case(
        "anthropic/tool-use-stream.sse",
        "I'll check the current weather in Paris for you.",
        calls=[("toolu_01NRLabsLyVHZPKxbKvkfSMn", "get_weather", {"location": "Paris"}, None)],
        usage=usage(377, 65),
        finish="tool_calls",
    ),
    Case(
        "anthropic/parallel-tool-use-stream.sse",
        "I'll retrieve the secrets for both passwords you provided.",
        calls=[
            (
                "toolu_015cUijgET79LXjgeYQerN2h",
                "secret_retrieval_tool",
                {"password": "mellon"},
                None,
            ),
            (
                "toolu_01XZTimPexA7h3EVKesnKt5T",
                "secret_retrieval_tool",
                {"password": "radiance"},
                None,
            ),
        ],
        usage=usage(416, 109),
        finish="tool_calls",
    ),
    Case(
        "anthropic/parallel-tool-use-no-args-stream.sse",
        "",
        calls=[
            ("toolu_01LtHJmixrs9NcWQkK8hu8hj", "pelican_name_generator", {}, None),
            ("toolu_01N8a4jWyf116qKTMqKKmjyt", "pelican_name_generator", {}, None),
        ],
        usage=usage(542, 62),
        finish="tool_calls",
    ),
    Case(
        "anthropic/thinking-stream.sse",
        text_start="Here are the basic steps for safely crossing the street:",
        usage=usage(43, 282),
        thinking=[("This is a straightforward question about", "EvMCCkYICxgCKkCHP2cS", "")],
    ),
    Case(
        "anthropic/thinking-tool-use-stream.sse",
        "",
        calls=[("toolu_01825dXWLSoJwCst1qTsiWdb", "fixed_version", {}, None)],
        usage=usage(598, 92, reasoning_tokens=53),
        finish="tool_calls",
        thinking=[
            ("The user wants me to:\n1. Use the fixed_version tool", "EoQDCm0IDhgCKkCDzGs2", "")
        ],
    ),
    Case(
        "anthropic/redacted-thinking-stream.sse",
        text_start="I notice that you've sent what appears to be some kind of test string",
        usage=usage(92, 189),
        thinking=[("", "", "EqkECkYIBxgCKkA8AZ4n"), ("", "", "EtgBCkYIBxgCKkDQfGkw")],
    ),
    Case(
        "anthropic/structured-output-stream.sse",
        '{"title":"THE NAME OF THE WIND",'
        '"author":{"first_name":"Patrick","last_name":"Rothfuss"},"rating":7}',
        usage=usage(414, 36),
    ),
    Case(
        "anthropic/max-tokens-stream.sse",
        text_start="Here are all 50 U.S. states in alphabetical order:\n\n1. Alabama",
        usage=usage(15, 50),
        finish="length",
    ),
    Case(
        "anthropic/max-tokens-mid-tool-input-stream.sse",
        "I'll create a comprehensive tax guide for someone with multiple W2s and save it "
        "in a file called taxes.txt. Let me do that for you now.",
        calls=[
            (
                "toolu_01EKqbqmZrGRXy18eN7m9kvY",
                "make_file",
                {},
                '{"filename": "taxes.txt", "lines_of_text": [\n'
                '"# COMPREHENSIVE TAX GUIDE FOR INDIVIDUALS WITH MULTIPLE W-2s",\n'
                '"",\n"## INTRODUCTION",\n"",\n"Filing taxes',
            )
        ],
        usage=usage(450, 124),
        finish="length",
    ),
    Case(
        "anthropic/server-tool-use-stream.sse",
        text_start="I'll calculate that expression for you right away!",
        usage=usage(4714, 304),
        thinking=[("Let me calculate this mathematical expression", "EusBClsIDRgCKkBpzetW", "")],
    ),
]


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.file)
async def test_recorded_stream(case: Case) -> None:
    streamed = await replay_stream("anthropic", [fixture_bytes(case.file)])
    response, message = streamed.response, streamed.response.message
    if case.text is not None:
        assert message.content == case.text
    assert message.content.startswith(case.text_start)
    assert streamed.text == message.content
    assert [(c.id, c.name, c.arguments, c.raw_arguments) for c in message.tool_calls] == case.calls
    assert tokens(response.usage) == case.usage
    assert response.finish_reason == case.finish
    assert response.provider == "anthropic"
    rebuilt = streamed.calls_from_deltas()
    assert [(rebuilt[i][0], rebuilt[i][1]) for i in sorted(rebuilt)] == [
        (c[0], c[1]) for c in case.calls
    ]
    for index, call in enumerate(message.tool_calls):
        assert rebuilt[index][2] == (
            call.raw_arguments or (json.dumps(call.arguments) if call.arguments else "")
        )
    assert len(message.reasoning) == len(case.thinking)
    for reasoning, (text, signature, data) in zip(message.reasoning, case.thinking, strict=True):
        assert reasoning.provider == "anthropic"
        assert reasoning.text.startswith(text)
        assert (reasoning.signature or "").startswith(signature)
        assert (reasoning.redacted_data or "").startswith(data)
    assert streamed.reasoning == "".join(r.text for r in message.reasoning)
    assert streamed.signatures == [r.signature for r in message.reasoning if r.signature]


async def test_server_tool_blocks_are_not_agent_tool_calls() -> None:
    streamed = await replay_stream(
        "anthropic", [fixture_bytes("anthropic/server-tool-use-stream.sse")]
    )
    assert streamed.response.message.tool_calls == ()
    assert streamed.response.message.content.endswith("Final Answer: **-428,330,955.97745**")


# -- edge cases ------------------------------------------------------------------------------


def event(kind: str, **fields: Any) -> bytes:
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **fields})}\n\n".encode()


START = event(
    "message_start",
    message={"id": "msg_1", "model": "claude", "usage": {"input_tokens": 5, "output_tokens": 1}},
)
TEXT = event("content_block_start", index=0, content_block={"type": "text", "text": ""}) + event(
    "content_block_delta", index=0, delta={"type": "text_delta", "text": "Hi"}
)
END = event("message_delta", delta={"stop_reason": "end_turn"}, usage={"output_tokens": 9}) + event(
    "message_stop"
)


async def test_an_error_event_in_a_200_stream() -> None:
    overloaded = event("error", error={"type": "overloaded_error", "message": "Overloaded"})
    with pytest.raises(ProviderError, match="Overloaded") as caught:
        await replay_stream("anthropic", [START, TEXT, overloaded])
    assert (caught.value.code, caught.value.retryable, caught.value.status_code) == (
        "overloaded_error",
        True,
        None,
    )
    rate = event("error", error={"type": "rate_limit_error", "message": "Too fast"})
    with pytest.raises(RateLimitError):
        await replay_stream("anthropic", [START, rate])


async def test_a_stream_cut_before_message_stop_raises() -> None:
    with pytest.raises(ProviderError, match="before message_stop"):
        await replay_stream("anthropic", [START, TEXT])


async def test_data_that_is_not_json() -> None:
    with pytest.raises(ProviderError, match="not a JSON object"):
        await replay_stream("anthropic", [START, b'event: content_block_delta\ndata: {"type\n\n'])


async def test_usage_from_message_start_survives_a_delta_without_it() -> None:
    streamed = await replay_stream("anthropic", [START, TEXT, END])
    assert tokens(streamed.response.usage) == usage(5, 9)
    assert streamed.response.message.content == "Hi"


async def test_unknown_events_and_blocks_are_skipped() -> None:
    odd = (
        event("content_block_start", index=1, content_block={"type": "future_block", "x": 1})
        + event("content_block_delta", index=1, delta={"type": "future_delta"})
        + event(
            "content_block_delta", index=7, delta={"type": "input_json_delta", "partial_json": "{"}
        )
        + event("brand_new_event", anything=True)
        + b'event: ping\ndata: {"type": "ping"}\n\n'
    )
    streamed = await replay_stream("anthropic", [START, TEXT, odd, END])
    assert streamed.response.message.content == "Hi"
    assert streamed.response.message.tool_calls == ()


async def test_a_signature_split_over_deltas_is_joined() -> None:
    thinking = (
        event(
            "content_block_start",
            index=0,
            content_block={"type": "thinking", "thinking": "", "signature": ""},
        )
        + event("content_block_delta", index=0, delta={"type": "thinking_delta", "thinking": "hmm"})
        + event(
            "content_block_delta", index=0, delta={"type": "signature_delta", "signature": "AB"}
        )
        + event(
            "content_block_delta", index=0, delta={"type": "signature_delta", "signature": "CD"}
        )
    )
    streamed = await replay_stream("anthropic", [START, thinking, END])
    (reasoning,) = streamed.response.message.reasoning
    assert (reasoning.text, reasoning.signature) == ("hmm", "ABCD")
    assert [e for e in streamed.events if isinstance(e, ReasoningDelta)] == [
        ReasoningDelta(delta="hmm"),
        ReasoningDelta(signature="AB"),
        ReasoningDelta(signature="CD"),
    ]


# -- properties -----------------------------------------------------------------------------

_settings = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_settings
@given(case=st.sampled_from(CASES), sizes=st.lists(st.integers(1, 400), min_size=1, max_size=8))
def test_any_rechunking_parses_to_the_same_result(case: Case, sizes: list[int]) -> None:
    body = fixture_bytes(case.file)
    whole = run(replay_stream("anthropic", [body]))
    rechunked = run(replay_stream("anthropic", split(body, sizes)))
    assert event_dump(rechunked) == event_dump(whole)
    assert summary(rechunked.response) == summary(whole.response)


@_settings
@given(case=st.sampled_from(CASES), data=st.data())
def test_a_truncated_stream_raises_a_typed_error_or_is_already_complete(
    case: Case, data: st.DataObject
) -> None:
    body = fixture_bytes(case.file)
    cut = data.draw(st.integers(0, len(body) - 1), label="cut")
    whole = run(replay_stream("anthropic", [body]))
    try:
        truncated = run(replay_stream("anthropic", split(body[:cut], [101])))
    except ProviderError:
        return
    assert summary(truncated.response) == summary(whole.response)


@_settings
@given(case=st.sampled_from(CASES), data=st.data())
def test_a_corrupted_stream_fails_only_with_typed_errors(case: Case, data: st.DataObject) -> None:
    body = bytearray(fixture_bytes(case.file))
    for _ in range(data.draw(st.integers(1, 8), label="flips")):
        position = data.draw(st.integers(0, len(body) - 1))
        body[position] = data.draw(st.integers(0, 255))
    failure: TidemillError | None = None
    try:
        run(replay_stream("anthropic", [bytes(body)]))
    except TidemillError as error:
        failure = error
    assert failure is None or API_KEY not in str(failure)
