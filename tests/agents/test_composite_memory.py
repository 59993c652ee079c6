"""`CompositeMemory`: a window, a summary and recall by meaning, configured together."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import JsonValue

from tidemill import AgentInterrupt, AgentRuntime, ConfigurationError, agent, tool
from tidemill.agents.checkpoint import MemoryCheckpointer, SQLiteCheckpointer
from tidemill.agents.journal import (
    MemoryRecalled,
    MemorySummarized,
    ModelTurn,
    ThreadState,
    UserInput,
)
from tidemill.agents.memory import (
    CompositeMemory,
    MemoryView,
    SQLiteVectorStore,
    SummaryMemory,
    VectorMemory,
    memory_events,
    resolve_memory,
)
from tidemill.agents.memory._vector import RECALL_HEADING
from tidemill.llm import EmbeddingModel, HashingEmbedder, Model, ModelRequest, ScriptedModel
from tidemill.llm._scripted import Answer
from tidemill.types import Message, Role, ToolCall, Usage


def answer(request: ModelRequest) -> str:
    first = request.messages[0].content if request.messages else ""
    return "SUMMARY: the user shared facts." if first.startswith("Summarise") else "ok"


def system(request: ModelRequest) -> str:
    return request.messages[0].content if request.messages[0].role == Role.SYSTEM else ""


def conversation(request: ModelRequest) -> list[str]:
    return [m.content for m in request.messages if m.role != Role.SYSTEM]


PROMPTS = [
    "My cat is called Miso.",
    "The invoice total was 420 euros.",
    "The boat is moored in Bergen.",
    "Water the tomatoes on Friday.",
    "Who is Miso, my cat?",
]


def agent_calls(model: ScriptedModel) -> list[ModelRequest]:
    return [r for r in model.requests if not system(r).startswith("Summarise")]


async def test_each_call_gets_the_window_the_summary_and_what_is_recalled() -> None:
    model = ScriptedModel(handler=answer)
    memory = resolve_memory(
        "composite",
        window=2,
        summary={"max_messages": 6, "keep_last": 2},
        vector={"embedder": "fake", "k": 1},
    )
    runtime = AgentRuntime(model=model, memory=memory, system_prompt="Be brief.")
    for prompt in PROMPTS:
        await runtime.arun(prompt, thread_id="t")
    last = agent_calls(model)[-1]
    # The window: the last 2 messages, widened to start on the user's turn.
    assert conversation(last) == ["Who is Miso, my cat?"]
    prompt = system(last)
    summary_at = prompt.index(
        "Summary of the earlier conversation:\nSUMMARY: the user shared facts."
    )
    recall_at = prompt.index(RECALL_HEADING + "\nuser: My cat is called Miso.")
    assert prompt.startswith("Be brief.") and summary_at < recall_at
    assert "invoice" not in prompt and "Bergen" not in prompt
    summaries = [r for r in model.requests if system(r).startswith("Summarise")]
    assert len(summaries) >= 1  # the summary ran, journaled like SummaryMemory's


async def test_recall_never_repeats_what_the_window_already_sends() -> None:
    model = ScriptedModel(handler=answer)
    memory = CompositeMemory(window=4, vector={"embedder": "fake", "k": 3})
    runtime = AgentRuntime(model=model, memory=memory)
    for prompt in ["Miso is my cat.", "Miso likes tuna.", "Miso sleeps a lot."]:
        await runtime.arun(prompt, thread_id="t")
    last = model.requests[-1]
    window = conversation(last)
    assert window == ["Miso likes tuna.", "ok", "Miso sleeps a lot."]
    recalled = system(last).split("\n")[1:]
    assert recalled == ["user: Miso is my cat.", "assistant: ok"]  # only from before the window


async def test_through_the_builder_with_a_durable_checkpointer(tmp_path: object) -> None:
    saver = SQLiteCheckpointer(f"{tmp_path}/agent.db")
    model = ScriptedModel(handler=answer)
    bot = (
        agent()
        .llm(model)
        .checkpoint(saver)
        .memory("composite", window=2, vector={"embedder": "fake", "k": 1, "store": saver})
    )
    for prompt in PROMPTS[:2]:
        await bot.arun(prompt, thread_id="t")
    await bot.arun("cat called?", thread_id="t")
    assert "Miso" in system(model.requests[-1])
    described = bot.describe()["memory"]
    assert isinstance(described, dict)
    assert (described["kind"], described["window"], described["summary"]) == (
        "composite", 2, None,
    )  # fmt: skip
    built = CompositeMemory(vector={"embedder": "fake", "store": saver})
    assert built.vector is not None and isinstance(built.vector.store, SQLiteVectorStore)
    await built.aclose()


def test_parts_may_be_objects_and_bound_moves_the_vectors(tmp_path: object) -> None:
    summary = SummaryMemory(max_messages=8, keep_last=2)
    vector = VectorMemory(embedder="fake")
    memory = CompositeMemory(window=3, summary=summary, vector=vector)
    assert memory.summary is summary and memory.vector is vector
    bound = memory.bound(SQLiteCheckpointer(f"{tmp_path}/a.db"))
    assert bound.vector is not None and isinstance(bound.vector.store, SQLiteVectorStore)
    assert bound.summary is summary and bound.window == 3
    only_summary = CompositeMemory(summary={})
    assert only_summary.bound(SQLiteCheckpointer(f"{tmp_path}/b.db")) is only_summary


@pytest.mark.parametrize(
    ("options", "words"),
    [({}, "neither a summary nor recall"), ({"window": 0, "summary": {}}, "at least 1"),
     ({"summary": 3}, "takes a dict of options"),
     ({"summary": {"max_message": 3}}, "Bad option for the composite memory's summary"),
     ({"vector": {"k": 2}}, "needs an embedding model")],
)  # fmt: skip
def test_bad_options_say_what_to_do(options: dict[str, object], words: str) -> None:
    with pytest.raises(ConfigurationError, match=words) as caught:
        resolve_memory("composite", **options)
    assert caught.value.hint


def test_unknown_names_suggest_the_new_ones() -> None:
    with pytest.raises(ConfigurationError) as caught:
        resolve_memory("compsite")
    assert caught.value.hint and "Did you mean 'composite'?" in caught.value.hint
    assert "'vector'" in caught.value.hint


# -- the summary and the recall are journaled together ------------------------------


@tool(requires_approval=True)
def deploy(env: str) -> str:
    """Deploy, with approval."""
    return f"deployed to {env}"


DEPLOY = ToolCall(id="d1", name="deploy", arguments={"env": "prod"})


def deploying(request: ModelRequest) -> Answer:
    last = request.messages[-1]
    if last.role == Role.USER and last.content.startswith("Deploy"):
        return Message.assistant("", tool_calls=(DEPLOY,))
    return answer(request)


def composite(
    saver: SQLiteCheckpointer, embedder: EmbeddingModel | str = "fake"
) -> CompositeMemory:
    return CompositeMemory(
        window=2,
        summary={"max_messages": 4, "keep_last": 2},
        vector={"embedder": embedder, "k": 1, "store": saver},
    )


async def test_a_run_resumed_by_another_runtime_keeps_its_summary_and_recall(
    tmp_path: Path,
) -> None:
    path = tmp_path / "agent.db"
    saver = SQLiteCheckpointer(path)
    memory = composite(saver)
    runtime = AgentRuntime(
        model=ScriptedModel(handler=deploying), tools=[deploy], checkpointer=saver, memory=memory
    )
    for prompt in PROMPTS[:4]:
        await runtime.arun(prompt, thread_id="t")
    with pytest.raises(AgentInterrupt):
        await runtime.arun("Deploy, then say: who is Miso, my cat?", thread_id="t")
    await memory.aclose()
    await saver.aclose()

    saver = SQLiteCheckpointer(path)  # another process decides the approval
    model = ScriptedModel(handler=answer)
    memory = composite(saver, HashingEmbedder())
    runtime = AgentRuntime(model=model, tools=[deploy], checkpointer=saver, memory=memory)
    response = await runtime.aresume("t", approved=True)
    prompt = system(model.requests[-1])
    assert prompt.startswith("Summary of the earlier conversation:\nSUMMARY: the user shared")
    assert f"{RECALL_HEADING}\nuser: My cat is called Miso." in prompt
    assert model.requests[-1].messages[1].content.startswith("Deploy")  # the window
    # The run's start journaled both, the recall first, and the run's usage counts both.
    records = await saver.read("t")
    start = max(i for i, r in enumerate(records) if isinstance(r.event, UserInput))
    recalled, summarized = records[start + 1].event, records[start + 2].event
    assert isinstance(recalled, MemoryRecalled) and isinstance(summarized, MemorySummarized)
    assert [u.text for u in recalled.units] == ["user: My cat is called Miso."]
    assert recalled.usage.input_tokens > 0
    turns = [r.event.response.usage for r in records[start:] if isinstance(r.event, ModelTurn)]
    assert response.usage == Usage.total([recalled.usage, summarized.usage, *turns])
    await memory.aclose()
    await saver.aclose()


async def test_the_graph_runtime_journals_both_too() -> None:
    pytest.importorskip("langgraph", reason="the graph runtime needs the graph extra")
    saver = MemoryCheckpointer()
    model = ScriptedModel(handler=answer)
    bot = (
        agent()
        .llm(model)
        .graph()
        .checkpoint(saver)
        .memory("composite", window=2, summary={"max_messages": 4, "keep_last": 2},
                vector={"embedder": "fake", "k": 1})
    )  # fmt: skip
    for prompt in PROMPTS:
        response = await bot.arun(prompt, thread_id="g")
    events = [r.event for r in await saver.read("g")]
    kinds = [e.kind for e in events]
    start = len(kinds) - 1 - kinds[::-1].index("user_message")
    assert kinds[start + 1 : start + 3] == ["memory_recalled", "memory_summarized"]
    recalled = events[start + 1]
    assert isinstance(recalled, MemoryRecalled) and recalled.usage.input_tokens > 0
    assert RECALL_HEADING + "\nuser: My cat is called Miso." in system(agent_calls(model)[-1])
    spent = [step.usage for step in response.steps if step.usage]  # the turns, the summary
    assert response.usage == Usage.total([*spent, recalled.usage])
    await bot.aclose()


class Scribbling:
    """A custom memory whose compact returns something that is not an event."""

    def view(self, state: ThreadState) -> MemoryView:
        return MemoryView(state.messages)

    async def compact(self, state: ThreadState, model: Model) -> object:
        return ["not an event"]

    def describe(self) -> dict[str, JsonValue]:
        return {"kind": "scribbling"}


async def test_compact_returning_other_things_is_refused_with_a_hint() -> None:
    runtime = AgentRuntime(model=ScriptedModel(handler=answer), memory=Scribbling())  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="not memory events") as caught:
        await runtime.arun("hi")
    assert caught.value.hint and "MemoryRecalled" in caught.value.hint
    assert memory_events(None) == ()
    summary = MemorySummarized(summary="s", upto=1)
    assert memory_events(summary) == (summary,) and memory_events([summary]) == (summary,)
