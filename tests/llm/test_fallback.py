"""`FallbackModel`: the next model on rate limits, timeouts, 5xx and dropped connections only."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from pathlib import Path

import httpx
import pytest
from bedrock_replay import bedrock_model, event_stream, isolate_aws
from llm_replay import (
    HELLO,
    Recorder,
    chat_model,
    fixture_bytes,
    json_reply,
    sse,
    stream_all,
)

from tidemill.errors import (
    AuthenticationError,
    ConfigurationError,
    ContextWindowExceeded,
    MalformedToolCall,
    ProviderError,
    ProviderTimeout,
    RateLimitError,
)
from tidemill.llm import (
    AnthropicModel,
    FallbackModel,
    Model,
    ModelRequest,
    ModelStreamEvent,
    OpenAIChatModel,
    ScriptedModel,
    resolve_model,
    should_fall_back,
)
from tidemill.types import ModelResponse, ResponseDone, TextDelta

ANTHROPIC_TEXT = "anthropic/text.json"
OPENAI_TEXT = "openai-chat/text.json"


@pytest.fixture(autouse=True)
def _clean_aws(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    isolate_aws(monkeypatch, tmp_path)


def error(status: int, message: str = "nope", **headers: str) -> httpx.Response:
    return json_reply({"error": {"message": message}}, status=status, headers=headers)


def pair(first: list[object], second: list[object]) -> tuple[FallbackModel, Recorder, Recorder]:
    """An Anthropic model that answers `first`, then an OpenAI one that answers `second`."""
    one, two = Recorder(first), Recorder(second)  # type: ignore[arg-type]
    model = FallbackModel([chat_model("anthropic", one), chat_model("openai", two)])
    return model, one, two


async def test_a_rate_limit_on_the_first_lets_the_second_answer() -> None:
    model, one, two = pair([error(429, "slow down")], [json_reply(fixture_bytes(OPENAI_TEXT))])
    response = await model.request(HELLO)
    assert len(one.requests) == len(two.requests) == 1
    assert response.provider == "openai"
    assert response.model == json.loads(fixture_bytes(OPENAI_TEXT))["model"]
    assert response.message.content


async def test_the_first_model_answers_when_it_can() -> None:
    model, _, two = pair([json_reply(fixture_bytes(ANTHROPIC_TEXT))], [])
    response = await model.request(HELLO)
    assert response.provider == "anthropic" and not two.requests


@pytest.mark.parametrize(
    ("reply", "kind"),
    [
        (error(401, "invalid x-api-key"), AuthenticationError),
        (error(403, "forbidden"), AuthenticationError),
        (error(400, "prompt is too long: 300000 tokens > 200000 maximum"), ContextWindowExceeded),
        (error(400, "messages: roles must alternate"), ProviderError),
        (error(404, "model: claude-nope"), ProviderError),
    ],
    ids=["401", "403", "context", "400", "404"],
)
async def test_no_fallback_on_what_would_fail_anywhere(
    reply: httpx.Response, kind: type[ProviderError]
) -> None:
    model, _, two = pair([reply], [])  # the second has no reply: calling it fails the test
    with pytest.raises(kind) as caught:
        await model.request(HELLO)
    assert caught.value.provider == "anthropic" and not two.requests
    with pytest.raises(kind):
        await stream_all(pair([reply], [])[0])


@pytest.mark.parametrize(
    "failure",
    [
        error(500, "internal"),
        error(503, "unavailable"),
        error(529, "overloaded"),
        error(408, "request timeout"),
        httpx.ConnectError("connection refused"),
        httpx.ReadTimeout("read timed out"),
        error(429, "insufficient_quota"),
    ],
    ids=["500", "503", "529", "408", "connect", "timeout", "quota"],
)
async def test_fallback_on_outages(failure: object) -> None:
    model, _, two = pair([failure], [json_reply(fixture_bytes(OPENAI_TEXT))])
    assert (await model.request(HELLO)).provider == "openai"
    assert len(two.requests) == 1


async def test_every_model_failing_raises_the_last_failure_with_the_others_noted() -> None:
    model, _, _ = pair([error(503, "first down")], [error(429, "second busy")])
    with pytest.raises(RateLimitError, match="second busy") as caught:
        await model.request(HELLO)
    (note,) = caught.value.__notes__
    assert note.startswith("Tried before it: anthropic:") and "first down" in note


# -- streams ---------------------------------------------------------------------------------------


async def test_a_stream_falls_back_before_its_first_event() -> None:
    model, one, two = pair([error(429)], [sse(fixture_bytes("openai-chat/text-stream.sse"))])
    streamed = await stream_all(model)
    assert len(one.requests) == len(two.requests) == 1
    assert streamed.response.provider == "openai" and streamed.text == (
        streamed.response.message.content
    )


async def test_an_error_event_before_any_delta_still_falls_back() -> None:
    overloaded = (
        b"event: error\n"
        b'data: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}\n\n'
    )
    model, _, _ = pair([sse(overloaded)], [sse(fixture_bytes("openai-chat/text-stream.sse"))])
    assert (await stream_all(model)).response.provider == "openai"


async def test_no_fallback_once_a_stream_has_started() -> None:
    body = fixture_bytes("anthropic/text-stream.sse")
    first_delta = body.index(b"content_block_delta")
    cut = body[: body.index(b"\n\n", first_delta) + 2]  # the first delta, then the end
    model, _, two = pair([sse(cut)], [])
    events: list[ModelStreamEvent] = []

    async def read() -> None:
        async for event in model.stream(HELLO):
            events.append(event)

    with pytest.raises(ProviderError, match="ended before message_stop"):
        await read()
    assert any(isinstance(e, TextDelta) for e in events) and not two.requests


async def test_a_bedrock_stream_falls_back_too() -> None:
    throttled = Recorder([error(429, "Too many requests")])
    second = Recorder([sse(fixture_bytes("openai-chat/text-stream.sse"))])
    model = FallbackModel([bedrock_model(throttled), chat_model("openai", second)])
    assert (await stream_all(model)).response.provider == "openai"
    assert throttled.requests and second.requests
    broken = Recorder([event_stream(b"\x00\x00\x00\x10garbage")])
    second = Recorder([sse(fixture_bytes("openai-chat/text-stream.sse"))])
    model = FallbackModel([bedrock_model(broken), chat_model("openai", second)])
    assert (await stream_all(model)).response.provider == "openai"


# -- the wrapper ---------------------------------------------------------------------------


async def test_resolve_model_builds_a_fallback_from_a_list() -> None:
    mine = ScriptedModel(responses=["scripted"])
    model = resolve_model(["anthropic:claude-sonnet-4-5", "openai:gpt-4o", mine], api_key="k")
    assert isinstance(model, FallbackModel)
    first, second, third = model.models
    assert isinstance(first, AnthropicModel) and isinstance(second, OpenAIChatModel)
    assert third is mine
    assert model.model_name == "anthropic:claude-sonnet-4-5,openai:gpt-4o,scripted:scripted"
    assert [d["provider"] for d in model.describe()["models"]] == [  # type: ignore[index, union-attr]
        "anthropic",
        "openai",
        "scripted",
    ]
    closed: list[str] = []

    class Spy(ScriptedModel):
        async def aclose(self) -> None:
            closed.append("spy")

    spy = Spy(responses=["x"])
    wrapper = resolve_model(["fake", spy])
    assert isinstance(wrapper, FallbackModel)
    await wrapper.aclose()
    assert closed == []  # a model passed in stays the caller's


def test_bad_lists() -> None:
    with pytest.raises(ConfigurationError, match="empty list"):
        resolve_model([])
    with pytest.raises(ConfigurationError, match="Cannot use int"):
        resolve_model(["fake", 3])  # type: ignore[list-item]
    with pytest.raises(ConfigurationError, match="at least one model"):
        FallbackModel([])


class Flaky(Model):
    """Fails with `error` (before any event when streaming), or answers naming no model."""

    provider = "flaky"

    def __init__(self, name: str, error: Exception | None) -> None:
        self.model_name = name
        self.error = error
        self.calls = 0

    async def request(self, request: ModelRequest) -> ModelResponse:
        self.calls += 1
        if self.error is not None:
            raise self.error
        return await ScriptedModel(responses=[self.model_name]).request(request)

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelStreamEvent, None]:
        response = await self.request(request)
        yield ResponseDone(response=response.model_copy(update={"model": None, "provider": None}))


async def test_a_custom_rule_and_a_model_that_names_no_model() -> None:
    timeout = ProviderTimeout("slow", provider="x")
    first, second = Flaky("a", timeout), Flaky("b", None)
    never = FallbackModel([first, second], fallback_on=lambda _: False)
    with pytest.raises(ProviderTimeout):
        await never.request(HELLO)
    assert second.calls == 0
    model = FallbackModel([first, second])
    streamed = [event async for event in model.stream(HELLO)]
    done = streamed[-1]
    assert isinstance(done, ResponseDone)
    # The answering model named no model: the wrapper says which one it was.
    assert (done.response.model, done.response.provider) == ("b", "flaky")


async def test_errors_that_are_not_provider_errors_are_not_caught() -> None:
    first = Flaky("a", MalformedToolCall("bad call"))
    second = Flaky("b", None)
    with pytest.raises(MalformedToolCall):
        await FallbackModel([first, second]).request(HELLO)
    assert second.calls == 0


def test_the_default_rule() -> None:
    assert should_fall_back(ProviderError("dropped", provider="x", retryable=True))
    assert not should_fall_back(ProviderError("odd", provider="x", retryable=False))
    assert should_fall_back(ProviderTimeout("slow", provider="x", status_code=504))
    assert not should_fall_back(ContextWindowExceeded("long", provider="x", status_code=400))


async def test_tools_are_supported_only_when_every_model_supports_them() -> None:
    no_tools = ScriptedModel()
    no_tools.supports_tools = False
    assert not FallbackModel([ScriptedModel(), no_tools]).supports_tools
    assert FallbackModel([ScriptedModel(), ScriptedModel()]).supports_tools


def test_output_formats_are_sent_only_when_every_model_takes_them() -> None:
    refuses = ScriptedModel()
    refuses.supports_output_format = False
    assert FallbackModel([ScriptedModel(), ScriptedModel()]).supports_output_format
    assert not FallbackModel([ScriptedModel(), refuses]).supports_output_format
