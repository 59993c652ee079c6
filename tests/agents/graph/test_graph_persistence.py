"""A graph thread survives its runtime: paused by one object, resumed by a new one.

With memory and structured output too: the window and the schema apply to the
resumed run as to the first.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from graph_agents import graph_runtime, payer, payments
from pydantic import BaseModel

from tidemill import AgentInterrupt, Decision
from tidemill.agents import OutputSpec
from tidemill.agents.checkpoint import Checkpointer, PostgresCheckpointer, SQLiteCheckpointer
from tidemill.agents.memory import WindowMemory
from tidemill.llm import ModelRequest, ScriptedModel
from tidemill.types import Message, Role, ToolCall

CALL = ToolCall(id="call_persisted", name="pay", arguments={"to": "bob", "amount": 500})


@pytest.fixture(autouse=True)
def _reset_payments() -> None:
    payments.clear()


async def pause_then_resume_elsewhere(before: Checkpointer, after: Checkpointer) -> None:
    """Pause on `before`'s runtime, resume with a new runtime on `after`, the same store."""
    first = graph_runtime(before, payer(CALL))
    with pytest.raises(AgentInterrupt) as info:
        await first.arun("pay bob", thread_id="t")
    assert info.value.pending == [CALL]
    first.close()

    model = payer(CALL)
    second = graph_runtime(after, model)
    assert await second.apending_approvals("t") == [CALL]
    assert (await second.agraph_state("t")).next == ("tools",)
    response = await second.aresume("t", {CALL.id: Decision.approve({"to": "bob", "amount": 5})})

    assert response.output == "Result: paid 5 to bob"
    assert payments == [("bob", 5)]
    assert response.usage.requests == 2  # the first runtime's turn counts too
    assert [m.content for m in response.messages] == [
        "pay bob",
        "Paying.",
        "paid 5 to bob",
        "Result: paid 5 to bob",
    ]
    kinds = {record.event.kind for record in await second.ahistory("t")}
    assert {"graph_checkpoint", "graph_writes", "approval_decided", "finished"} <= kinds
    # The thread goes on: a later run sees the whole conversation (and pays again).
    with pytest.raises(AgentInterrupt):
        await second.arun("again", thread_id="t")
    assert [m.content for m in model.requests[-1].messages] == [
        *(m.content for m in response.messages),
        "again",
    ]
    second.close()


async def test_sqlite_resume_in_a_new_runtime(tmp_path: Path) -> None:
    path = tmp_path / "graph.db"
    before, after = SQLiteCheckpointer(path), SQLiteCheckpointer(path)
    try:
        await pause_then_resume_elsewhere(before, after)
    finally:
        await before.aclose()
        await after.aclose()


@pytest.mark.postgres
async def test_postgres_resume_in_a_new_runtime(
    postgres_checkpointer: PostgresCheckpointer, postgres_url: str
) -> None:
    after = PostgresCheckpointer(postgres_url, schema=postgres_checkpointer.schema)
    try:
        await pause_then_resume_elsewhere(postgres_checkpointer, after)
    finally:
        await after.aclose()


class Receipt(BaseModel):
    to: str
    paid: int


def cashier(request: ModelRequest) -> str | Message:
    """Pays when asked to, then answers a receipt: badly once, then as the schema says."""
    last = request.messages[-1]
    if last.role == Role.USER and last.content == "pay bob":
        return Message.assistant("Paying.", tool_calls=(CALL,))
    if last.role == Role.TOOL:
        return "Paid bob, all good."  # not JSON: sent back with what is wrong
    if last.content.startswith("Your answer did not match"):
        return '{"to": "bob", "paid": 500}'
    return '{"to": "nobody", "paid": 0}'


async def test_sqlite_resume_with_memory_and_output_in_a_new_runtime(tmp_path: Path) -> None:
    path = tmp_path / "graph.db"
    options: dict[str, object] = {
        "memory": WindowMemory(size=4),
        "output": OutputSpec.of(Receipt),
    }
    before = SQLiteCheckpointer(path)
    first = graph_runtime(before, ScriptedModel(handler=cashier), **options)
    assert (await first.arun("hello", thread_id="t")).output == Receipt(to="nobody", paid=0)
    with pytest.raises(AgentInterrupt):
        await first.arun("pay bob", thread_id="t")
    first.close()
    await before.aclose()
    assert payments == []

    after = SQLiteCheckpointer(path)
    model = ScriptedModel(handler=cashier)
    second = graph_runtime(after, model, **options)
    try:
        response = await second.aresume("t", approved=True)
    finally:
        second.close()
        await after.aclose()

    assert response.output == Receipt(to="bob", paid=500)
    assert payments == [("bob", 500)]
    sent = [[m.content for m in r.messages if m.role != Role.SYSTEM] for r in model.requests]
    # The window: the paused run's turns, not the earlier run on the thread.
    assert sent[0] == ["pay bob", "Paying.", "paid 500 to bob"]
    assert sent[1][-1].startswith("Your answer did not match the required JSON Schema")
    assert all("hello" not in messages for messages in sent)
    assert all(r.output_format is not None for r in model.requests)
    # The journal and the graph keep the whole thread.
    contents = [m.content for m in response.messages]
    assert contents[:2] == ["hello", '{"to": "nobody", "paid": 0}']
    assert contents[-1] == '{"to": "bob", "paid": 500}'
    assert response.usage.requests == 3  # this run's: the paused turn and two answers
