"""Gemini streams and whole responses: every recording in fixtures/providers/gemini, and more."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from llm_replay import (
    API_KEY,
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
from replay_models import (
    TOKEN,
    Factory,
    array_as_sse,
    gemini_model,
    replay,
    vertex_model,
)

from tidemill.errors import (
    AuthenticationError,
    ContextWindowExceeded,
    MalformedToolCall,
    ProviderError,
    RateLimitError,
    TidemillError,
)
from tidemill.llm import GeminiModel, RetryPolicy, VertexGeminiModel
from tidemill.llm.google._stream import GENERATED_ID_PREFIX, is_generated_id
from tidemill.types import ToolCallDelta, Usage


def usage(inp: int, out: int, **extra: int) -> dict[str, int]:
    return tokens(Usage(requests=1, input_tokens=inp, output_tokens=out, **extra))


@dataclass(frozen=True)
class Case:
    """What one recorded stream must parse to."""

    file: str
    text: str | None = None
    text_start: str = ""
    calls: list[tuple[str, dict[str, Any], str | None]] = field(default_factory=list)
    """(name, arguments, start of the call's thought signature)."""
    usage: dict[str, int] = field(default_factory=dict)
    finish: str = "stop"
    model: str = "gemini-2.5-flash"
    thought_start: str | None = None
    text_signature_start: str | None = None
    vertex: bool = False


CASES = [
    Case(
        "gemini/text-stream.sse",
        "To find the sum of 4200 + 42, we can align the numbers by their place values:\n\n"
        "  4200\n+   42\n------\n  4242\n\nSo, 4200 + 42 = **4242**.",
        # candidatesTokenCount is 50 then 63: the last value, not the sum (113)
        usage=usage(13, 63 + 75, reasoning_tokens=75),
    ),
    Case(
        "gemini/function-call-stream.sse",
        "",
        calls=[("get_country", {}, "EpwICpkIAXLI2nxlU6gs")],
        usage=usage(29, 10 + 202, reasoning_tokens=202),
        finish="tool_calls",  # Gemini said STOP
        model="gemini-3-pro-preview",
    ),
    Case(
        "gemini/parallel-function-calls-stream.sse",
        "",
        calls=[
            ("secret_retrieval_tool", {"password": "mellon"}, "CikB0e2Kbw5tJ9dw"),
            ("secret_retrieval_tool", {"password": "radiance"}, None),
        ],
        usage=usage(70, 40 + 61, reasoning_tokens=61),
        finish="tool_calls",
    ),
    Case(
        "gemini/max-tokens-stream.sse",
        "Here are all 50 U.S.",
        usage=usage(9, 10 + 38, reasoning_tokens=38),
        finish="length",
    ),
    Case(
        "gemini/structured-output-stream.sse",
        '{"title":"THE NAME OF THE WIND","author":{"first_name":"Patrick",'
        '"last_name":"Rothfuss"},"rating":7}',
        usage=usage(11, 29 + 264, reasoning_tokens=264),
    ),
    Case(
        "gemini/thinking-stream.sse",
        "3",
        usage=usage(30, 1947, reasoning_tokens=1947),  # no candidatesTokenCount at all
        thought_start="**Analyzing Prime Substrings**\n\nOkay, so I'm starting",
    ),
    Case(
        "gemini/vertex-text-stream.sse",
        "OK",
        usage=usage(5, 1 + 100, reasoning_tokens=100),
        model="gemini-3-flash-preview",
        text_signature_start="CiQBjz1rX+z7CAOCNB0a",
        vertex=True,
    ),
    Case(
        "gemini/vertex-streamed-function-call-args.chunks.jsonl",
        "",
        calls=[
            ("getWeather", {"location": "Boston"}, "CiMBjz1rX25KieIB4d4A"),
            ("getWeather", {"location": "San Francisco"}, None),
        ],
        usage=usage(26, 23 + 132, reasoning_tokens=132),
        finish="tool_calls",
        model="gemini-3.1-pro-preview",
        vertex=True,
    ),
]


def factory(case: Case) -> Factory:
    return vertex_model if case.vertex else gemini_model


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.file)
async def test_recorded_stream(case: Case) -> None:
    streamed = await replay(factory(case), [fixture_bytes(case.file)])
    check(case, streamed)


def check(case: Case, streamed: Any) -> None:
    response, message = streamed.response, streamed.response.message
    if case.text is not None:
        assert message.content == case.text
    assert message.content.startswith(case.text_start)
    assert streamed.text == message.content
    assert [(c.name, c.arguments) for c in message.tool_calls] == [
        (name, args) for name, args, _ in case.calls
    ]
    for call, (_, _, signature) in zip(message.tool_calls, case.calls, strict=True):
        assert (call.signature or "")[: len(signature or "")] == (signature or "")
        assert (call.signature is None) == (signature is None)
        # Gemini gives no ids: each call gets a stable one, from the response id and its place
        assert (
            call.id
            == f"{GENERATED_ID_PREFIX}{response.response_id}-{message.tool_calls.index(call)}"
        )
        assert is_generated_id(call.id) and call.raw_arguments is None
    assert tokens(response.usage) == case.usage
    assert response.finish_reason == case.finish
    assert response.model == case.model
    assert response.provider == ("vertex" if case.vertex else "gemini")
    rebuilt = streamed.calls_from_deltas()
    assert sorted(rebuilt) == list(range(len(case.calls)))
    for index, call in enumerate(message.tool_calls):
        call_id, name, arguments = rebuilt[index]
        assert (call_id, name, json.loads(arguments)) == (call.id, call.name, call.arguments)
    thoughts = [r for r in message.reasoning if r.text]
    signed_text = [r for r in message.reasoning if not r.text]
    if case.thought_start is None:
        assert thoughts == []
    else:
        (thought,) = thoughts
        assert thought.text.startswith(case.thought_start)
        assert thought.text == streamed.reasoning
        assert thought.provider == "gemini"
    if case.text_signature_start is None:
        assert signed_text == []
    else:
        (signed,) = signed_text
        assert signed.signature is not None
        assert signed.signature.startswith(case.text_signature_start)
        assert streamed.signatures == [signed.signature]


async def test_the_json_array_form_of_stream_generate_content() -> None:
    # Served without ?alt=sse this body is one JSON array; its elements are the same
    # chunks, so they are replayed here as SSE events.
    streamed = await replay(gemini_model, [array_as_sse("gemini/text-stream-json-array.json")])
    message = streamed.response.message
    assert message.content == "Scoop"
    thought, signed = message.reasoning
    assert thought.text.startswith("**Considering the Constraint**")
    assert thought.signature is None
    assert signed.text == "" and (signed.signature or "").startswith("Eq0JCqoJARFNMg+W/PqA")
    assert tokens(streamed.response.usage) == usage(11, 2 + 291, reasoning_tokens=291)
    assert streamed.response.model == "gemini-3.6-flash"


WHOLE = [
    (
        "gemini/text.json",
        "To calculate 4200 + 42:",
        [],
        usage(13, 77 + 25, reasoning_tokens=25),
        "stop",
    ),
    (
        "gemini/parallel-function-calls.json",
        "",
        [
            ("secret_retrieval_tool", {"password": "mellon"}, "CtICAdHtim9BiyFrJTR8"),
            ("secret_retrieval_tool", {"password": "radiance"}, None),
        ],
        usage(70, 40 + 76, reasoning_tokens=76),
        "tool_calls",
    ),
]


@pytest.mark.parametrize(("file", "text", "calls", "used", "finish"), WHOLE)
async def test_recorded_whole_response(
    file: str, text: str, calls: list[Any], used: dict[str, int], finish: str
) -> None:
    recorder = Recorder([json_reply(fixture_bytes(file))])
    model = gemini_model(recorder)
    response = await model.request(HELLO)
    await model.aclose()
    assert response.message.content.startswith(text)
    assert [
        (c.name, c.arguments, (c.signature or "")[:20] or None) for c in response.message.tool_calls
    ] == calls
    assert tokens(response.usage) == used
    assert response.finish_reason == finish
    assert recorder.requests[0].url.path.endswith(":generateContent")


# -- the same recordings through a real HTTP server ----------------------------------------------


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.file)
async def test_recorded_stream_over_real_sockets(server: ReplayServer, case: Case) -> None:
    body = fixture_bytes(case.file)
    server.replies.append(Reply(body))
    model: GeminiModel | VertexGeminiModel
    if case.vertex:
        model = VertexGeminiModel(
            "gemini-x",
            project="p",
            location="europe-west4",
            access_token=TOKEN,
            base_url=server.url,
            retry=RetryPolicy(max_retries=0),
        )
        path = "/v1/projects/p/locations/europe-west4/publishers/google/models/gemini-x"
    else:
        model = GeminiModel(
            "gemini-x",
            api_key=API_KEY,
            base_url=server.url + "/v1beta",
            retry=RetryPolicy(max_retries=0),
        )
        path = "/v1beta/models/gemini-x"
    assert model.http.owns_client
    try:
        streamed = await stream_all(model)
    finally:
        await model.aclose()
    expected = await replay(factory(case), [body])
    assert summary(streamed.response) == summary(expected.response)
    assert event_dump(streamed) == event_dump(expected)
    (seen,) = server.seen
    assert seen.path == path + ":streamGenerateContent?alt=sse"
    if case.vertex:
        assert seen.headers["authorization"] == f"Bearer {TOKEN}"
    else:
        assert seen.headers["x-goog-api-key"] == API_KEY and "key=" not in seen.path
    assert seen.body["contents"] == [{"role": "user", "parts": [{"text": "Hello"}]}]


@pytest.mark.parametrize("file", [row[0] for row in WHOLE])
async def test_whole_response_over_real_sockets(server: ReplayServer, file: str) -> None:
    body = fixture_bytes(file)
    server.replies.append(Reply(body, content_type="application/json"))
    model = GeminiModel("gemini-x", api_key=API_KEY, base_url=server.url + "/v1beta")
    try:
        response = await model.request(HELLO)
    finally:
        await model.aclose()
    expected = await gemini_model(Recorder([json_reply(body)])).request(HELLO)
    assert summary(response) == summary(expected)
    assert server.seen[0].path == "/v1beta/models/gemini-x:generateContent"


async def test_the_json_array_form_over_real_sockets(server: ReplayServer) -> None:
    body = array_as_sse("gemini/text-stream-json-array.json")
    server.replies.append(Reply(body))
    model = GeminiModel("gemini-x", api_key=API_KEY, base_url=server.url)
    try:
        streamed = await stream_all(model)
    finally:
        await model.aclose()
    expected = await replay(gemini_model, [body])
    assert summary(streamed.response) == summary(expected.response)


# -- errors ------------------------------------------------------------------------------------

EVENT_STREAM = "text/event-stream"


@pytest.mark.parametrize("over", ["mock", "server"])
async def test_a_rejected_key_served_as_an_event_stream_is_an_authentication_error(
    server: ReplayServer, over: str
) -> None:
    # Gemini answers a bad key with HTTP 400 INVALID_ARGUMENT (not 401), as text/event-stream.
    body = fixture_bytes("gemini/error-400-api-key-invalid.json")
    if over == "mock":
        import httpx

        reply = httpx.Response(400, headers={"content-type": EVENT_STREAM}, content=body)
        model = gemini_model(Recorder([reply]))
    else:
        server.replies.append(Reply(body, status=400))
        model = GeminiModel(
            "gemini-x", api_key=API_KEY, base_url=server.url, retry=RetryPolicy(max_retries=0)
        )
    try:
        with pytest.raises(AuthenticationError, match="API key not valid") as caught:
            await stream_all(model)
    finally:
        await model.aclose()
    error = caught.value
    assert error.status_code == 400 and not error.retryable and error.provider == "gemini"
    assert "GEMINI_API_KEY" in str(error) and API_KEY not in str(error)
    assert isinstance(error.__cause__, ProviderError)


async def test_an_unknown_model_is_a_404_provider_error(server: ReplayServer) -> None:
    server.replies.append(
        Reply(fixture_bytes("gemini/error-404-not-found-on-stream-endpoint.json"), status=404)
    )
    model = GeminiModel("nope", api_key=API_KEY, base_url=server.url)
    try:
        with pytest.raises(ProviderError, match="is not found for API version") as caught:
            await stream_all(model)
    finally:
        await model.aclose()
    assert type(caught.value) is ProviderError
    assert caught.value.status_code == 404 and "model id" in (caught.value.hint or "")


async def test_a_json_error_body_in_a_200_event_stream_is_still_a_typed_error() -> None:
    # Without data: framing the decoder finds no event, so the stream has no finish reason.
    body = fixture_bytes("gemini/error-404-not-found-on-stream-endpoint.json")
    with pytest.raises(ProviderError, match="before its finish reason") as caught:
        await replay(gemini_model, [body])
    assert caught.value.retryable


def chunk(*parts: dict[str, Any], finish: str | None = None, **top: Any) -> bytes:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": list(parts)}, "index": 0}
    if finish is not None:
        candidate["finishReason"] = finish
    body: dict[str, Any] = {"candidates": [candidate], "responseId": "r1", **top}
    return b"data: " + json.dumps(body).encode() + b"\r\n\r\n"


async def test_an_error_object_inside_a_200_stream() -> None:
    error = {"error": {"code": 503, "message": "The model is overloaded.", "status": "UNAVAILABLE"}}
    body = [chunk({"text": "Hal"}), b"data: " + json.dumps(error).encode() + b"\r\n\r\n"]
    with pytest.raises(ProviderError, match="overloaded") as caught:
        await replay(gemini_model, body)
    assert caught.value.status_code == 503 and caught.value.retryable


async def test_a_quota_error_inside_a_200_stream_is_a_rate_limit() -> None:
    error = {"error": {"code": 429, "message": "Quota exceeded.", "status": "RESOURCE_EXHAUSTED"}}
    with pytest.raises(RateLimitError, match="Quota exceeded"):
        await replay(gemini_model, [b"data: " + json.dumps(error).encode() + b"\n\n"])


async def test_an_over_long_prompt_is_a_context_window_error() -> None:
    import httpx

    message = (
        "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576)."
    )
    body = {"error": {"code": 400, "message": message, "status": "INVALID_ARGUMENT"}}
    model = gemini_model(Recorder([httpx.Response(400, json=body)]))
    with pytest.raises(ContextWindowExceeded):
        await model.request(HELLO)
    await model.aclose()


async def test_a_malformed_function_call_asks_the_model_again() -> None:
    candidate = {
        "content": {"role": "model", "parts": []},
        "finishReason": "MALFORMED_FUNCTION_CALL",
        "finishMessage": "Malformed function call: print(x",
    }
    body = [b"data: " + json.dumps({"candidates": [candidate]}).encode() + b"\n\n"]
    with pytest.raises(MalformedToolCall, match="Malformed function call") as caught:
        await replay(gemini_model, body)
    assert "follow its schema" in caught.value.feedback


async def test_a_blocked_prompt_is_a_content_filter_finish() -> None:
    blocked = {
        "promptFeedback": {"blockReason": "SAFETY"},
        "usageMetadata": {"promptTokenCount": 8},
    }
    streamed = await replay(gemini_model, [b"data: " + json.dumps(blocked).encode() + b"\n\n"])
    assert streamed.response.finish_reason == "content_filter"
    assert streamed.response.message.content == ""
    assert streamed.response.usage.input_tokens == 8
    recorder = Recorder([json_reply(blocked)])
    whole = await gemini_model(recorder).request(HELLO)
    assert whole.finish_reason == "content_filter"


@pytest.mark.parametrize(("reason", "finish"), [("SAFETY", "content_filter"), ("OTHER", "unknown")])
async def test_other_finish_reasons(reason: str, finish: str) -> None:
    streamed = await replay(gemini_model, [chunk({"text": "x"}, finish=reason)])
    assert streamed.response.finish_reason == finish


async def test_a_stream_without_a_finish_reason_is_incomplete() -> None:
    with pytest.raises(ProviderError, match="before its finish reason"):
        await replay(gemini_model, [chunk({"text": "half an ans"})])
    with pytest.raises(ProviderError, match="before its finish reason"):
        await replay(gemini_model, [])


async def test_data_that_is_not_json() -> None:
    with pytest.raises(ProviderError, match="not a JSON object") as caught:
        await replay(gemini_model, [chunk({"text": "x"}), b"data: {oops\n\n"])
    assert caught.value.body == "{oops"


async def test_a_whole_response_without_candidates_is_broken() -> None:
    model = gemini_model(Recorder([json_reply({"usageMetadata": {}})]))
    with pytest.raises(ProviderError, match="no candidates"):
        await model.request(HELLO)


# -- parts, hand-built -------------------------------------------------------------------------


async def test_usage_is_cumulative_the_last_value_wins() -> None:
    body = [
        chunk({"text": "a"}, usageMetadata={"promptTokenCount": 10, "candidatesTokenCount": 1}),
        chunk({"text": "b"}, usageMetadata={"promptTokenCount": 10, "candidatesTokenCount": 2}),
        chunk(
            {"text": "c"},
            finish="STOP",
            usageMetadata={
                "promptTokenCount": 10,
                "candidatesTokenCount": 3,
                "cachedContentTokenCount": 6,
                "thoughtsTokenCount": 4,
                "toolUsePromptTokenCount": 2,
            },
        ),
    ]
    streamed = await replay(gemini_model, body)
    assert tokens(streamed.response.usage) == usage(12, 7, cache_read_tokens=6, reasoning_tokens=4)


async def test_streamed_arguments_of_every_json_type() -> None:
    def call(**fields: Any) -> dict[str, Any]:
        return {"functionCall": fields}

    def arg(path: str, **value: Any) -> dict[str, Any]:
        return {"jsonPath": path, **value}

    body = [
        chunk({**call(name="book", willContinue=True), "thoughtSignature": "sig-1"}),
        chunk(
            call(
                partialArgs=[
                    arg("$.city", stringValue="New ", willContinue=True),
                    arg("$.nights", numberValue=3),
                ],
                willContinue=True,
            )
        ),
        chunk(
            call(
                partialArgs=[
                    arg("$.city", stringValue="York"),
                    arg("$.options.breakfast", boolValue=True),
                    arg("$.rooms[1].beds", numberValue=2),
                    arg("$['note']", nullValue="NULL_VALUE"),
                    arg("not a path", stringValue="ignored"),
                ],
                willContinue=True,
            )
        ),
        chunk(call(), finish="STOP"),
    ]
    streamed = await replay(gemini_model, body)
    (booked,) = streamed.response.message.tool_calls
    assert booked.arguments == {
        "city": "New York",
        "nights": 3,
        "options": {"breakfast": True},
        "rooms": [None, {"beds": 2}],
        "note": None,
    }
    assert booked.signature == "sig-1"
    deltas = [e for e in streamed.events if isinstance(e, ToolCallDelta)]
    assert [(d.name, json.loads(d.arguments_delta or "null")) for d in deltas] == [
        ("book", None),
        (None, booked.arguments),
    ]


async def test_thoughts_join_until_signed_and_a_text_signature_is_kept() -> None:
    body = [
        chunk({"text": "Think ", "thought": True}),
        chunk({"text": "more.", "thought": True}, {"thought": True, "thoughtSignature": "t-sig"}),
        chunk({"text": "Again.", "thought": True}),
        chunk({"text": "Answer"}, {"text": "", "thoughtSignature": "a-sig"}, finish="STOP"),
    ]
    streamed = await replay(gemini_model, body)
    message = streamed.response.message
    assert [(r.text, r.signature) for r in message.reasoning] == [
        ("Think more.", "t-sig"),
        ("Again.", None),
        ("", "a-sig"),
    ]
    assert message.content == "Answer"
    assert streamed.signatures == ["t-sig", "a-sig"]


async def test_an_id_gemini_gives_is_kept() -> None:
    body = [chunk({"functionCall": {"id": "fc-7", "name": "f", "args": {"a": 1}}}, finish="STOP")]
    (call,) = (await replay(gemini_model, body)).response.message.tool_calls
    assert (call.id, call.arguments) == ("fc-7", {"a": 1})
    assert not is_generated_id(call.id)


async def test_a_call_without_a_name_is_malformed() -> None:
    with pytest.raises(MalformedToolCall, match="without a tool name"):
        await replay(gemini_model, [chunk({"functionCall": {"args": {}}}, finish="STOP")])


async def test_other_candidates_are_ignored() -> None:
    body = {
        "candidates": [
            {"index": 1, "content": {"parts": [{"text": "second"}]}, "finishReason": "STOP"},
            {"index": 0, "content": {"parts": [{"text": "first"}]}, "finishReason": "STOP"},
        ]
    }
    streamed = await replay(gemini_model, [b"data: " + json.dumps(body).encode() + b"\n\n"])
    assert streamed.response.message.content == "first"


# -- properties ----------------------------------------------------------------------------------

STREAMS = CASES
_settings = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_settings
@given(case=st.sampled_from(STREAMS), sizes=st.lists(st.integers(1, 400), min_size=1, max_size=8))
def test_any_rechunking_parses_to_the_same_result(case: Case, sizes: list[int]) -> None:
    body = fixture_bytes(case.file)
    whole = run(replay(factory(case), [body]))
    rechunked = run(replay(factory(case), split(body, sizes)))
    assert event_dump(rechunked) == event_dump(whole)
    assert summary(rechunked.response) == summary(whole.response)


@_settings
@given(case=st.sampled_from(STREAMS), data=st.data())
def test_a_truncated_stream_raises_a_typed_error_or_is_already_complete(
    case: Case, data: st.DataObject
) -> None:
    body = fixture_bytes(case.file)
    cut = data.draw(st.integers(0, len(body) - 1), label="cut")
    whole = run(replay(factory(case), [body]))
    try:
        truncated = run(replay(factory(case), split(body[:cut], [97])))
    except ProviderError:
        return
    # Only the framing after the finishing chunk was lost.
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
        run(replay(factory(case), [bytes(body)]))
    except TidemillError as error:
        failure = error
    assert failure is None or (API_KEY not in str(failure) and TOKEN not in str(failure))
