"""A compiled LangGraph subgraph as a node of the agent graph, durable across restarts.

The first test runs the example of docs/agents/graph.md ("A subgraph as a
node") as written and checks what it prints; the others take the same
shape further: a process that stops inside the subgraph, a resume in a new
runtime on the same SQLite journal.
"""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest
from graph_agents import add
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph

from tidemill.agents.checkpoint import Checkpointer, MemoryCheckpointer, SQLiteCheckpointer
from tidemill.agents.graph import GraphRuntime, GraphState
from tidemill.llm import ScriptedModel
from tidemill.types import Message, ToolCall

DOCS = Path(__file__).resolve().parents[3] / "docs" / "agents" / "graph.md"
SECTION = "## A subgraph as a node"

Update = dict[str, list[Message]]


class PowerCut(Exception):
    """The process stopping in the middle of a node."""


def test_the_documented_subgraph_example_runs_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    page = DOCS.read_text()
    before, section = page.split(SECTION)
    section = section.split("\n## ", 1)[0]
    fence = re.compile(r"^```python[^\n]*\n(.*?)^```", flags=re.DOTALL | re.MULTILINE)
    setup, example = fence.findall(before), fence.findall(section)
    assert len(example) == 1
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": "docs.graph"}
    with contextlib.redirect_stdout(io.StringIO()):
        for index, block in enumerate(setup):
            exec(compile(block, f"graph.md block {index}", "exec"), namespace)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(example[0], "graph.md subgraph example", "exec"), namespace)
    assert printed.getvalue().splitlines() == [
        "['refund']",
        "Refunded A-17; it takes five days.",
        "['refunded A-17', 'Audit: 1 tool result(s) checked.', "
        "'Audit: say that a refund takes five days.']",
        "['', 'audit']",
    ]
    assert (tmp_path / "support.db").is_file()


class Audit:
    """A two-step subgraph, `check` then `remind`, that can stop the process once in `remind`."""

    def __init__(self, *, crash: bool = False) -> None:
        self.crash = crash
        self.ran: list[str] = []

    def check(self, state: GraphState) -> Update:
        self.ran.append("check")
        results = [m for m in state["messages"] if m.role == "tool"]
        return {"messages": [Message.user(f"Audit: {len(results)} result(s) checked.")]}

    def remind(self, state: GraphState) -> Update:
        self.ran.append("remind")
        if self.crash:
            self.crash = False
            raise PowerCut  # the process stops here, mid-subgraph
        return {"messages": [Message.user("Audit: show your working.")]}

    def compiled(self) -> CompiledStateGraph[GraphState, None, GraphState, GraphState]:
        graph = StateGraph(GraphState)
        graph.add_node("check", self.check)
        graph.add_node("remind", self.remind)
        graph.add_edge(START, "check")
        graph.add_edge("check", "remind")
        graph.add_edge("remind", END)
        return graph.compile()


def audited(checkpointer: Checkpointer, model: ScriptedModel, audit: Audit) -> GraphRuntime:
    runtime = GraphRuntime(model=model, tools=[add], checkpointer=checkpointer)
    graph = runtime.native_graph()
    graph.add_node("audit", audit.compiled())
    graph.edges.discard(("tools", "agent"))
    graph.add_edge("tools", "audit")
    graph.add_edge("audit", "agent")
    runtime.recompile()
    return runtime


async def test_a_run_stopped_inside_the_subgraph_resumes_inside_it(tmp_path: Path) -> None:
    path = tmp_path / "audit.db"
    call = ToolCall(id="call_add", name="add", arguments={"a": 2, "b": 3})
    audit = Audit(crash=True)
    before = SQLiteCheckpointer(path)
    first = audited(before, ScriptedModel([""], tool_calls=[[call]], strict=True), audit)
    with pytest.raises(PowerCut):
        await first.arun("2 + 3?", thread_id="t")
    first.close()
    await before.aclose()
    assert audit.ran == ["check", "remind"]

    after = SQLiteCheckpointer(path)
    model = ScriptedModel(["", "5"], tool_calls=[[call], []], strict=True)
    second = audited(after, model, audit)
    try:
        state = await second.astate("t")
        assert state is not None
        assert state.status == "running"  # the journal says the run did not finish
        response = await second.aresume("t")
        history = await second.ahistory("t")
    finally:
        second.close()
        await after.aclose()

    # The subgraph went on from its own checkpoint: `check` did not run again.
    assert audit.ran == ["check", "remind", "remind"]
    assert response.output == "5"
    expected = [
        "2 + 3?",
        "",
        "5",
        "Audit: 1 result(s) checked.",
        "Audit: show your working.",
    ]
    assert [m.content for m in model.requests[0].messages] == expected
    assert [m.content for m in response.messages] == [*expected, "5"]  # not doubled
    namespaces = {
        r.event.checkpoint_ns.split(":")[0] for r in history if r.event.kind == "graph_checkpoint"
    }
    assert namespaces == {"", "audit"}
    assert response.usage.requests == 2


async def test_a_subgraph_appends_only_what_it_added() -> None:
    audit = Audit()
    call = ToolCall(name="add", arguments={"a": 1, "b": 1})
    model = ScriptedModel(["", "2", "", "2 again"], tool_calls=[[call], [], [call], []])
    runtime = audited(MemoryCheckpointer(), model, audit)
    await runtime.arun("1 + 1?", thread_id="t")
    second = await runtime.arun("And again?", thread_id="t")
    contents = [m.content for m in second.messages]
    assert contents.count("1 + 1?") == 1
    assert contents.count("Audit: show your working.") == 2
    assert contents[-1] == "2 again"
    runtime.close()
