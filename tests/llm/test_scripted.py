from __future__ import annotations

import pytest

from tidemill import ConfigurationError, ScriptExhausted
from tidemill.llm import ModelRequest, ScriptedModel, resolve_model
from tidemill.types import Message, ModelResponse, ResponseDone, TextDelta, ToolCall, ToolCallDelta


def ask(text: str = "hi") -> ModelRequest:
    return ModelRequest([Message.user(text)])


async def test_plays_the_script_and_records_requests() -> None:
    call = ToolCall(name="lookup", arguments={"id": 7})
    model = ScriptedModel(["", "Found it."], tool_calls=[[call], []])
    first = await model.request(ask("find 7"))
    second = await model.request(ask("and?"))
    assert first.message.tool_calls == (call,)
    assert first.finish_reason == "tool_calls"
    assert second.message.content == "Found it."
    assert second.finish_reason == "stop"
    assert [r.messages[0].content for r in model.requests] == ["find 7", "and?"]
    assert model.turns == 2


async def test_strict_script_fails_loudly_when_it_runs_out() -> None:
    model = ScriptedModel(["once"], strict=True)
    await model.request(ask())
    with pytest.raises(ScriptExhausted, match="called 2 time"):
        await model.request(ask())


async def test_lenient_script_repeats_its_last_text_without_tool_calls() -> None:
    model = ScriptedModel(["a", "b"], tool_calls=[[], [ToolCall(name="t")]])
    for _ in range(2):
        await model.request(ask())
    again = await model.request(ask())
    assert (again.message.content, again.message.tool_calls) == ("b", ())
    assert (await ScriptedModel().request(ask())).message.content == ""


async def test_handler_answers_sync_or_async_with_text_message_or_response() -> None:
    def by_text(request: ModelRequest) -> str:
        return request.messages[-1].content.upper()

    async def by_message(request: ModelRequest) -> Message:
        return Message.assistant("m")

    whole = ModelResponse(message=Message.assistant("r"), model="x", finish_reason="length")
    assert (await ScriptedModel(handler=by_text).request(ask("yo"))).message.content == "YO"
    assert (await ScriptedModel(handler=by_message).request(ask())).message.content == "m"
    assert await ScriptedModel(handler=lambda _: whole).request(ask()) == whole


def test_script_and_handler_together_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="not both"):
        ScriptedModel(["a"], handler=lambda _: "b")


async def test_usage_estimates_grow_with_the_conversation() -> None:
    model = ScriptedModel(handler=lambda _: "ok")
    history = [Message.user("x" * 400)]
    first = await model.request(ModelRequest(history))
    history += [first.message, Message.user("y" * 40)]
    second = await model.request(ModelRequest(list(history)))
    assert first.usage.input_tokens == 100
    assert second.usage.input_tokens == 100 + 1 + 10
    assert second.usage.requests == 1
    assert second.usage.output_tokens == 1
    # A conversation that is not an extension of the last one is counted afresh.
    third = await model.request(ask("z" * 8))
    assert third.usage.input_tokens == 2


async def test_stream_yields_words_tool_call_deltas_then_the_response() -> None:
    call = ToolCall(name="t", arguments={"a": 1})
    model = ScriptedModel(["hello big world"], tool_calls=[[call]])
    events = [event async for event in model.stream(ask())]
    assert [e.delta for e in events if isinstance(e, TextDelta)] == ["hello", " big", " world"]
    deltas = [e for e in events if isinstance(e, ToolCallDelta)]
    assert [(d.call_id, d.name, d.arguments_delta) for d in deltas] == [(call.id, "t", '{"a": 1}')]
    assert isinstance(events[-1], ResponseDone)
    assert events[-1].response.message.content == "hello big world"


def test_resolve_model_builds_the_scripted_model_from_fake() -> None:
    model = resolve_model("fake", responses=["x"], strict=True)
    assert isinstance(model, ScriptedModel)
    assert model.strict
    assert resolve_model("scripted").provider == "scripted"
    with pytest.raises(ConfigurationError, match="Bad option"):
        resolve_model("fake", temperature=0)
