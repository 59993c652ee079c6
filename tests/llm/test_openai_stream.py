"""Chat Completions streams: recorded OpenAI and OpenAI-compatible traffic, and edge cases."""

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

from tidemill.errors import MalformedToolCall, ProviderError, TidemillError
from tidemill.llm._failures import ErrorReporter
from tidemill.llm.http._sse import SSEDecoder
from tidemill.llm.openai._chat_stream import ChatStreamParser, parse_chat_completion
from tidemill.types import Usage


@dataclass(frozen=True)
class Case:
    """What one recorded stream must parse to."""

    file: str
    provider: str
    text: str | None = None
    """The exact answer text; `None` to check only `text_start`."""
    text_start: str = ""
    calls: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)
    usage: dict[str, int] = field(default_factory=dict)
    finish: str = "stop"
    reasoning_start: str | None = None
    signature_start: str | None = None


def usage(inp: int, out: int, **extra: int) -> dict[str, int]:
    return tokens(Usage(requests=1, input_tokens=inp, output_tokens=out, **extra))


CASES = [
    Case("openai-chat/text-stream.sse", "openai", "4200 + 42 equals 4242.", usage=usage(16, 10)),
    Case(
        "openai-chat/tool-call-stream.sse",
        "openai",
        "",
        calls=[
            (
                "call_CTf1nWJLqSeRgDqaCG27xZ74",
                "get_weather",
                {"city": "San Francisco", "state": "CA"},
            )
        ],
        usage=usage(48, 19),
        finish="tool_calls",
    ),
    Case(
        "openai-chat/parallel-tool-calls-stream.sse",
        "openai",
        "",
        calls=[
            ("call_M26z19sncd7b4LBgzKRRbaUE", "secret_retrieval_tool", {"password": "mellon"}),
            ("call_KPXe5NX7IcKkaBUhc6dto2QV", "secret_retrieval_tool", {"password": "radiance"}),
        ],
        usage=usage(75, 53),
        finish="tool_calls",
    ),
    Case(
        "openai-chat/parallel-tool-calls-two-functions-stream.sse",
        "openai",
        "",
        calls=[
            (
                "call_JMW1whyEaYG438VE1OIflxA2",
                "GetWeatherArgs",
                {"city": "Edinburgh", "country": "GB", "units": "c"},
            ),
            (
                "call_DNYTawLBoN8fj3KN6qU9N1Ou",
                "get_stock_price",
                {"ticker": "AAPL", "exchange": "NASDAQ"},
            ),
        ],
        usage=usage(149, 60),
        finish="tool_calls",
    ),
    Case(
        "openai-chat/structured-output-stream.sse",
        "openai",
        '{"city":"San Francisco","temperature":61,"units":"f"}',
        usage=usage(79, 14),
    ),
    Case(
        "openai-chat/refusal-stream.sse",
        "openai",
        "I'm sorry, I can't assist with that request.",
        usage=usage(79, 11),
        finish="content_filter",
    ),
    Case("openai-chat/max-tokens-stream.sse", "openai", '{"', usage=usage(79, 1), finish="length"),
    Case(
        "openai-chat/multiple-choices-stream.sse",
        "openai",
        '{"city":"San Francisco","temperature":65,"units":"f"}',
        usage=usage(79, 42),
    ),
    Case(
        "openai-chat/gateway-tool-index-1-stream.sse",
        "openai-compatible",
        "Reading it.",
        calls=[("toolu_sanitized", "read_file", {"path": "a.txt"})],
        usage=usage(0, 0, unreported_requests=1),  # the gateway sent no usage
        finish="tool_calls",
    ),
    Case(
        "mistral/thinking-stream.sse",
        "mistral",
        text_start="To cross the street safely, follow these steps:",
        usage=usage(10, 232),
        reasoning_start="Okay, the user is asking how to cross the street.",
    ),
    Case(
        "mistral/incremental-tool-call-stream.chunks.jsonl",
        "mistral",
        "",
        calls=[
            ("chatcmpl-tool-9f149c74c42f265b", "webSearchTool", {"query": "current Berlin weather"})
        ],
        usage=usage(171, 14, cache_read_tokens=128),
        finish="tool_calls",
    ),
    Case(
        "groq/reasoning-text-stream.sse",
        "groq",
        "The tool returned the expected result for the valid call.",
        usage=usage(339, 58, reasoning_tokens=38),
        reasoning_start="The user wants to test error handling",
    ),
    Case(
        "groq/tool-call-stream.sse",
        "groq",
        "",
        calls=[
            (
                "fc_bfb39741-3748-4def-9886-a93fc9c64a90",
                "get_something_by_name",
                {"name": "example"},
            )
        ],
        usage=usage(304, 49, reasoning_tokens=23),
        finish="tool_calls",
        reasoning_start="We need to call the function with correct",
    ),
    Case(
        "deepseek/reasoning-stream.sse",
        "deepseek",
        "Hello there! 😊 How can I help you today?",
        usage=usage(6, 212, reasoning_tokens=198),
        reasoning_start='Hmm, the user just said "Hello".',
    ),
    Case(
        "deepseek/reasoning-tool-call-stream.chunks.jsonl",
        "deepseek",
        "",
        calls=[("call_00_ioIn7yN9p1ZOMNpDLwd4MgAF", "weather", {"location": "San Francisco"})],
        usage=usage(339, 83, cache_read_tokens=320, reasoning_tokens=39),
        finish="tool_calls",
        reasoning_start="The user is asking for the weather in San Francisco.",
    ),
    Case("openrouter/text-stream.sse", "openrouter", "Hello!", usage=usage(12, 2)),
    Case(
        "openrouter/reasoning-stream.sse",
        "openrouter",
        "2 + 2 = 4",
        usage=usage(43, 36, reasoning_tokens=13),
        reasoning_start="This is a simple arithmetic question. 2+2 equals 4.",
        signature_start="Et0BCkgIChACGAIqQA2s",
    ),
    Case(
        "openrouter/tool-call-repeated-delta-stream.sse",
        "openrouter",
        "",
        calls=[("0", "llm_version", {})],
        usage=usage(57, 17),
        finish="tool_calls",
    ),
    Case(
        "openrouter/tool-call-null-args-stream.sse",
        "openrouter",
        "",
        calls=[("0", "llm_version", {})],
        usage=usage(57, 17),
        finish="tool_calls",
    ),
]


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.file)
async def test_recorded_stream(case: Case) -> None:
    streamed = await replay_stream(case.provider, [fixture_bytes(case.file)])
    response, message = streamed.response, streamed.response.message
    if case.text is not None:
        assert message.content == case.text
    assert message.content.startswith(case.text_start)
    assert streamed.text == message.content
    assert [(c.id, c.name, c.arguments) for c in message.tool_calls] == case.calls
    assert all(c.raw_arguments is None for c in message.tool_calls)
    assert tokens(response.usage) == case.usage
    assert response.finish_reason == case.finish
    assert response.provider == case.provider
    # The deltas alone rebuild every call, in order, with the same ids and arguments.
    rebuilt = streamed.calls_from_deltas()
    assert sorted(rebuilt) == list(range(len(case.calls)))
    for index, (call_id, name, arguments) in enumerate(case.calls):
        delta_id, delta_name, delta_args = rebuilt[index]
        assert (delta_id, delta_name) == (call_id, name)
        assert (json.loads(delta_args) if delta_args.strip() else {}) == arguments
    if case.reasoning_start is None:
        assert message.reasoning == ()
    else:
        (reasoning,) = message.reasoning
        assert reasoning.text.startswith(case.reasoning_start)
        assert reasoning.text == streamed.reasoning
        assert reasoning.provider == case.provider
        if case.signature_start is not None:
            assert reasoning.signature is not None
            assert reasoning.signature.startswith(case.signature_start)
            assert streamed.signatures == [reasoning.signature]


async def test_groq_rejected_tool_call_becomes_malformed_tool_call() -> None:
    with pytest.raises(MalformedToolCall) as caught:
        await replay_stream("groq", [fixture_bytes("groq/error-in-stream.sse")])
    cause = caught.value.__cause__
    assert isinstance(cause, ProviderError)
    assert (cause.code, cause.status_code) == ("tool_use_failed", 400)
    assert "did not match the tool's schema" in caught.value.feedback


async def test_error_object_in_a_200_stream_is_a_provider_error() -> None:
    with pytest.raises(ProviderError, match="Token limit reached") as caught:
        await replay_stream("openrouter", [fixture_bytes("openrouter/error-in-stream.sse")])
    assert caught.value.status_code == 400 and caught.value.provider == "openrouter"


# -- edge cases, hand-built ------------------------------------------------------------------


def chunk(delta: dict[str, Any] | None = None, *, finish: str | None = None, **top: Any) -> bytes:
    body: dict[str, Any] = {"id": "c1", "model": "m"}
    body["choices"] = (
        [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
    )
    body.update(top)
    return b"data: " + json.dumps(body).encode() + b"\n\n"


def call(
    index: int | None, *, id: str | None = None, name: str | None = None, args: Any = ""
) -> dict[str, Any]:
    fragment: dict[str, Any] = {"function": {"arguments": args}}
    if index is not None:
        fragment["index"] = index
    if id is not None:
        fragment["id"] = id
        fragment["type"] = "function"
    if name is not None:
        fragment["function"]["name"] = name
    return fragment


DONE = b"data: [DONE]\n\n"
USAGE = chunk(None, usage={"prompt_tokens": 3, "completion_tokens": 4})


async def test_interleaved_parallel_fragments_are_reassembled_by_index() -> None:
    body = [
        chunk({"tool_calls": [call(0, id="a", name="first"), call(1, id="b", name="second")]}),
        chunk({"tool_calls": [call(1, args='{"y"')]}),
        chunk({"tool_calls": [call(0, args='{"x"')]}),
        chunk({"tool_calls": [call(1, args=": 2}")]}),
        chunk({"tool_calls": [call(0, args=": 1}")]}),
        chunk({}, finish="tool_calls"),
        USAGE,
        DONE,
    ]
    streamed = await replay_stream("openai", body)
    assert [(c.id, c.name, c.arguments) for c in streamed.response.message.tool_calls] == [
        ("a", "first", {"x": 1}),
        ("b", "second", {"y": 2}),
    ]
    assert streamed.calls_from_deltas() == {
        0: ("a", "first", '{"x": 1}'),
        1: ("b", "second", '{"y": 2}'),
    }


async def test_every_call_numbered_zero_but_with_new_ids() -> None:
    body = [
        chunk({"tool_calls": [call(0, id="a", name="one", args='{"n": 1}')]}),
        chunk({"tool_calls": [call(0, id="b", name="two", args='{"n": 2}')]}),
        chunk({}, finish="tool_calls"),
        DONE,
    ]
    calls = (await replay_stream("ollama", body)).response.message.tool_calls
    assert [(c.id, c.name, c.arguments) for c in calls] == [
        ("a", "one", {"n": 1}),
        ("b", "two", {"n": 2}),
    ]


async def test_fragments_without_an_index() -> None:
    body = [
        chunk({"tool_calls": [call(None, id="a", name="one", args='{"n"')]}),
        chunk({"tool_calls": [call(None, args=": 1}")]}),
        chunk({"tool_calls": [call(None, id="b", name="two", args="{}")]}),
        chunk({}, finish="stop"),
        DONE,
    ]
    response = (await replay_stream("vllm", body)).response
    assert [(c.id, c.arguments) for c in response.message.tool_calls] == [
        ("a", {"n": 1}),
        ("b", {}),
    ]
    assert response.finish_reason == "tool_calls"  # "stop" with calls is normalised


@pytest.mark.parametrize(
    ("args", "raw"),
    [('{"a": ', '{"a": '), ("[1, 2]", "[1, 2]"), ("not json", "not json"), ("  ", None)],
)
async def test_arguments_that_are_not_a_json_object_are_kept_raw(
    args: str, raw: str | None
) -> None:
    body = [
        chunk({"tool_calls": [call(0, id="a", name="f", args=args)]}, finish="tool_calls"),
        DONE,
    ]
    (tool_call,) = (await replay_stream("openai", body)).response.message.tool_calls
    assert (tool_call.arguments, tool_call.raw_arguments) == ({}, raw)


async def test_arguments_sent_as_an_object() -> None:
    body = [
        chunk({"tool_calls": [call(0, id="a", name="f", args={"k": [1]})]}, finish="tool_calls"),
        DONE,
    ]
    (tool_call,) = (await replay_stream("ollama", body)).response.message.tool_calls
    assert tool_call.arguments == {"k": [1]}


async def test_a_call_without_a_name_is_malformed() -> None:
    body = [chunk({"tool_calls": [call(0, id="a", args="{}")]}, finish="tool_calls"), DONE]
    with pytest.raises(MalformedToolCall, match="without a tool name"):
        await replay_stream("openai", body)


async def test_finish_reason_error_is_raised() -> None:
    body = [chunk({"content": "par"}), chunk({}, finish="error"), DONE]
    with pytest.raises(ProviderError, match="failed mid-answer"):
        await replay_stream("openrouter", body)


async def test_a_named_error_event_with_plain_text() -> None:
    with pytest.raises(ProviderError, match="upstream exploded"):
        await replay_stream(
            "openai-compatible",
            [chunk({"content": "x"}), b"event: error\ndata: upstream exploded\n\n"],
        )


async def test_data_that_is_not_json() -> None:
    with pytest.raises(ProviderError, match="not a JSON object") as caught:
        await replay_stream("openai", [chunk({"content": "x"}), b"data: {oops\n\n"])
    assert caught.value.body == "{oops"


async def test_a_stream_cut_before_done_raises() -> None:
    with pytest.raises(ProviderError, match="no \\[DONE\\]"):
        await replay_stream("openai", [chunk({"content": "half an ans"})])
    with pytest.raises(ProviderError, match="no \\[DONE\\]"):
        # Finished, but the usage chunk never came: the usage would be lost.
        await replay_stream("openai", [chunk({"content": "x"}, finish="stop")])


async def test_a_stream_that_lost_only_done_is_complete() -> None:
    streamed = await replay_stream("openai", [chunk({"content": "x"}, finish="stop"), USAGE])
    assert streamed.response.usage.output_tokens == 4


async def test_an_empty_body_raises() -> None:
    with pytest.raises(ProviderError, match="ended before its last event"):
        await replay_stream("openai", [])


async def test_reading_stops_at_done() -> None:
    body = [chunk({"content": "hi"}, finish="stop"), USAGE, DONE, b"data: {garbage after done\n\n"]
    assert (await replay_stream("openai", body)).response.message.content == "hi"


CALL = call(0, id="a", name="f", args="{}")
ENDS = {
    **{case.file: [fixture_bytes(case.file)] for case in CASES},
    "stop with calls": [chunk({"tool_calls": [CALL]}), chunk({}, finish="stop"), USAGE, DONE],
    "no reason, calls": [chunk({"tool_calls": [CALL]}), DONE],
    "no reason, text": [chunk({"content": "x"}), USAGE, DONE],
    "refusal": [chunk({"refusal": "No."}, finish="stop"), USAGE, DONE],
    "refusal, then calls": [chunk({"refusal": "No.", "tool_calls": [CALL]}), DONE],
    "refusal, length": [chunk({"refusal": "No."}, finish="length"), DONE],
    "unknown reason": [chunk({"content": "x"}, finish="what"), USAGE, DONE],
    "lost [DONE]": [chunk({"content": "x"}, finish="stop"), USAGE],
    "cut": [chunk({"content": "x"}, finish="stop")],
    "nameless call": [chunk({"tool_calls": [call(0, id="a", args="{}")]}), DONE],
}


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("stop with calls", "tool_calls"),
        ("no reason, calls", "tool_calls"),
        ("no reason, text", "unknown"),
        ("refusal", "content_filter"),
        ("refusal, then calls", "content_filter"),
        ("refusal, length", "length"),
        ("unknown reason", "unknown"),
    ],
)
async def test_the_finish_reason_of_an_unusual_end(name: str, reason: str) -> None:
    assert (await replay_stream("openai", ENDS[name])).response.finish_reason == reason


@pytest.mark.parametrize("body", ENDS.values(), ids=ENDS.keys())
def test_end_gives_the_finish_reason_and_usage_finish_would(body: list[bytes]) -> None:
    # What the proxy's relay closes a stream with instead of the whole response.
    def outcome(end: bool) -> tuple[object, ...]:
        parser = ChatStreamParser(ErrorReporter("openai"))
        decoder = SSEDecoder()
        try:
            for event in [e for piece in body for e in decoder.feed(piece)] + decoder.close():
                parser.feed(event)
            if end:
                ending = parser.end()
                return ending.finish_reason, ending.usage
            response = parser.finish()
        except TidemillError as error:
            return type(error), str(error)
        return response.finish_reason, response.usage

    assert outcome(end=True) == outcome(end=False)


async def test_deepseek_reasoning_round_trips_into_the_next_request() -> None:
    from llm_replay import Recorder, chat_model, sse

    from tidemill.llm import ModelRequest
    from tidemill.types import Message

    first = await replay_stream(
        "deepseek", [fixture_bytes("deepseek/reasoning-tool-call-stream.chunks.jsonl")]
    )
    recorder = Recorder([sse(chunk({"content": "ok"}, finish="stop") + USAGE + DONE)])
    model = chat_model("deepseek", recorder)
    history = [Message.user("Weather in SF?"), first.response.message]
    [_ async for _ in model.stream(ModelRequest(history))]
    sent = recorder.bodies()[0]["messages"][1]
    assert sent["reasoning_content"] == first.response.message.reasoning[0].text
    assert sent["tool_calls"][0]["id"] == "call_00_ioIn7yN9p1ZOMNpDLwd4MgAF"
    await model.aclose()


# -- properties -----------------------------------------------------------------------------

STREAMS = [case for case in CASES if case.file.endswith(".sse")]
_settings = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_settings
@given(case=st.sampled_from(STREAMS), sizes=st.lists(st.integers(1, 400), min_size=1, max_size=8))
def test_any_rechunking_parses_to_the_same_result(case: Case, sizes: list[int]) -> None:
    body = fixture_bytes(case.file)
    whole = run(replay_stream(case.provider, [body]))
    rechunked = run(replay_stream(case.provider, split(body, sizes)))
    assert event_dump(rechunked) == event_dump(whole)
    assert summary(rechunked.response) == summary(whole.response)


@_settings
@given(case=st.sampled_from(STREAMS), data=st.data())
def test_a_truncated_stream_raises_a_typed_error_or_is_already_complete(
    case: Case, data: st.DataObject
) -> None:
    body = fixture_bytes(case.file)
    cut = data.draw(st.integers(0, len(body) - 1), label="cut")
    whole = run(replay_stream(case.provider, [body]))
    try:
        truncated = run(replay_stream(case.provider, split(body[:cut], [97])))
    except ProviderError:
        return
    # Only framing after the last needed event was lost.
    assert summary(truncated.response) == summary(whole.response)


@_settings
@given(case=st.sampled_from(STREAMS), data=st.data())
def test_a_corrupted_stream_fails_only_with_typed_errors(case: Case, data: st.DataObject) -> None:
    body = bytearray(fixture_bytes(case.file))
    for _ in range(data.draw(st.integers(1, 8), label="flips")):
        position = data.draw(st.integers(0, len(body) - 1))
        body[position] = data.draw(st.integers(0, 255))
    failure: TidemillError | None = None
    try:
        run(replay_stream(case.provider, [bytes(body)]))
    except TidemillError as error:
        failure = error
    assert failure is None or API_KEY not in str(failure)


# -- log probabilities ---------------------------------------------------------------------------


def token(text: str, logprob: float, *alternatives: tuple[str, float]) -> dict[str, Any]:
    """One token's entry of Chat Completions' `logprobs.content`."""
    top = [{"token": t, "logprob": p, "bytes": list(t.encode())} for t, p in alternatives]
    return {"token": text, "logprob": logprob, "bytes": list(text.encode()), "top_logprobs": top}


def scored(delta: dict[str, Any], logprobs: Any, *, finish: str | None = None) -> bytes:
    choice = {"index": 0, "delta": delta, "logprobs": logprobs, "finish_reason": finish}
    return (
        b"data: " + json.dumps({"id": "c1", "model": "m", "choices": [choice]}).encode() + b"\n\n"
    )


HI_TOKENS = [token("Hi", -0.002, ("Hi", -0.002), ("Hello", -6.3))]
BANG_TOKENS = [token("!", -0.01, ("!", -0.01), (".", -4.7))]
HI: dict[str, Any] = {"content": HI_TOKENS, "refusal": None}
BANG: dict[str, Any] = {"content": BANG_TOKENS, "refusal": None}


async def test_log_probabilities_ride_on_their_text_and_are_joined_on_the_response() -> None:
    body = [
        scored({"role": "assistant", "content": "", "refusal": None}, None),
        scored({"content": "Hi"}, HI),
        scored({"content": "!"}, BANG),
        scored({}, None, finish="stop"),
        USAGE,
        DONE,
    ]
    streamed = await replay_stream("openai", body)
    texts = [event for event in streamed.events if event.type == "text"]
    assert [(event.delta, event.logprobs) for event in texts] == [("Hi", HI), ("!", BANG)]
    assert streamed.response.logprobs == {"content": HI_TOKENS + BANG_TOKENS, "refusal": None}
    assert HI["content"] == [token("Hi", -0.002, ("Hi", -0.002), ("Hello", -6.3))]  # not changed
    assert streamed.response.model_dump()["logprobs"] == streamed.response.logprobs


async def test_log_probabilities_without_text_come_on_an_empty_text_delta() -> None:
    """A server that scores tool-call tokens too: the scores are kept, after the call's delta."""
    scores = {"content": [token("get", -0.1)]}
    body = [
        scored({"tool_calls": [call(0, id="a", name="get", args="{}")]}, scores),
        scored({}, None, finish="tool_calls"),
        USAGE,
        DONE,
    ]
    streamed = await replay_stream("vllm", body)
    assert [event.type for event in streamed.events[:-1]] == ["tool_call_delta", "text"]
    assert streamed.events[1].model_dump() == {"type": "text", "delta": "", "logprobs": scores}
    assert streamed.response.logprobs == scores
    assert streamed.response.message.content == ""


def test_a_whole_answer_keeps_its_log_probabilities_as_they_came() -> None:
    payload: dict[str, object] = {
        "id": "chatcmpl-1",
        "model": "gpt-4o",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "Hi"},
                "logprobs": HI,
                "finish_reason": "stop",
            }
        ],
    }
    response = parse_chat_completion(payload, ErrorReporter("openai"))
    assert response.logprobs is HI  # the provider's own object, not a copy
    assert response.message.content == "Hi"


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.file)
async def test_an_answer_without_log_probabilities_has_none_anywhere(case: Case) -> None:
    """Recorded traffic (`"logprobs": null` on every chunk): nothing new in events or JSON."""
    streamed = await replay_stream(case.provider, [fixture_bytes(case.file)])
    assert all(event.logprobs is None for event in streamed.events if event.type == "text")
    assert streamed.response.logprobs is None
    assert "logprobs" not in streamed.response.model_dump()
    assert all("logprobs" not in dumped for dumped in event_dump(streamed))
