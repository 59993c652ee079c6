"""A graph thread survives its runtime: paused by one object, resumed by a new one."""

from __future__ import annotations

from pathlib import Path

import pytest
from graph_agents import graph_runtime, payer, payments

from tidemill import AgentInterrupt, Decision
from tidemill.agents.checkpoint import Checkpointer, PostgresCheckpointer, SQLiteCheckpointer
from tidemill.types import ToolCall

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
