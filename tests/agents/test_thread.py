"""ThreadWriter: appends that lose a race to decisions, and those that must not move past them."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from tidemill import ThreadBusy
from tidemill.agents._thread import ThreadWriter, load_state
from tidemill.agents.checkpoint import MemoryCheckpointer
from tidemill.agents.journal import (
    ApprovalDecided,
    ApprovalRequested,
    ModelTurn,
    ToolFinished,
    ToolStarted,
    UserInput,
)
from tidemill.types import Decision, Message, ModelResponse, ToolCall, ToolResult

FREE = ToolCall(id="free", name="lookup")
PAY = ToolCall(id="pay", name="pay")


async def paused_thread() -> MemoryCheckpointer:
    checkpointer = MemoryCheckpointer()
    turn = ModelResponse(message=Message.assistant("", tool_calls=(FREE, PAY)))
    await checkpointer.append(
        "t",
        [
            UserInput(messages=(Message.user("go"),), run_id="r"),
            ModelTurn(response=turn),
            ApprovalRequested(calls=(PAY,)),
            ToolStarted(call=FREE),
        ],
        after=0,
    )
    return checkpointer


def decided(call: ToolCall) -> ApprovalDecided:
    return ApprovalDecided(
        call_id=call.id, decision=Decision.approve(), decided_at=datetime.now(UTC)
    )


async def test_a_result_moves_past_a_concurrent_decision() -> None:
    checkpointer = await paused_thread()
    writer = ThreadWriter(checkpointer, await load_state(checkpointer, "t"))
    await checkpointer.append("t", [decided(PAY)], after=4)  # a person, elsewhere
    result = ToolResult(call_id=FREE.id, name=FREE.name, content="found")
    await writer.append(ToolFinished(result=result))
    kinds = [r.event.kind for r in await checkpointer.read("t")]
    assert kinds[-2:] == ["approval_decided", "tool_finished"]
    assert writer.state.seq == 6
    assert "pay" in writer.state.approved
    assert writer.state.status == "running"


async def test_a_decision_never_moves_past_another_decision() -> None:
    checkpointer = await paused_thread()
    writer = ThreadWriter(checkpointer, await load_state(checkpointer, "t"))
    await checkpointer.append("t", [decided(PAY)], after=4)
    with pytest.raises(ThreadBusy, match="changed by another process"):
        await writer.append(decided(PAY))
    assert [r.event.kind for r in await checkpointer.read("t")].count("approval_decided") == 1


async def test_a_result_does_not_move_past_another_drivers_work() -> None:
    checkpointer = await paused_thread()
    writer = ThreadWriter(checkpointer, await load_state(checkpointer, "t"))
    result = ToolResult(call_id=FREE.id, name=FREE.name, content="by someone else")
    await checkpointer.append("t", [ToolFinished(result=result)], after=4)
    with pytest.raises(ThreadBusy):
        await writer.append(ToolFinished(result=result))
    assert len(await checkpointer.read("t")) == 5
