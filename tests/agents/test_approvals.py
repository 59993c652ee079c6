"""Approval pauses and resumes, on every checkpointer backend."""

from __future__ import annotations

import asyncio

import pytest

from tidemill import (
    AgentInterrupt,
    AgentRuntime,
    ApprovalError,
    Decision,
    ThreadBusy,
    tool,
)
from tidemill.agents.checkpoint import Checkpointer
from tidemill.agents.journal import ToolStarted
from tidemill.llm import ModelRequest, ScriptedModel
from tidemill.types import Message, ToolCall, ToolCallStart

payments: list[tuple[str, int]] = []


@tool(requires_approval=True)
def pay(to: str, amount: int) -> str:
    """Send money.

    Args:
        to: Who gets it.
        amount: How much, in cents.
    """
    payments.append((to, amount))
    return f"paid {amount} to {to}"


@tool
def balance() -> int:
    """Read the balance."""
    payments.append(("balance", 0))
    return 100


@pytest.fixture(autouse=True)
def _reset_payments() -> None:
    payments.clear()


def last_tool_message(request: ModelRequest) -> str:
    return request.messages[-1].content


def payer(*calls: ToolCall) -> ScriptedModel:
    """Asks for `calls` in one turn, then answers with what the last tool said."""

    def handler(request: ModelRequest) -> str | Message:
        if request.messages[-1].role == "user":
            return Message.assistant("Paying.", tool_calls=calls)
        return "Result: " + " | ".join(m.content for m in request.messages if m.role == "tool")

    return ScriptedModel(handler=handler)


def runtime(checkpointer: Checkpointer, model: ScriptedModel, **kw: object) -> AgentRuntime:
    return AgentRuntime(model=model, tools=[pay, balance], checkpointer=checkpointer, **kw)  # type: ignore[arg-type]


async def pause(agent: AgentRuntime, thread_id: str = "t") -> AgentInterrupt:
    with pytest.raises(AgentInterrupt) as info:
        await agent.arun("pay bob", thread_id=thread_id)
    return info.value


async def test_a_call_needing_approval_pauses_before_it_runs(checkpointer: Checkpointer) -> None:
    call = ToolCall(name="pay", arguments={"to": "bob", "amount": 500})
    agent = runtime(checkpointer, payer(call))
    interrupt = await pause(agent)
    assert interrupt.thread_id == "t"
    assert interrupt.pending == [call]
    assert interrupt.response is not None
    assert len(interrupt.response.steps) == 1
    assert payments == []
    assert await agent.apending_approvals("t") == [call]
    state = await agent.astate("t")
    assert state is not None
    assert state.status == "paused"
    with pytest.raises(ApprovalError, match="waiting for approval"):
        await agent.arun("something else", thread_id="t")


async def test_approve_runs_the_call_once_and_finishes(checkpointer: Checkpointer) -> None:
    call = ToolCall(name="pay", arguments={"to": "bob", "amount": 500})
    agent = runtime(checkpointer, payer(call))
    await pause(agent)
    response = await agent.aresume("t", {call.id: Decision.approve(actor="ann")})
    assert response.output == "Result: paid 500 to bob"
    assert payments == [("bob", 500)]
    assert response.usage.requests == 2  # usage accumulates across the pause
    [record] = response.steps[0].approvals
    assert (record.outcome, record.actor, record.edited_arguments) == ("approved", "ann", None)
    assert [s.index for s in response.steps] == [0, 1]
    assert await agent.apending_approvals("t") == []
    # Resuming again cannot run it a second time.
    with pytest.raises(ApprovalError, match="nothing to resume"):
        await agent.aresume("t")
    with pytest.raises(ApprovalError, match="not waiting for approval"):
        await agent.aresume("t", approved=True)
    with pytest.raises(ApprovalError, match="not waiting for approval"):
        await agent.aresume("t", {call.id: Decision.approve()})
    assert payments == [("bob", 500)]


async def test_edited_arguments_run_exactly_as_authorised(checkpointer: Checkpointer) -> None:
    call = ToolCall(name="pay", arguments={"to": "bob", "amount": 500})
    agent = runtime(checkpointer, payer(call))
    await pause(agent)
    response = await agent.aresume("t", {call.id: Decision.approve({"to": "bob", "amount": 50})})
    assert payments == [("bob", 50)]
    assert response.output == "Result: paid 50 to bob"
    [record] = response.steps[0].approvals
    assert record.outcome == "edited"
    assert record.arguments == {"to": "bob", "amount": 500}
    assert record.edited_arguments == {"to": "bob", "amount": 50}
    started = [r.event for r in await agent.ahistory("t") if isinstance(r.event, ToolStarted)]
    assert [e.call.arguments for e in started] == [{"to": "bob", "amount": 50}]
    # The model's own call stays in the transcript as it made it.
    assert response.messages[1].tool_calls[0].arguments == {"to": "bob", "amount": 500}


async def test_approved_flag_with_edited_arguments(checkpointer: Checkpointer) -> None:
    call = ToolCall(name="pay", arguments={"to": "bob", "amount": 500})
    agent = runtime(checkpointer, payer(call))
    await pause(agent)
    await agent.aresume("t", approved=True, edited_arguments={call.id: {"to": "al", "amount": 1}})
    assert payments == [("al", 1)]


async def test_reject_tells_the_model_and_runs_nothing(checkpointer: Checkpointer) -> None:
    call = ToolCall(name="pay", arguments={"to": "eve", "amount": 9999})
    model = payer(call)
    agent = runtime(checkpointer, model)
    await pause(agent)
    response = await agent.aresume("t", approved=False, feedback="Eve is not a customer.")
    assert payments == []
    tool_message = model.requests[-1].messages[-1]
    assert tool_message.is_error
    assert tool_message.tool_call_id == call.id
    assert "rejected" in tool_message.content
    assert "Eve is not a customer." in tool_message.content
    [record] = response.steps[0].approvals
    assert (record.outcome, record.feedback) == ("rejected", "Eve is not a customer.")


async def test_partial_decisions_leave_the_rest_pending(checkpointer: Checkpointer) -> None:
    first = ToolCall(name="pay", arguments={"to": "bob", "amount": 1})
    second = ToolCall(name="pay", arguments={"to": "eve", "amount": 2})
    agent = runtime(checkpointer, payer(first, second))
    interrupt = await pause(agent)
    assert interrupt.pending == [first, second]

    with pytest.raises(AgentInterrupt) as again:
        await agent.aresume("t", {first.id: Decision.approve()})
    assert again.value.pending == [second]
    assert payments == [("bob", 1)]

    response = await agent.aresume("t", {second.id: Decision.reject("not eve")})
    assert payments == [("bob", 1)]
    assert response.output == "Result: paid 1 to bob | " + response.messages[-2].content
    outcomes = [(a.call_id, a.outcome) for a in response.steps[0].approvals]
    assert outcomes == [(first.id, "approved"), (second.id, "rejected")]


async def test_calls_without_approval_run_while_others_wait(checkpointer: Checkpointer) -> None:
    call = ToolCall(name="pay", arguments={"to": "bob", "amount": 3})
    agent = runtime(checkpointer, payer(ToolCall(name="balance"), call))
    interrupt = await pause(agent)
    assert [c.name for c in interrupt.pending] == ["pay"]
    assert payments == [("balance", 0)]
    response = await agent.aresume("t", approved=True)
    assert payments == [("balance", 0), ("bob", 3)]
    assert sorted(r.name for r in response.steps[0].tool_results) == ["balance", "pay"]


async def test_human_in_the_loop_pauses_every_call(checkpointer: Checkpointer) -> None:
    agent = runtime(checkpointer, payer(ToolCall(name="balance")), require_approval=True)
    interrupt = await pause(agent)
    assert [c.name for c in interrupt.pending] == ["balance"]
    assert payments == []


async def test_bad_decisions_are_refused_and_store_nothing(checkpointer: Checkpointer) -> None:
    call = ToolCall(name="pay", arguments={"to": "bob", "amount": 5})
    agent = runtime(checkpointer, payer(call))
    await pause(agent)
    before = len(await agent.ahistory("t"))

    with pytest.raises(ApprovalError, match="No pending call has the id 'nope'") as info:
        await agent.aresume("t", {"nope": Decision.approve()})
    assert "pay (" in str(info.value.hint)
    with pytest.raises(ApprovalError, match=r"edited arguments .* are invalid: amount"):
        await agent.aresume("t", {call.id: Decision.approve({"to": "bob", "amount": "lots"})})
    with pytest.raises(ApprovalError, match="not both"):
        await agent.aresume("t", {call.id: Decision.approve()}, approved=True)
    with pytest.raises(ApprovalError, match="only apply to approved"):
        await agent.aresume("t", approved=False, edited_arguments={call.id: {}})
    with pytest.raises(ApprovalError, match="waiting for decisions on pay"):
        await agent.aresume("t")

    assert len(await agent.ahistory("t")) == before
    assert payments == []
    assert (await agent.aresume("t", approved=True)).output == "Result: paid 5 to bob"


async def test_resume_of_an_unknown_thread(checkpointer: Checkpointer) -> None:
    agent = runtime(checkpointer, payer())
    with pytest.raises(ApprovalError, match=r"nothing to resume \(it is new"):
        await agent.aresume("ghost")


async def test_another_agent_object_resumes_from_the_journal(checkpointer: Checkpointer) -> None:
    call = ToolCall(name="pay", arguments={"to": "bob", "amount": 7})
    await pause(runtime(checkpointer, payer(call)))
    fresh = runtime(checkpointer, payer(call))
    assert await fresh.apending_approvals("t") == [call]
    response = await fresh.aresume("t", approved=True)
    assert payments == [("bob", 7)]
    assert len(response.steps) == 2
    assert response.steps[0].approvals[0].outcome == "approved"


async def test_racing_resumes_run_the_approved_call_once(checkpointer: Checkpointer) -> None:
    call = ToolCall(name="pay", arguments={"to": "bob", "amount": 8})
    await pause(runtime(checkpointer, payer(call)))
    contenders = [runtime(checkpointer, payer(call)) for _ in range(4)]
    outcomes = await asyncio.gather(
        *(agent.aresume("t", approved=True) for agent in contenders), return_exceptions=True
    )
    winners = [o for o in outcomes if not isinstance(o, BaseException)]
    losers = [o for o in outcomes if isinstance(o, BaseException)]
    assert len(winners) == 1
    assert all(isinstance(o, ThreadBusy | ApprovalError) for o in losers), losers
    assert payments == [("bob", 8)]


async def test_streaming_ends_at_the_pause_and_resume_finishes(checkpointer: Checkpointer) -> None:
    call = ToolCall(name="pay", arguments={"to": "bob", "amount": 9})
    agent = runtime(checkpointer, payer(call))
    events = [e async for e in agent.astream("pay", thread_id="s")]
    assert events[-1].type == "approval_required"
    assert events[-1].calls == (call,)  # type: ignore[union-attr]
    assert not any(isinstance(e, ToolCallStart) for e in events)
    assert (await agent.aresume("s", approved=True)).output == "Result: paid 9 to bob"
