"""A tool that raises `ToolSuspended`: the run stops, the call stays open, a resume re-runs it."""

from __future__ import annotations

import pytest

from tidemill import AgentSuspended, ToolSuspended, tool
from tidemill.agents import AgentRuntime, MemoryCheckpointer
from tidemill.llm import ScriptedModel
from tidemill.tools import ToolContext
from tidemill.types import ToolCall


def _calls(*names: str) -> list[list[ToolCall]]:
    return [[ToolCall(id=f"c{i}", name=name) for i, name in enumerate(names)], []]


async def test_a_suspended_call_runs_again_on_resume_with_the_same_key() -> None:
    ready = False
    keys: list[str] = []

    @tool
    def slow(ctx: ToolContext) -> str:
        """Work done elsewhere."""
        keys.append(ctx.idempotency_key)
        if not ready:
            raise ToolSuspended("not yet", reason={"child": "x"})
        return "finished elsewhere"

    checkpointer = MemoryCheckpointer()
    model = ScriptedModel(["", "done"], tool_calls=_calls("slow"))
    runtime = AgentRuntime(model=model, tools=[slow], checkpointer=checkpointer)
    with pytest.raises(AgentSuspended) as info:
        await runtime.arun("go", thread_id="t")
    (call, suspended), *rest = info.value.suspended
    assert rest == []
    assert call.name == "slow"
    assert suspended.reason == {"child": "x"}
    assert "retry_in_flight=True" in str(info.value)
    state = await runtime.astate("t")
    assert "c0" in state.open_calls and "c0" in state.attempts  # started, no result

    ready = True
    response = await runtime.aresume("t", retry_in_flight=True)
    assert response.output == "done"
    assert len(keys) == 2 and keys[0] == keys[1]  # the same idempotency key both times
    results = [m for m in response.messages if m.role == "tool"]
    assert [m.content for m in results] == ["finished elsewhere"]
    assert len(model.requests) == 2  # the model was not asked again for the suspended turn


async def test_the_other_calls_of_the_turn_finish_first_and_do_not_run_again() -> None:
    runs: list[str] = []
    ready = False

    @tool
    def quick() -> str:
        """Done at once."""
        runs.append("quick")
        return "quick result"

    @tool
    def slow() -> str:
        """Work done elsewhere."""
        runs.append("slow")
        if not ready:
            raise ToolSuspended("not yet")
        return "slow result"

    model = ScriptedModel(["", "done"], tool_calls=_calls("slow", "quick"))
    runtime = AgentRuntime(model=model, tools=[slow, quick], checkpointer=MemoryCheckpointer())
    with pytest.raises(AgentSuspended) as info:
        await runtime.arun("go", thread_id="t")
    assert [call.id for call, _ in info.value.suspended] == ["c0"]
    assert sorted(runs) == ["quick", "slow"]
    ready = True
    response = await runtime.aresume("t", retry_in_flight=True)
    assert runs.count("quick") == 1  # finished before the suspension: not run again
    assert runs.count("slow") == 2
    contents = {m.tool_call_id: m.content for m in response.messages if m.role == "tool"}
    assert contents == {"c0": "slow result", "c1": "quick result"}


async def test_in_sequence_the_calls_after_a_suspended_one_wait() -> None:
    runs: list[str] = []
    ready = False

    @tool
    def first() -> str:
        """Suspends."""
        runs.append("first")
        if not ready:
            raise ToolSuspended("not yet")
        return "one"

    @tool
    def second() -> str:
        """Runs after."""
        runs.append("second")
        return "two"

    model = ScriptedModel(["", "done"], tool_calls=_calls("first", "second"))
    runtime = AgentRuntime(
        model=model, tools=[first, second], checkpointer=MemoryCheckpointer(), parallel_tools=False
    )
    with pytest.raises(AgentSuspended):
        await runtime.arun("go", thread_id="t")
    assert runs == ["first"]
    ready = True
    response = await runtime.aresume("t", retry_in_flight=True)
    assert runs == ["first", "first", "second"]
    assert response.output == "done"
