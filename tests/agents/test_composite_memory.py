"""`CompositeMemory`: a window, a summary and recall by meaning, configured together."""

from __future__ import annotations

import pytest

from tidemill import AgentRuntime, ConfigurationError, agent
from tidemill.agents.checkpoint import SQLiteCheckpointer
from tidemill.agents.memory import (
    CompositeMemory,
    SQLiteVectorStore,
    SummaryMemory,
    VectorMemory,
    resolve_memory,
)
from tidemill.agents.memory._vector import RECALL_HEADING
from tidemill.llm import ModelRequest, ScriptedModel
from tidemill.types import Role


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
