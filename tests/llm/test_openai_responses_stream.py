"""Responses API streams and whole responses: every file in fixtures/providers/openai-responses."""

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
from replay_models import replay, responses_model

from tidemill.errors import MalformedToolCall, ProviderError, RateLimitError, TidemillError
from tidemill.llm import OpenAIResponsesModel, RetryPolicy
from tidemill.types import Usage


def usage(inp: int, out: int, **extra: int) -> dict[str, int]:
    return tokens(Usage(requests=1, input_tokens=inp, output_tokens=out, **extra))


def done_item(file: str, item_type: str) -> dict[str, Any]:
    """The finished output item of one type, as the recording's `output_item.done` gives it."""
    for line in fixture_bytes(file).decode().splitlines():
        if line.startswith("data: "):
            event = json.loads(line[6:])
            if event["type"] == "response.output_item.done" and event["item"]["type"] == item_type:
                item: dict[str, Any] = event["item"]
                return item
    raise AssertionError(f"no {item_type} item in {file}")


@dataclass(frozen=True)
class Case:
    """What one recorded stream must parse to."""

    file: str
    text: str
    calls: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)
    usage: dict[str, int] = field(default_factory=dict)
    finish: str = "stop"
    model: str = "gpt-4o-2024-08-06"
    summaries: list[str] = field(default_factory=list)
    """The start of each reasoning summary part."""
    encrypted: bool = False


CASES = [
    Case("openai-responses/text-stream.sse", "4200 + 42 equals 4242.", usage=usage(16, 11)),
    Case(
        "openai-responses/function-call-stream.sse",
        "",
        calls=[("call_sVidsfFJ6zlzRpelrPkTPlpd", "multiply", {"a": 1231, "b": 2331})],
        usage=usage(58, 23),
        finish="tool_calls",
        model="gpt-5.5-2026-04-23",
    ),
    Case(
        "openai-responses/parallel-function-calls-stream.sse",
        "",
        calls=[
            ("call_sKC7OABqf2A2PTLCm0CLeRWV", "secret_retrieval_tool", {"password": "mellon"}),
            ("call_OdR3s3xop0vtgkDyWRMLafuH", "secret_retrieval_tool", {"password": "radiance"}),
        ],
        usage=usage(36, 54),
        finish="tool_calls",
    ),
    Case(
        "openai-responses/reasoning-summary-stream.sse",
        "3",
        usage=usage(32, 839, reasoning_tokens=832),
        model="gpt-5-2025-08-07",
        summaries=["**Exploring prime numbers**", "**Testing prime candidates**", "**Final count"],
    ),
    Case(
        "openai-responses/reasoning-message-function-call-stream.sse",
        "I’ll check the capital lookup tool for “PotatoLand.”",
        calls=[("call_LabG58Uhrq9kZvR52BYKjToD", "get_capital", {"country": "PotatoLand"})],
        usage=usage(63, 69, reasoning_tokens=26),
        finish="tool_calls",
        model="gpt-5.5-2026-04-23",
        encrypted=True,
    ),
    Case(
        "openai-responses/structured-output-stream.sse",
        '{"title":"THE NAME OF THE WIND","author":{"first_name":"Patrick",'
        '"last_name":"Rothfuss"},"rating":7}',
        usage=usage(166, 30),
    ),
    Case(
        "openai-responses/refusal-stream.sse",
        "I'm sorry, I can't assist with that.",
        usage=usage(54, 11),
        finish="content_filter",
    ),
    Case(
        "openai-responses/max-output-tokens-incomplete-stream.sse",
        "Sure! Here is a list of all 50 U.S. states:\n\n1. Alabama\n2. Alaska\n3. Arizona\n"
        "4. Arkansas\n5. California\n6. Colorado\n7. Connecticut\n8. Delaware\n9. Florida",
        usage=usage(14, 50),
        finish="length",
    ),
]


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.file)
async def test_recorded_stream(case: Case) -> None:
    streamed = await replay(responses_model, [fixture_bytes(case.file)])
    response, message = streamed.response, streamed.response.message
    assert message.content == case.text
    assert streamed.text == message.content
    assert [(c.id, c.name, c.arguments) for c in message.tool_calls] == case.calls
    assert all(c.raw_arguments is None and c.signature is None for c in message.tool_calls)
    assert tokens(response.usage) == case.usage
    assert response.finish_reason == case.finish
    assert response.model == case.model
    assert response.provider == "openai-responses"
    assert (response.response_id or "").startswith("resp_")
    rebuilt = streamed.calls_from_deltas()
    assert sorted(rebuilt) == list(range(len(case.calls)))
    for index, (call_id, name, arguments) in enumerate(case.calls):
        delta_id, delta_name, delta_args = rebuilt[index]
        assert (delta_id, delta_name, json.loads(delta_args)) == (call_id, name, arguments)
    if case.summaries:
        parts = message.reasoning
        assert [p.text[: len(start)] for p, start in zip(parts, case.summaries, strict=True)] == (
            case.summaries
        )
        assert len({p.id for p in parts}) == 1 and (parts[0].id or "").startswith("rs_")
        assert all(p.provider == "openai-responses" for p in parts)
        assert streamed.reasoning == "\n\n".join(p.text for p in parts)
    elif case.encrypted:
        (reasoning,) = message.reasoning
        item = done_item(case.file, "reasoning")
        # The finished item's encrypted_content, not the other one announced by output_item.added.
        assert (reasoning.id, reasoning.redacted_data, reasoning.text) == (
            item["id"],
            item["encrypted_content"],
            "",
        )
    else:
        assert message.reasoning == ()


async def test_an_error_event_in_a_200_stream_is_a_typed_error() -> None:
    with pytest.raises(RateLimitError, match="exceeded your current quota") as caught:
        await replay(
            responses_model, [fixture_bytes("openai-responses/error-in-stream.chunks.jsonl")]
        )
    error = caught.value
    assert (error.code, error.retryable, error.status_code) == ("insufficient_quota", False, None)
    assert "billing" in (error.hint or "")


async def test_response_failed_without_an_error_event() -> None:
    lines = fixture_bytes("openai-responses/error-in-stream.chunks.jsonl").decode().split("\n\n")
    without_error_event = [line for line in lines if '"type":"error"' not in line]
    with pytest.raises(RateLimitError, match="exceeded your current quota"):
        await replay(responses_model, ["\n\n".join(without_error_event).encode()])


def event(kind: str, **fields: Any) -> bytes:
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **fields})}\n\n".encode()


async def test_a_flat_error_event() -> None:
    body = [event("error", code="server_error", message="The server had an error.", param=None)]
    with pytest.raises(ProviderError, match="server had an error") as caught:
        await replay(responses_model, body)
    assert caught.value.retryable


WHOLE = [
    ("openai-responses/text.json", "4200 + 42 equals 4242.", [], usage(16, 11), "stop"),
    (
        "openai-responses/parallel-function-calls.json",
        "",
        [
            ("call_bzXaB1HDWsWy7n6bMrxJzNNa", "secret_retrieval_tool", {"password": "mellon"}),
            ("call_Dd4wvykCr6NttXKxRK0BFH96", "secret_retrieval_tool", {"password": "radiance"}),
        ],
        usage(36, 54),
        "tool_calls",
    ),
    (
        "openai-responses/reasoning-function-call.json",
        "",
        [("call_I670mAzR6AYszdoqaI96qg0k", "db_lookup", {"key": "start"})],
        usage(88, 65, reasoning_tokens=45),
        "tool_calls",
    ),
]


@pytest.mark.parametrize(("file", "text", "calls", "used", "finish"), WHOLE)
async def test_recorded_whole_response(
    file: str, text: str, calls: list[Any], used: dict[str, int], finish: str
) -> None:
    recorder = Recorder([json_reply(fixture_bytes(file))])
    model = responses_model(recorder)
    response = await model.request(HELLO)
    await model.aclose()
    assert response.message.content == text
    assert [(c.id, c.name, c.arguments) for c in response.message.tool_calls] == calls
    assert tokens(response.usage) == used
    assert response.finish_reason == finish
    if "reasoning" in file:
        (reasoning,) = response.message.reasoning
        payload = json.loads(fixture_bytes(file))
        assert reasoning.id == payload["output"][0]["id"]
        assert reasoning.redacted_data == payload["output"][0]["encrypted_content"]


async def test_a_400_for_an_unknown_model() -> None:
    body = fixture_bytes("openai-responses/error-400-model-not-found.json")
    model = responses_model(Recorder([json_reply(body, status=400)]))
    with pytest.raises(ProviderError, match="does not exist") as caught:
        await model.request(HELLO)
    assert (caught.value.status_code, caught.value.code) == (400, "model_not_found")


async def test_a_whole_failed_or_incomplete_response() -> None:
    failed = {
        "object": "response",
        "status": "failed",
        "output": [],
        "error": {"code": "server_error", "message": "Something broke."},
    }
    model = responses_model(Recorder([json_reply(failed)]))
    with pytest.raises(ProviderError, match="Something broke"):
        await model.request(HELLO)
    incomplete = {
        "object": "response",
        "status": "incomplete",
        "incomplete_details": {"reason": "content_filter"},
        "output": [],
    }
    model = responses_model(Recorder([json_reply(incomplete)]))
    assert (await model.request(HELLO)).finish_reason == "content_filter"
    model = responses_model(Recorder([json_reply({"object": "response"})]))
    with pytest.raises(ProviderError, match="no output list"):
        await model.request(HELLO)


async def test_a_stream_cut_before_its_terminal_event() -> None:
    body = fixture_bytes("openai-responses/text-stream.sse")
    cut = body.index(b"event: response.completed")
    with pytest.raises(ProviderError, match=r"before response\.completed"):
        await replay(responses_model, [body[:cut]])


async def test_arguments_known_only_from_the_finished_item() -> None:
    item = {"id": "fc_1", "type": "function_call", "call_id": "call_1", "name": "f"}
    body = [
        event("response.created", response={"id": "resp_1", "model": "m"}),
        event("response.output_item.added", output_index=0, item={**item, "arguments": ""}),
        event(
            "response.function_call_arguments.delta", item_id="fc_1", output_index=0, delta='{"a"'
        ),
        event("response.output_item.done", output_index=0, item={**item, "arguments": '{"a": 1}'}),
        event("response.completed", response={"id": "resp_1", "status": "completed"}),
    ]
    streamed = await replay(responses_model, body)
    (call,) = streamed.response.message.tool_calls
    assert call.arguments == {"a": 1}
    assert streamed.calls_from_deltas() == {0: ("call_1", "f", '{"a": 1}')}


async def test_a_call_without_a_name_is_malformed() -> None:
    item = {"id": "fc_1", "type": "function_call", "call_id": "c", "arguments": "{}"}
    body = [
        event("response.output_item.done", output_index=0, item=item),
        event("response.completed", response={"status": "completed"}),
    ]
    with pytest.raises(MalformedToolCall):
        await replay(responses_model, body)


# -- the same recordings through a real HTTP server ----------------------------------------------


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.file)
async def test_recorded_stream_over_real_sockets(server: ReplayServer, case: Case) -> None:
    body = fixture_bytes(case.file)
    server.replies.append(Reply(body))
    model = OpenAIResponsesModel(
        "gpt-x", api_key=API_KEY, base_url=server.url + "/v1", retry=RetryPolicy(max_retries=0)
    )
    assert model.http.owns_client
    try:
        streamed = await stream_all(model)
    finally:
        await model.aclose()
    expected = await replay(responses_model, [body])
    assert summary(streamed.response) == summary(expected.response)
    assert event_dump(streamed) == event_dump(expected)
    (seen,) = server.seen
    assert seen.path == "/v1/responses"
    assert seen.headers["authorization"] == f"Bearer {API_KEY}"
    assert seen.body["stream"] is True and seen.body["store"] is False


@pytest.mark.parametrize("file", [row[0] for row in WHOLE])
async def test_whole_response_over_real_sockets(server: ReplayServer, file: str) -> None:
    server.replies.append(Reply(fixture_bytes(file), content_type="application/json"))
    model = OpenAIResponsesModel("gpt-x", api_key=API_KEY, base_url=server.url + "/v1")
    try:
        response = await model.request(HELLO)
    finally:
        await model.aclose()
    expected = await responses_model(Recorder([json_reply(fixture_bytes(file))])).request(HELLO)
    assert summary(response) == summary(expected)
    assert server.seen[0].body["stream"] is False


@pytest.mark.parametrize(
    ("file", "status", "error"),
    [
        ("openai-responses/error-in-stream.chunks.jsonl", 200, RateLimitError),
        ("openai-responses/error-400-model-not-found.json", 400, ProviderError),
    ],
)
async def test_errors_over_real_sockets(
    server: ReplayServer, file: str, status: int, error: type[ProviderError]
) -> None:
    content_type = "text/event-stream" if status == 200 else "application/json"
    server.replies.append(Reply(fixture_bytes(file), status=status, content_type=content_type))
    model = OpenAIResponsesModel(
        "gpt-x", api_key=API_KEY, base_url=server.url + "/v1", retry=RetryPolicy(max_retries=0)
    )
    try:
        with pytest.raises(error) as caught:
            await stream_all(model)
    finally:
        await model.aclose()
    assert caught.value.provider == "openai-responses" and API_KEY not in str(caught.value)


# -- properties ----------------------------------------------------------------------------------

STREAMS = CASES
_settings = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_settings
@given(case=st.sampled_from(STREAMS), sizes=st.lists(st.integers(1, 800), min_size=1, max_size=8))
def test_any_rechunking_parses_to_the_same_result(case: Case, sizes: list[int]) -> None:
    body = fixture_bytes(case.file)
    whole = run(replay(responses_model, [body]))
    rechunked = run(replay(responses_model, split(body, sizes)))
    assert event_dump(rechunked) == event_dump(whole)
    assert summary(rechunked.response) == summary(whole.response)


@_settings
@given(case=st.sampled_from(STREAMS), data=st.data())
def test_a_truncated_stream_raises_a_typed_error_or_is_already_complete(
    case: Case, data: st.DataObject
) -> None:
    body = fixture_bytes(case.file)
    cut = data.draw(st.integers(0, len(body) - 1), label="cut")
    whole = run(replay(responses_model, [body]))
    try:
        truncated = run(replay(responses_model, split(body[:cut], [397])))
    except ProviderError:
        return
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
        run(replay(responses_model, [bytes(body)]))
    except TidemillError as error:
        failure = error
    assert failure is None or API_KEY not in str(failure)


# -- log probabilities ---------------------------------------------------------------------------


def scores(text: str) -> list[dict[str, Any]]:
    """A delta's `logprobs` as the Responses stream sends them (no `bytes`)."""
    return [{"token": text, "logprob": -0.25, "top_logprobs": [{"token": text, "logprob": -0.25}]}]


def with_scores(file: str) -> tuple[bytes, list[tuple[str, Any]]]:
    """A recorded stream with log probabilities on its text deltas, and each delta's."""
    events, deltas = [], []
    for block in fixture_bytes(file).decode().split("\n\n"):
        lines = block.splitlines()
        for at, line in enumerate(lines):
            if line.startswith("data: "):
                data = json.loads(line[6:])
                if data["type"] == "response.output_text.delta":
                    data["logprobs"] = scores(data["delta"])
                    deltas.append((data["delta"], data["logprobs"]))
                lines[at] = "data: " + json.dumps(data)
        events.append("\n".join(lines))
    return "\n\n".join(events).encode(), deltas


async def test_streamed_log_probabilities_come_in_chat_completions_form() -> None:
    body, deltas = with_scores("openai-responses/text-stream.sse")
    streamed = await replay(responses_model, [body])
    texts = [event for event in streamed.events if event.type == "text"]
    expected = [(text, {"content": found, "refusal": None}) for text, found in deltas]
    assert [(event.delta, event.logprobs) for event in texts] == expected
    joined = [entry for _, found in deltas for entry in found]
    assert streamed.response.logprobs == {"content": joined, "refusal": None}


async def test_a_whole_answer_s_log_probabilities_come_in_chat_completions_form() -> None:
    payload = json.loads(fixture_bytes("openai-responses/text.json"))
    part = payload["output"][0]["content"][0]
    part["logprobs"] = [
        {"token": "4200", "bytes": [52, 50, 48, 48], "logprob": -0.01, "top_logprobs": []}
    ]
    model = responses_model(Recorder([json_reply(payload)]))
    response = await model.request(HELLO)
    await model.aclose()
    assert response.logprobs == {"content": part["logprobs"], "refusal": None}


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.file)
async def test_the_empty_lists_sent_unasked_are_no_log_probabilities(case: Case) -> None:
    """Recorded streams carry `"logprobs": []` on every text delta: none were asked for."""
    streamed = await replay(responses_model, [fixture_bytes(case.file)])
    assert all(event.logprobs is None for event in streamed.events if event.type == "text")
    assert streamed.response.logprobs is None
