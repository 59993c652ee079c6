"""Approval pauses on the graph runtime: LangGraph's interrupt, Tidemill's decisions."""

from __future__ import annotations

import asyncio

import pytest
from graph_agents import graph_runtime, payer, payments

from tidemill import AgentInterrupt, ApprovalError, Decision, ThreadBusy
from tidemill.agents.checkpoint import Checkpointer, MemoryCheckpointer
from tidemill.agents.graph import GraphRuntime
from tidemill.agents.journal import ApprovalRequested, ToolStarted
from tidemill.types import ApprovalRequired, ToolCall, ToolCallStart


@pytest.fixture(autouse=True)
def _reset_payments() -> None:
    payments.clear()


async def pause(agent: GraphRuntime, thread_id: str = "t") -> AgentInterrupt:
    with pytest.raises(AgentInterrupt) as info:
        await agent.arun("pay bob", thread_id=thread_id)
    return info.value


async def test_a_call_needing_approval_pauses_before_it_runs(checkpointer: Checkpointer) -> None:
    call = ToolCall(name="pay", arguments={"to": "bob", "amount": 500})
    agent = graph_runtime(checkpointer, payer(call))
    interrupt = await pause(agent)
    assert interrupt.thread_id == "t"
    assert interrupt.pending == [call]
    assert interrupt.response is not None
    assert interrupt.response.messages[-1].tool_calls == (call,)
    assert payments == []
    assert await agent.apending_approvals("t") == [call]
    state = await agent.astate("t")
    assert state is not None
    assert state.status == "paused"
    # LangGraph's own view: the tools node waits on an interrupt naming the call.
    snapshot = await agent.agraph_state("t")
    assert snapshot.next == ("tools",)
    [waiting] = snapshot.interrupts
    assert waiting.value == {"thread_id": "t", "calls": [call.model_dump(mode="json")]}
    with pytest.raises(ApprovalError, match="waiting for approval"):
        await agent.arun("something else", thread_id="t")
    with pytest.raises(ApprovalError, match="waiting for decisions on pay"):
        await agent.aresume("t")


async def test_approve_runs_the_call_once_and_finishes(checkpointer: Checkpointer) -> None:
    call = ToolCall(name="pay", arguments={"to": "bob", "amount": 500})
    agent = graph_runtime(checkpointer, payer(call))
    await pause(agent)
    response = await agent.aresume("t", {call.id: Decision.approve(actor="ann")})
    assert response.output == "Result: paid 500 to bob"
    assert payments == [("bob", 500)]
    assert response.usage.requests == 2
    [record] = response.steps[0].approvals
    assert (record.outcome, record.actor, record.edited_arguments) == ("approved", "ann", None)
    # Resuming again cannot run it a second time.
    with pytest.raises(ApprovalError, match="nothing to resume"):
        await agent.aresume("t")
    with pytest.raises(ApprovalError, match="not waiting for approval"):
        await agent.aresume("t", approved=True)
    with pytest.raises(ApprovalError, match="not waiting for approval"):
        await agent.aresume("t", {call.id: Decision.approve()})
    assert payments == [("bob", 500)]
    starts = [r.event for r in await agent.ahistory("t") if isinstance(r.event, ToolStarted)]
    assert len(starts) == 1


async def test_two_resumes_at_once_run_the_call_once() -> None:
    call = ToolCall(name="pay", arguments={"to": "bob", "amount": 5})
    shared = MemoryCheckpointer()
    first = graph_runtime(shared, payer(call))
    second = graph_runtime(shared, payer(call))
    await pause(first)
    outcomes = await asyncio.gather(
        first.aresume("t", approved=True),
        second.aresume("t", approved=True),
        return_exceptions=True,
    )
    assert payments == [("bob", 5)]
    errors = [o for o in outcomes if isinstance(o, BaseException)]
    assert len(errors) == 1
    assert isinstance(errors[0], ApprovalError | ThreadBusy)


async def test_edited_arguments_run_exactly_as_authorised(checkpointer: Checkpointer) -> None:
    call = ToolCall(name="pay", arguments={"to": "bob", "amount": 500})
    agent = graph_runtime(checkpointer, payer(call))
    await pause(agent)
    response = await agent.aresume("t", {call.id: Decision.approve({"to": "bob", "amount": 50})})
    assert payments == [("bob", 50)]
    assert response.output == "Result: paid 50 to bob"
    [record] = response.steps[0].approvals
    assert record.outcome == "edited"
    assert (record.arguments, record.edited_arguments) == (
        {"to": "bob", "amount": 500},
        {"to": "bob", "amount": 50},
    )
    started = [r.event for r in await agent.ahistory("t") if isinstance(r.event, ToolStarted)]
    assert [e.call.arguments for e in started] == [{"to": "bob", "amount": 50}]
    # The model's own call stays in the transcript as it made it.
    assert response.messages[1].tool_calls[0].arguments == {"to": "bob", "amount": 500}


async def test_approved_flag_with_edited_arguments() -> None:
    call = ToolCall(name="pay", arguments={"to": "bob", "amount": 500})
    agent = graph_runtime(MemoryCheckpointer(), payer(call))
    await pause(agent)
    await agent.aresume("t", approved=True, edited_arguments={call.id: {"to": "al", "amount": 1}})
    assert payments == [("al", 1)]


async def test_reject_tells_the_model_and_runs_nothing(checkpointer: Checkpointer) -> None:
    call = ToolCall(name="pay", arguments={"to": "eve", "amount": 9999})
    model = payer(call)
    agent = graph_runtime(checkpointer, model)
    await pause(agent)
    response = await agent.aresume("t", approved=False, feedback="Eve is not a customer.")
    assert payments == []
    tool_message = model.requests[-1].messages[-1]
    assert tool_message.is_error
    assert tool_message.tool_call_id == call.id
    assert tool_message.content == "The user rejected this call. Feedback: Eve is not a customer."
    [record] = response.steps[0].approvals
    assert (record.outcome, record.feedback) == ("rejected", "Eve is not a customer.")


async def test_partial_decisions_leave_the_rest_pending(checkpointer: Checkpointer) -> None:
    first = ToolCall(name="pay", arguments={"to": "bob", "amount": 1})
    second = ToolCall(name="pay", arguments={"to": "eve", "amount": 2})
    agent = graph_runtime(checkpointer, payer(first, second))
    interrupt = await pause(agent)
    assert interrupt.pending == [first, second]

    with pytest.raises(AgentInterrupt) as again:
        await agent.aresume("t", {first.id: Decision.approve()})
    assert again.value.pending == [second]
    assert payments == [("bob", 1)]
    [waiting] = (await agent.agraph_state("t")).interrupts
    assert [c["id"] for c in waiting.value["calls"]] == [second.id]

    response = await agent.aresume("t", {second.id: Decision.reject("not eve")})
    assert payments == [("bob", 1)]
    rejected = "The user rejected this call. Feedback: not eve"
    assert response.output == f"Result: paid 1 to bob | {rejected}"
    outcomes = [(a.call_id, a.outcome) for a in response.steps[0].approvals]
    assert outcomes == [(first.id, "approved"), (second.id, "rejected")]
    # Tool results reach the graph in the order of the calls.
    assert [m.tool_call_id for m in response.messages if m.role == "tool"] == [
        first.id,
        second.id,
    ]


async def test_calls_without_approval_run_while_others_wait() -> None:
    call = ToolCall(name="pay", arguments={"to": "bob", "amount": 3})
    agent = graph_runtime(MemoryCheckpointer(), payer(ToolCall(name="balance"), call))
    interrupt = await pause(agent)
    assert [c.name for c in interrupt.pending] == ["pay"]
    assert payments == [("balance", 0)]
    response = await agent.aresume("t", approved=True)
    assert payments == [("balance", 0), ("bob", 3)]
    assert sorted(r.name for r in response.steps[0].tool_results) == ["balance", "pay"]


async def test_require_approval_pauses_every_call() -> None:
    agent = graph_runtime(
        MemoryCheckpointer(), payer(ToolCall(name="balance")), require_approval=True
    )
    interrupt = await pause(agent)
    assert [c.name for c in interrupt.pending] == ["balance"]
    assert payments == []


async def test_bad_decisions_are_refused_and_store_nothing() -> None:
    call = ToolCall(name="pay", arguments={"to": "bob", "amount": 5})
    agent = graph_runtime(MemoryCheckpointer(), payer(call))
    await pause(agent)
    before = len(await agent.ahistory("t"))
    with pytest.raises(ApprovalError, match="No pending call has the id 'nope'"):
        await agent.aresume("t", {"nope": Decision.approve()})
    with pytest.raises(ApprovalError, match=r"edited arguments .* are invalid: amount"):
        await agent.aresume("t", {call.id: Decision.approve({"to": "bob", "amount": "lots"})})
    with pytest.raises(ApprovalError, match="not both"):
        await agent.aresume("t", {call.id: Decision.approve()}, approved=True)
    assert len(await agent.ahistory("t")) == before
    assert payments == []


async def test_a_streamed_run_ends_with_approval_required() -> None:
    call = ToolCall(name="pay", arguments={"to": "bob", "amount": 5})
    agent = graph_runtime(MemoryCheckpointer(), payer(ToolCall(name="balance"), call))
    events = [event async for event in agent.astream("pay bob", thread_id="t")]
    last = events[-1]
    assert isinstance(last, ApprovalRequired)
    assert (last.thread_id, last.calls) == ("t", (call,))
    assert [e.call.name for e in events if isinstance(e, ToolCallStart)] == ["balance"]
    history = [r.event for r in await agent.ahistory("t")]
    assert [e.calls for e in history if isinstance(e, ApprovalRequested)] == [(call,)]
