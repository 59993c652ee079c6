"""The graph runtime on bounded journals (`max_history`), and forks of graph threads."""

from __future__ import annotations

from pathlib import Path

import pytest
from graph_agents import graph_runtime, payer, payments

from tidemill import AgentInterrupt, Decision
from tidemill.agents.checkpoint import MemoryCheckpointer, SQLiteCheckpointer
from tidemill.types import ToolCall

CALL = ToolCall(id="call_pay", name="pay", arguments={"to": "bob", "amount": 5})


@pytest.fixture(autouse=True)
def _reset_payments() -> None:
    payments.clear()


async def test_a_compacted_graph_thread_resumes_in_a_new_runtime(tmp_path: Path) -> None:
    path = tmp_path / "graph.db"
    before = SQLiteCheckpointer(path, max_history=5)
    after = SQLiteCheckpointer(path, max_history=5)
    try:
        first = graph_runtime(before, payer(CALL))
        with pytest.raises(AgentInterrupt):
            await first.arun("pay bob", thread_id="t")
        first.close()
        records = await after.read("t")
        assert len(records) <= 5 and records[0].event.kind == "snapshot"

        model = payer(CALL)
        second = graph_runtime(after, model)
        assert await second.apending_approvals("t") == [CALL]
        assert (await second.agraph_state("t")).next == ("tools",)
        response = await second.aresume("t", {CALL.id: Decision.approve()})
        assert response.output == "Result: paid 5 to bob"
        assert payments == [("bob", 5)]
        assert len(await after.read("t")) <= 5
        with pytest.raises(AgentInterrupt):
            await second.arun("again", thread_id="t")
        assert [m.content for m in model.requests[-1].messages] == [
            *(m.content for m in response.messages),
            "again",
        ]
        second.close()
    finally:
        await before.aclose()
        await after.aclose()


async def test_a_fork_of_a_paused_graph_thread_resumes_on_its_own() -> None:
    saver = MemoryCheckpointer()
    runtime = graph_runtime(saver, payer(CALL))
    with pytest.raises(AgentInterrupt):
        await runtime.arun("pay bob", thread_id="t")
    fork = await runtime.afork("t", at=(await runtime.ahistory("t"))[-1].seq)
    assert (await runtime.agraph_state(fork)).next == ("tools",)
    response = await runtime.aresume(fork, {CALL.id: Decision.approve()})
    assert response.output == "Result: paid 5 to bob"
    assert await runtime.apending_approvals("t") == [CALL]  # the original still waits
    runtime.close()
