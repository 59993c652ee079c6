"""Memory on the graph runtime: what each model call sees of the graph's conversation."""

from __future__ import annotations

from graph_agents import add

from tidemill.agents.graph import GraphRuntime, GraphState
from tidemill.agents.graph._view import thread_view
from tidemill.agents.journal import MemorySummarized, ThreadState, UserInput
from tidemill.agents.memory import NoMemory, SummaryMemory, WindowMemory
from tidemill.llm import ModelRequest, ScriptedModel
from tidemill.types import Message, Role, ToolCall


def sent(request: ModelRequest) -> list[str]:
    """The conversation a request carried, without the system prompt."""
    return [m.content for m in request.messages if m.role != Role.SYSTEM]


async def test_a_window_limits_what_the_model_sees_but_the_thread_keeps_everything() -> None:
    model = ScriptedModel(["a1", "a2", "a3"], strict=True)
    runtime = GraphRuntime(model=model, memory=WindowMemory(size=2))
    for question in ("q1", "q2", "q3"):
        await runtime.arun(question, thread_id="t")
    assert sent(model.requests[2]) == ["q3"]  # q2, a2 then q3: the window starts on a user turn
    assert sent(model.requests[1]) == ["q2"]
    state = await runtime.astate("t")
    assert state is not None
    assert [m.content for m in state.messages] == ["q1", "a1", "q2", "a2", "q3", "a3"]
    values = (await runtime.agraph_state("t")).values["messages"]
    assert [m.content for m in values] == ["q1", "a1", "q2", "a2", "q3", "a3"]
    assert runtime.describe()["memory"] == {"kind": "window", "size": 2}


async def test_without_memory_the_model_sees_only_the_current_run() -> None:
    call = ToolCall(name="add", arguments={"a": 2, "b": 3})
    model = ScriptedModel(["first", "", "5"], tool_calls=[[], [call], []], strict=True)
    runtime = GraphRuntime(model=model, tools=[add], memory=NoMemory())
    await runtime.arun("one", thread_id="t")
    response = await runtime.arun("two", thread_id="t")
    assert response.output == "5"
    assert sent(model.requests[1]) == ["two"]
    assert sent(model.requests[2]) == ["two", "", "5"]  # the run's own tool loop is kept


async def test_the_default_sends_the_whole_graph_conversation() -> None:
    model = ScriptedModel(["a1", "a2"], strict=True)
    runtime = GraphRuntime(model=model)
    await runtime.arun("q1", thread_id="t")
    await runtime.arun("q2", thread_id="t")
    assert sent(model.requests[1]) == ["q1", "a1", "q2"]


async def test_a_summary_is_journaled_once_and_sent_in_the_system_prompt() -> None:
    def answer(request: ModelRequest) -> str:
        if "Summarise the conversation" in request.messages[0].content:
            return "They asked q1 and q2."
        return "a" + request.messages[-1].content[1:]

    model = ScriptedModel(handler=answer)
    runtime = GraphRuntime(
        model=model, system_prompt="Be brief.", memory=SummaryMemory(max_messages=3, keep_last=1)
    )
    for question in ("q1", "q2", "q3"):
        await runtime.arun(question, thread_id="t")
    kinds = [r.event.kind for r in await runtime.ahistory("t")]
    assert kinds.count("memory_summarized") == 1
    last = model.requests[-1]
    assert last.messages[0].content == (
        "Be brief.\n\nSummary of the earlier conversation:\nThey asked q1 and q2."
    )
    assert sent(last) == ["q3"]
    response = await runtime.arun("q4", thread_id="t")
    assert response.usage.requests == 1
    assert [s.note for s in response.steps] == [None]


async def test_messages_your_nodes_add_are_part_of_what_the_memory_chooses_from() -> None:
    note = Message.user("Note: answer in one word.")

    def remind(state: GraphState) -> dict[str, list[Message]]:
        return {"messages": [note]}

    model = ScriptedModel(["a1", "a2"], strict=True)
    runtime = GraphRuntime(model=model, memory=NoMemory())
    graph = runtime.native_graph()
    graph.add_node("remind", remind)
    graph.edges.discard(("__start__", "agent"))
    graph.add_edge("__start__", "remind")
    graph.add_edge("remind", "agent")
    runtime.recompile()
    await runtime.arun("q1", thread_id="t")
    await runtime.arun("q2", thread_id="t")
    # The current run: its input and the note, not the earlier run's note or turns.
    assert sent(model.requests[1]) == ["q2", note.content]


def test_a_thread_view_moves_the_journals_positions_onto_the_graphs_messages() -> None:
    state = ThreadState("t")
    state.apply(1, UserInput(messages=(Message.user("q1"),), run_id="r1"))
    state.apply(2, MemorySummarized(summary="s", upto=1))
    state.apply(3, UserInput(messages=(Message.user("q2"),), run_id="r2"))
    extra = Message.user("extra")
    view = thread_view(state, [Message.user("q1"), extra, Message.user("q2"), extra])
    assert (view.run_start, view.summary_upto, view.last_user) == (2, 2, 3)
    assert view.summary == "s"
    assert state.run_start == 1  # the journal's own state is untouched
    assert thread_view(state, list(state.messages)) is state
