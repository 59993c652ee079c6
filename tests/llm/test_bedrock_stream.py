"""Bedrock ConverseStream and Converse: every recording in fixtures/providers/bedrock-converse."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from bedrock_replay import (
    ACCESS_KEY,
    EVENT_STREAM,
    SECRET_KEY,
    bedrock_model,
    delta,
    event,
    exception,
    finish,
    isolate_aws,
    message,
    replay_bedrock,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from llm_replay import (
    HELLO,
    Recorder,
    ReplayServer,
    Reply,
    event_dump,
    fixture_bytes,
    json_reply,
    run,
    split,
    stream_all,
    summary,
    tokens,
)

from tidemill.errors import (
    AuthenticationError,
    ContextWindowExceeded,
    MalformedToolCall,
    ProviderError,
    ProviderTimeout,
    RateLimitError,
    TidemillError,
)
from tidemill.llm import BedrockModel, RetryPolicy
from tidemill.llm.http._eventstream import EventStreamDecoder
from tidemill.types import ToolCallDelta, Usage


@pytest.fixture(autouse=True)
def _clean_aws(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    isolate_aws(monkeypatch, tmp_path)


def usage(inp: int, out: int, **extra: int) -> dict[str, Any]:
    return tokens(Usage(requests=1, input_tokens=inp, output_tokens=out, **extra))


@dataclass(frozen=True)
class Case:
    """What one recorded stream must parse to."""

    file: str
    model: str
    text: str
    calls: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)
    usage: dict[str, Any] = field(default_factory=dict)
    finish: str = "stop"
    reasoning: list[tuple[str, str | None, int, str | None, int]] = field(default_factory=list)
    """(text start, signature start, signature length, redacted start, redacted length)."""
    frames: int = 0


PARIS = (
    "The capital of France is Paris. Paris is not only the capital city but also the most "
    "populous city in France, and it is a major center for culture, commerce, fashion, and "
    "international diplomacy. Known for its historical landmarks, such as the Eiffel Tower, "
    'the Louvre Museum, and Notre-Dame Cathedral, Paris is often referred to as "The City of '
    'Light" or "The City of Love."'
)

CASES = [
    Case(
        "bedrock-converse/text-stream.bin",
        "us.amazon.nova-micro-v1:0",
        PARIS,
        usage=usage(13, 82),
        frames=33,
    ),
    Case(
        "bedrock-converse/tool-use-stream.bin",
        "us.amazon.nova-micro-v1:0",
        "<thinking> To find the temperature of the capital of France, I need to first determine "
        "the capital of France and then get the current temperature in that city. The capital "
        'of France is Paris. I will use the "get_temperature" tool to find the current '
        "temperature in Paris.</thinking>\n",
        calls=[("tooluse_lAG_zP8QRHmSYOwZzzaCqA", "get_temperature", {"city": "Paris"})],
        usage=usage(471, 91),
        finish="tool_calls",
        frames=26,
    ),
    Case(
        "bedrock-converse/thinking-stream.bin",
        "us.anthropic.claude-sonnet-4-20250514-v1:0",
        "Hello! It's nice to meet you. How can I help you today?",
        usage=usage(36, 73),
        reasoning=[
            ("The user has greeted me with a simple", "Eu0CCkgIBxABGAIqQJDccbDQ", 496, None, 0)
        ],
        frames=25,
    ),
    Case(
        "bedrock-converse/redacted-thinking-stream.bin",
        "us.anthropic.claude-3-7-sonnet-20250219-v1:0",
        "I notice you've sent what appears to be some kind of command or trigger string, but I "
        "don't respond to special codes or triggers. That string doesn't have any special "
        "meaning to me.\n\nIf you have a question you'd like to discuss or need assistance with "
        "something, I'd be happy to help in a straightforward conversation. What would you "
        "like to talk about today?",
        usage=usage(92, 253),
        reasoning=[
            ("", None, 0, "RXRrRUNrZ0lCeEFCR0FJcVFK", 1080),
            ("", None, 0, "RXFBRENrZ0lCeEFCR0FJcVFC", 752),
        ],
        frames=18,
    ),
    Case(
        "bedrock-converse/structured-output-stream.bin",
        "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
        '{"city":"Paris","country":"France","population":2161000}',
        usage=usage(210, 18),
        frames=9,
    ),
    Case(
        # The Nova code interpreter ran at Amazon (server_tool_use + its toolResult block):
        # only the client tool call is the agent's.
        "bedrock-converse/server-tool-and-tool-use-stream.bin",
        "us.amazon.nova-2-lite-v1:0",
        "",
        calls=[("tooluse_ptgCcZ0uQu-UUMz0abqoWw", "final_result", {"result": 7006652.0})],
        usage=usage(1002, 59),
        finish="tool_calls",
        frames=12,
    ),
    Case(
        # An empty text block first, then reasoning without a signature, then the answer.
        "bedrock-converse/empty-text-delta-reasoning-stream.bin",
        "openai.gpt-oss-120b-1:0",
        "Hello! How can I help you today?",
        usage=usage(70, 43),
        reasoning=[('The user just says "Hi". We need to respond', None, 0, None, 0)],
        frames=10,
    ),
]


def check(case: Case, streamed: Any) -> None:
    response, message_ = streamed.response, streamed.response.message
    assert message_.content == case.text
    assert streamed.text == message_.content
    assert [(c.id, c.name, c.arguments) for c in message_.tool_calls] == case.calls
    assert all(c.raw_arguments is None for c in message_.tool_calls)
    assert tokens(response.usage) == case.usage
    assert response.finish_reason == case.finish
    assert (response.provider, response.model) == ("bedrock", case.model)
    rebuilt = streamed.calls_from_deltas()
    assert sorted(rebuilt) == list(range(len(case.calls)))
    for index, call in enumerate(message_.tool_calls):
        call_id, name, arguments = rebuilt[index]
        assert (call_id, name, json.loads(arguments)) == (call.id, call.name, call.arguments)
    assert len(message_.reasoning) == len(case.reasoning)
    for reasoning, (text, signature, sig_len, redacted, red_len) in zip(
        message_.reasoning, case.reasoning, strict=True
    ):
        assert reasoning.provider == "bedrock"
        assert reasoning.text.startswith(text)
        assert (reasoning.signature or "").startswith(signature or "")
        assert len(reasoning.signature or "") == sig_len
        assert (reasoning.redacted_data or "").startswith(redacted or "")
        assert len(reasoning.redacted_data or "") == red_len
        if reasoning.redacted_data:  # encrypted reasoning arrives as base64 and stays so
            base64.b64decode(reasoning.redacted_data, validate=True)
    assert streamed.reasoning == "".join(r.text for r in message_.reasoning)
    assert streamed.signatures == [r.signature for r in message_.reasoning if r.signature]


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.file)
async def test_recorded_stream(case: Case) -> None:
    body = fixture_bytes(case.file)
    decoder = EventStreamDecoder()
    assert len(decoder.feed(body)) == case.frames  # every frame's CRCs are valid
    streamed = await replay_bedrock([body], model=case.model)
    check(case, streamed)
    assert streamed.response.usage.unpriced_requests + (streamed.response.usage.cost_usd > 0) == 1


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.file)
async def test_recorded_stream_over_real_sockets(server: ReplayServer, case: Case) -> None:
    body = fixture_bytes(case.file)
    server.replies.append(Reply(body, content_type=EVENT_STREAM))
    model = BedrockModel(
        case.model,
        region="eu-central-1",
        access_key_id=ACCESS_KEY,
        secret_access_key=SECRET_KEY,
        base_url=server.url,
        retry=RetryPolicy(max_retries=0),
    )
    assert model.http.owns_client
    try:
        streamed = await stream_all(model)
    finally:
        await model.aclose()
    check(case, streamed)
    expected = await replay_bedrock([body], model=case.model)
    assert summary(streamed.response) == summary(expected.response)
    assert event_dump(streamed) == event_dump(expected)
    (seen,) = server.seen
    quoted = case.model.replace(":", "%3A")
    assert seen.path == f"/model/{quoted}/converse-stream"
    assert seen.headers["accept"] == EVENT_STREAM
    assert seen.headers["authorization"].startswith(f"AWS4-HMAC-SHA256 Credential={ACCESS_KEY}/")
    assert "/eu-central-1/bedrock/aws4_request" in seen.headers["authorization"]
    assert seen.body == {"messages": [{"role": "user", "content": [{"text": "Hello"}]}]}


WHOLE = [
    (
        "bedrock-converse/text.json",
        "us.amazon.nova-micro-v1:0",
        "Hello! How can I assist you today? Whether you have questions, need information, or "
        "just want to chat, I'm here to help.",
        [],
        usage(7, 30),
        "stop",
        [],
    ),
    (
        "bedrock-converse/thinking-tool-use.json",
        "us.anthropic.claude-3-7-sonnet-20250219-v1:0",
        "I'll need to check what country you're from to answer that question.",
        [("tooluse_W9DaUFg4Tj2cRPpndqxWSg", "get_user_country", {})],
        usage(397, 130),
        "tool_calls",
        [("The user is asking for the largest city in their country.", "ErcBCkgIBhABGAIiQDYN")],
    ),
]


@pytest.mark.parametrize(
    ("file", "model", "text", "calls", "used", "finish_reason", "reasoning"),
    WHOLE,
    ids=[row[0] for row in WHOLE],
)
@pytest.mark.parametrize("over", ["mock", "server"])
async def test_recorded_whole_response(
    server: ReplayServer,
    over: str,
    file: str,
    model: str,
    text: str,
    calls: list[Any],
    used: dict[str, Any],
    finish_reason: str,
    reasoning: list[tuple[str, str]],
) -> None:
    body = fixture_bytes(file)
    if over == "mock":
        recorder = Recorder([json_reply(body)])
        bedrock = bedrock_model(recorder, model)
    else:
        server.replies.append(Reply(body, content_type="application/json"))
        bedrock = BedrockModel(
            model, region="us-east-1", api_key="bedrock-api-key", base_url=server.url
        )
    try:
        response = await bedrock.request(HELLO)
    finally:
        await bedrock.aclose()
    assert response.message.content == text
    assert [(c.id, c.name, c.arguments) for c in response.message.tool_calls] == calls
    assert tokens(response.usage) == used
    assert response.finish_reason == finish_reason
    assert [
        (r.text[: len(t)], (r.signature or "")[:20])
        for r, (t, _) in zip(response.message.reasoning, reasoning, strict=True)
    ] == reasoning
    if over == "mock":
        assert recorder.requests[0].url.raw_path.endswith(b"/converse")
        assert recorder.requests[0].headers["accept"] == "application/json"
    else:
        assert server.seen[0].headers["authorization"] == "Bearer bedrock-api-key"


# -- errors ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("over", ["mock", "server"])
async def test_an_invalid_model_id_is_a_400_provider_error(server: ReplayServer, over: str) -> None:
    body = fixture_bytes("bedrock-converse/error-400-invalid-model.json")
    if over == "mock":
        model = bedrock_model(
            Recorder([json_reply(body, status=400)]), "us.does-not-exist-model-v1:0"
        )
    else:
        server.replies.append(Reply(body, status=400, content_type="application/json"))
        model = BedrockModel(
            "us.does-not-exist-model-v1:0",
            region="us-east-1",
            access_key_id=ACCESS_KEY,
            secret_access_key=SECRET_KEY,
            base_url=server.url,
        )
    try:
        with pytest.raises(ProviderError, match="model identifier is invalid") as caught:
            await stream_all(model)
    finally:
        await model.aclose()
    error = caught.value
    assert type(error) is ProviderError
    assert error.status_code == 400 and not error.retryable and error.provider == "bedrock"
    assert SECRET_KEY not in str(error)


@pytest.mark.parametrize(
    ("status", "text", "kind"),
    [
        (403, "The security token included in the request is invalid.", AuthenticationError),
        (429, "Too many requests, please wait before trying again.", RateLimitError),
        (400, "Input is too long for requested model.", ContextWindowExceeded),
        (
            400,
            "The model returned the following errors: input length and `max_tokens` exceed "
            "context limit: 198726 + 8192 > 200000",
            ContextWindowExceeded,
        ),
        (408, "Model has timed out in processing the request.", ProviderTimeout),
        (503, "Bedrock is unable to process your request.", ProviderError),
    ],
)
@pytest.mark.parametrize("streaming", [False, True])
async def test_http_errors_are_typed(
    status: int, text: str, kind: type[ProviderError], streaming: bool
) -> None:
    model = bedrock_model(Recorder([json_reply({"message": text}, status=status)]))
    call = stream_all(model) if streaming else model.request(HELLO)
    with pytest.raises(kind) as caught:
        await call
    assert caught.value.status_code == status
    if kind is AuthenticationError:
        assert "AWS_ACCESS_KEY_ID" in str(caught.value)
    assert caught.value.retryable == (status in (408, 429, 503))


@pytest.mark.parametrize(
    ("kind", "error", "status", "retryable"),
    [
        ("throttlingException", RateLimitError, 429, True),
        ("modelStreamErrorException", ProviderError, 424, True),
        ("internalServerException", ProviderError, 500, True),
        ("serviceUnavailableException", ProviderError, 503, True),
        ("modelTimeoutException", ProviderTimeout, 408, True),
        ("validationException", ProviderError, 400, False),
    ],
)
async def test_exception_events_inside_a_200_stream(
    kind: str, error: type[ProviderError], status: int, retryable: bool
) -> None:
    body = [
        event("messageStart", {"role": "assistant"}),
        delta(0, text="Half an"),
        exception(kind, "Something went wrong."),
    ]
    with pytest.raises(error, match="Something went wrong") as caught:
        await replay_bedrock(body)
    assert type(caught.value) is error
    assert caught.value.status_code == status and caught.value.retryable == retryable
    assert caught.value.code == kind and kind in str(caught.value)


async def test_a_validation_exception_about_length_is_a_context_window_error() -> None:
    body = [exception("validationException", "Input is too long for requested model.")]
    with pytest.raises(ContextWindowExceeded):
        await replay_bedrock(body)


async def test_an_error_message_frame_is_a_provider_error() -> None:
    headers = {
        ":message-type": "error",
        ":error-code": "InternalFailure",
        ":error-message": "An internal error occurred.",
    }
    with pytest.raises(ProviderError, match="An internal error occurred") as caught:
        await replay_bedrock([message(headers, b"")])
    assert caught.value.code == "InternalFailure"


async def test_a_stream_that_ends_before_its_metadata_is_incomplete() -> None:
    start = [event("messageStart", {"role": "assistant"}), delta(0, text="Hi")]
    with pytest.raises(ProviderError, match="before messageStop"):
        await replay_bedrock(start)
    stop = finish()[0]
    with pytest.raises(ProviderError, match="before its metadata event"):
        await replay_bedrock([*start, stop])
    with pytest.raises(ProviderError, match="ended inside a message"):
        await replay_bedrock([*start, stop[:-3]])


async def test_a_payload_that_is_not_json() -> None:
    headers = {":message-type": "event", ":event-type": "contentBlockDelta"}
    with pytest.raises(ProviderError, match="not a JSON object") as caught:
        await replay_bedrock([message(headers, b"{oops")])
    assert caught.value.body == "{oops"


async def test_a_malformed_tool_use_asks_the_model_again() -> None:
    with pytest.raises(MalformedToolCall, match="malformed tool use") as caught:
        await replay_bedrock(finish("malformed_tool_use"))
    assert "follow its schema" in caught.value.feedback


# -- events, hand-built ----------------------------------------------------------------------------


def tool_start(index: int, call_id: str, name: str, **extra: str) -> bytes:
    return event(
        "contentBlockStart",
        {
            "contentBlockIndex": index,
            "start": {"toolUse": {"toolUseId": call_id, "name": name, **extra}},
        },
    )


async def test_parallel_tool_calls_with_arguments_split_over_deltas() -> None:
    body = [
        event("messageStart", {"role": "assistant"}),
        delta(0, text="Checking both."),
        event("contentBlockStop", {"contentBlockIndex": 0}),
        tool_start(1, "tooluse_a", "get_weather"),
        delta(1, toolUse={"input": '{"ci'}),
        tool_start(2, "tooluse_b", "get_time"),
        delta(1, toolUse={"input": 'ty": "Par'}),
        delta(2, toolUse={"input": '{"zone": "CET"}'}),
        delta(1, toolUse={"input": 'is"}'}),
        event("contentBlockStop", {"contentBlockIndex": 1}),
        event("contentBlockStop", {"contentBlockIndex": 2}),
        *finish("tool_use"),
    ]
    streamed = await replay_bedrock(body)
    calls = streamed.response.message.tool_calls
    assert [(c.id, c.name, c.arguments) for c in calls] == [
        ("tooluse_a", "get_weather", {"city": "Paris"}),
        ("tooluse_b", "get_time", {"zone": "CET"}),
    ]
    deltas = [e for e in streamed.events if isinstance(e, ToolCallDelta)]
    assert [(d.index, d.call_id, d.arguments_delta) for d in deltas] == [
        (0, "tooluse_a", ""),
        (0, None, '{"ci'),
        (1, "tooluse_b", ""),
        (0, None, 'ty": "Par'),
        (1, None, '{"zone": "CET"}'),
        (0, None, 'is"}'),
    ]
    assert streamed.response.finish_reason == "tool_calls"


async def test_cache_tokens_in_the_metadata_event() -> None:
    body = [
        delta(0, text="ok"),
        *finish(inputTokens=5, outputTokens=1, cacheReadInputTokens=1000, cacheWriteInputTokens=20),
    ]
    streamed = await replay_bedrock(body, model="us.anthropic.claude-sonnet-4-5-20250929-v1:0")
    assert tokens(streamed.response.usage) == usage(
        1025, 1, cache_read_tokens=1000, cache_write_tokens=20
    )


@pytest.mark.parametrize(
    ("reason", "finish_reason"),
    [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("tool_use", "tool_calls"),
        ("max_tokens", "length"),
        ("model_context_window_exceeded", "length"),
        ("guardrail_intervened", "content_filter"),
        ("content_filtered", "content_filter"),
        ("malformed_model_output", "error"),
        ("something_new", "unknown"),
    ],
)
async def test_stop_reasons(reason: str, finish_reason: str) -> None:
    streamed = await replay_bedrock([delta(0, text="x"), *finish(reason)])
    assert streamed.response.finish_reason == finish_reason


async def test_a_tool_input_without_a_start_is_a_call_without_a_name() -> None:
    with pytest.raises(MalformedToolCall, match="without a tool name"):
        await replay_bedrock([delta(0, toolUse={"input": "{}"}), *finish("tool_use")])


async def test_events_after_metadata_are_not_read() -> None:
    streamed = await replay_bedrock([delta(0, text="done"), *finish(), b"garbage after the end"])
    assert streamed.response.message.content == "done"


async def test_events_as_the_sdks_present_them_over_sse() -> None:
    # Gateways that re-frame a Bedrock stream as SSE send {"<event type>": payload} objects.
    from tidemill.llm._failures import ErrorReporter
    from tidemill.llm.bedrock._stream import ConverseStreamParser
    from tidemill.llm.http._sse import SSEDecoder

    framed = EventStreamDecoder().feed(fixture_bytes("bedrock-converse/tool-use-stream.bin"))
    lines = [
        "data: " + json.dumps({m.text_header(":event-type"): json.loads(m.payload)}) + "\n\n"
        for m in framed
    ]
    parser = ConverseStreamParser(ErrorReporter("bedrock"), "us.amazon.nova-micro-v1:0")
    for sse_event in SSEDecoder().feed("".join(lines).encode()):
        parser.feed(sse_event)
    expected = await replay_bedrock([fixture_bytes("bedrock-converse/tool-use-stream.bin")])
    assert parser.done
    parsed = parser.finish()  # not priced: pricing is the model's job, not the parser's
    assert tokens(parsed.usage) == tokens(expected.response.usage)
    assert summary(parsed) | {"usage": None} == summary(expected.response) | {"usage": None}
    throttled = ConverseStreamParser(ErrorReporter("bedrock"))
    (sse_event,) = SSEDecoder().feed(b'data: {"throttlingException": {"message": "slow"}}\n\n')
    with pytest.raises(RateLimitError, match="slow"):
        throttled.feed(sse_event)


async def test_a_whole_response_that_is_an_error_object() -> None:
    model = bedrock_model(Recorder([json_reply({"message": "Odd."})]))
    with pytest.raises(ProviderError, match="Odd"):
        await model.request(HELLO)
    model = bedrock_model(Recorder([json_reply({"output": {}})]))
    with pytest.raises(ProviderError, match="no output message"):
        await model.request(HELLO)


async def test_a_plain_json_answer_to_a_stream_request_is_an_error() -> None:
    reply = httpx.Response(200, json={"message": "not a stream"})
    with pytest.raises(ProviderError, match="plain JSON"):
        await stream_all(bedrock_model(Recorder([reply])))


# -- properties ------------------------------------------------------------------------------------

_settings = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_settings
@given(case=st.sampled_from(CASES), sizes=st.lists(st.integers(1, 400), min_size=1, max_size=8))
def test_any_rechunking_parses_to_the_same_result(case: Case, sizes: list[int]) -> None:
    body = fixture_bytes(case.file)
    whole = run(replay_bedrock([body], model=case.model))
    rechunked = run(replay_bedrock(split(body, sizes), model=case.model))
    assert event_dump(rechunked) == event_dump(whole)
    assert summary(rechunked.response) == summary(whole.response)


@_settings
@given(case=st.sampled_from(CASES), data=st.data())
def test_a_truncated_stream_raises_a_typed_error(case: Case, data: st.DataObject) -> None:
    body = fixture_bytes(case.file)
    cut = data.draw(st.integers(0, len(body) - 1), label="cut")
    # The metadata event is the last frame: any cut loses (part of) it.
    with pytest.raises(ProviderError):
        run(replay_bedrock(split(body[:cut], [97]), model=case.model))


@_settings
@given(case=st.sampled_from(CASES), data=st.data())
def test_a_corrupted_stream_fails_only_with_typed_errors(case: Case, data: st.DataObject) -> None:
    body = bytearray(fixture_bytes(case.file))
    positions = st.lists(st.integers(0, len(body) - 1), min_size=1, max_size=8, unique=True)
    for position in data.draw(positions, label="positions"):
        body[position] ^= data.draw(st.integers(1, 255))
    failure: TidemillError | None = None
    try:
        run(replay_bedrock([bytes(body)], model=case.model))
    except TidemillError as error:
        failure = error
    # Every byte is covered by a CRC, so a flipped one is always caught.
    assert isinstance(failure, ProviderError)
    assert SECRET_KEY not in str(failure) and ACCESS_KEY not in str(failure)


@pytest.mark.parametrize(
    "name", ["corrupted_header_len", "corrupted_headers", "corrupted_length", "corrupted_payload"]
)
@pytest.mark.parametrize("over", ["mock", "server"])
async def test_the_negative_vectors_through_the_model(
    server: ReplayServer, name: str, over: str
) -> None:
    body = fixture_bytes(f"eventstream-vectors/negative-{name}.bin")
    if over == "mock":
        with pytest.raises(ProviderError, match="checksum mismatch"):
            await replay_bedrock([body])
        return
    server.replies.append(Reply(body, content_type=EVENT_STREAM))
    model = BedrockModel(
        "m", region="us-east-1", api_key="k", base_url=server.url, retry=RetryPolicy(max_retries=0)
    )
    try:
        with pytest.raises(ProviderError, match="checksum mismatch") as caught:
            await stream_all(model)
    finally:
        await model.aclose()
    assert caught.value.retryable
