"""Guardrails on the graph runtime: input before it is journaled, answers before they go out."""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator

import pytest

from tidemill import GuardrailViolation
from tidemill.agents.checkpoint import MemoryCheckpointer
from tidemill.agents.graph import GraphRuntime
from tidemill.agents.guardrails import OnViolation, RuleGuardrail
from tidemill.agents.journal import ModelTurn, RunFailed, UserInput
from tidemill.llm import ModelRequest, ModelStreamEvent, ScriptedModel
from tidemill.types import ResponseDone, RunDone, RunStopped, StreamEvent, TextDelta

SECRET = "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789ABCD"
ANSWER = "Mail ann@example.org or call +1 415 555 0100."
REDACTED = "Mail [EMAIL] or call [PHONE]."


class Trickle(ScriptedModel):
    """Streams each answer three characters at a time, so a match arrives in pieces."""

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelStreamEvent, None]:
        response = await self.request(request)
        text = response.message.content
        for start in range(0, len(text), 3):
            yield TextDelta(delta=text[start : start + 3])
        yield ResponseDone(response=response)


def guarded(model: ScriptedModel, action: OnViolation) -> GraphRuntime:
    return GraphRuntime(
        model=model,
        guardrail=RuleGuardrail(on_violation=action),
        checkpointer=MemoryCheckpointer(),
    )


async def collect(stream: AsyncIterator[StreamEvent], into: list[StreamEvent]) -> None:
    """Append what `stream` yields to `into`, until it ends or raises."""
    async for event in stream:
        into.append(event)


async def events(runtime: GraphRuntime, prompt: str) -> list[StreamEvent]:
    return [event async for event in runtime.astream(prompt, thread_id="t")]


async def test_input_is_redacted_before_it_is_journaled_or_sent() -> None:
    model = ScriptedModel(["noted"])
    runtime = guarded(model, "redact")
    response = await runtime.arun("Mail me at ann@example.org", thread_id="t")
    assert model.requests[0].messages[-1].content == "Mail me at [EMAIL]"
    assert response.messages[0].content == "Mail me at [EMAIL]"
    [first, *_] = [r.event for r in await runtime.ahistory("t")]
    assert isinstance(first, UserInput)
    assert first.messages[0].content == "Mail me at [EMAIL]"
    graph_messages = (await runtime.agraph_state("t")).values["messages"]
    assert "ann@example.org" not in graph_messages[0].content


async def test_blocked_input_stores_nothing() -> None:
    model = ScriptedModel(["never"])
    runtime = guarded(model, "block")
    with pytest.raises(GuardrailViolation) as info:
        await runtime.arun(f"my key is {SECRET}", thread_id="t")
    assert info.value.side == "input"
    assert SECRET not in str(info.value)
    assert model.requests == []
    assert await runtime.ahistory("t") == []
    with pytest.raises(GuardrailViolation):
        await events(runtime, f"my key is {SECRET}")
    assert await runtime.ahistory("t") == []


async def test_an_answer_is_redacted_in_the_response_the_journal_and_the_graph() -> None:
    runtime = guarded(ScriptedModel([ANSWER]), "redact")
    response = await runtime.arun("How do I reach Ann?", thread_id="t")
    assert response.output == REDACTED
    turns = [r.event for r in await runtime.ahistory("t") if isinstance(r.event, ModelTurn)]
    assert [t.response.message.content for t in turns] == [REDACTED]
    state = await runtime.astate("t")
    assert state is not None
    assert state.output == REDACTED
    graph_messages = (await runtime.agraph_state("t")).values["messages"]
    assert graph_messages[-1].content == REDACTED


async def test_a_blocked_answer_fails_the_run_journaled_and_unjournaled_text() -> None:
    runtime = guarded(ScriptedModel([f"Here: {SECRET}"]), "block")
    with pytest.raises(GuardrailViolation) as info:
        await runtime.arun("What is the key?", thread_id="t")
    assert info.value.side == "output"
    assert info.value.response is not None
    assert info.value.response.thread_id == "t"
    history = [r.event for r in await runtime.ahistory("t")]
    assert not any(isinstance(e, ModelTurn) for e in history)
    [failed] = [e for e in history if isinstance(e, RunFailed)]
    assert failed.reason == "guardrail"
    assert SECRET not in str([e.model_dump() for e in history])
    state = await runtime.astate("t")
    assert state is not None
    assert state.status == "failed"
    # The thread takes a new run, whose answer is checked too.
    with pytest.raises(GuardrailViolation):
        await runtime.arun("Again?", thread_id="t")
    assert [e.kind for e in (r.event for r in await runtime.ahistory("t"))].count("failed") == 2


async def test_a_streamed_answer_is_redacted_as_it_streams() -> None:
    runtime = guarded(Trickle([ANSWER]), "redact")
    streamed = await events(runtime, "How do I reach Ann?")
    text = "".join(e.delta for e in streamed if isinstance(e, TextDelta))
    assert text == REDACTED
    assert not any("@example" in e.delta for e in streamed if isinstance(e, TextDelta))
    [done] = [e for e in streamed if isinstance(e, ResponseDone)]
    assert done.response.message.content == REDACTED
    assert isinstance(streamed[-1], RunDone)
    assert streamed[-1].response.output == REDACTED


async def test_a_streamed_answer_that_is_blocked_stops_before_its_text_goes_out() -> None:
    runtime = guarded(Trickle([f"The key is {SECRET} - keep it safe."]), "block")
    streamed: list[StreamEvent] = []
    with pytest.raises(GuardrailViolation):
        await collect(runtime.astream("Key?", thread_id="t"), streamed)
    text = "".join(e.delta for e in streamed if isinstance(e, TextDelta))
    assert "sk-proj" not in text
    assert isinstance(streamed[-1], RunStopped)
    assert streamed[-1].error == "GuardrailViolation"
    kinds = [r.event.kind for r in await runtime.ahistory("t")]
    assert "model_response" not in kinds
    assert "failed" in kinds


def test_the_guardrail_is_described() -> None:
    described = guarded(ScriptedModel(), "block").describe()
    assert described["guardrail"] == RuleGuardrail(on_violation="block").describe()
