"""`VectorMemory`: earlier messages recalled by meaning, embedded once, kept beside the journals."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from tidemill import AgentInterrupt, AgentRuntime, ConfigurationError, agent, tool
from tidemill.agents.checkpoint import (
    MemoryCheckpointer,
    PostgresCheckpointer,
    SQLiteCheckpointer,
    decode_event,
)
from tidemill.agents.journal import (
    SCHEMA_VERSION,
    ApprovalRequested,
    MemoryRecalled,
    ModelTurn,
    RecalledUnit,
    RunFinished,
    ThreadState,
    UserInput,
)
from tidemill.agents.memory import (
    InMemoryVectorStore,
    PostgresVectorStore,
    SQLiteVectorStore,
    VectorMemory,
    resolve_memory,
    store_for,
)
from tidemill.agents.memory._transcript import units_of
from tidemill.agents.memory._vector import RECALL_HEADING
from tidemill.errors import LimitExceeded, ProviderError
from tidemill.llm import EmbeddingModel, Embeddings, HashingEmbedder, ModelRequest, ScriptedModel
from tidemill.types import Message, ModelResponse, Role, ToolCall, Usage


class CountingEmbedder(EmbeddingModel):
    """The hashing embedder, keeping every text it was asked to embed."""

    provider = "fake"

    def __init__(self) -> None:
        self.inner = HashingEmbedder()
        self.model_name = self.inner.model_name
        self.texts: list[str] = []

    async def aembed(self, texts: Sequence[str]) -> Embeddings:
        self.texts += texts
        return await self.inner.aembed(texts)


@tool
def lookup(key: str) -> str:
    """Look something up."""
    return f"the {key} code is 7731"


def system(request: ModelRequest) -> str:
    return request.messages[0].content if request.messages[0].role == Role.SYSTEM else ""


def conversation(request: ModelRequest) -> list[str]:
    return [m.content for m in request.messages if m.role != Role.SYSTEM]


FACTS = [
    "My cat is called Miso and she likes tuna.",
    "The invoice total for March was 420 euros.",
    "Remind me to water the tomatoes on Friday.",
]


async def test_a_run_sees_its_own_messages_and_the_closest_earlier_ones() -> None:
    model = ScriptedModel(handler=lambda r: "Noted.")
    memory = VectorMemory(embedder="fake", k=1)
    runtime = AgentRuntime(model=model, memory=memory, system_prompt="Be brief.")
    for fact in FACTS:
        await runtime.arun(fact, thread_id="t")
    await runtime.arun("What is my cat called?", thread_id="t")
    last = model.requests[-1]
    assert conversation(last) == ["What is my cat called?"]
    prompt = system(last)
    assert prompt.startswith("Be brief.\n\n" + RECALL_HEADING)
    assert f"user: {FACTS[0]}" in prompt
    assert "invoice" not in prompt and "tomatoes" not in prompt
    assert memory.usage.input_tokens > 0 and memory.usage.requests == 4


async def test_recall_keeps_the_thread_order_and_k_bounds_it() -> None:
    model = ScriptedModel(handler=lambda r: "ok")
    runtime = AgentRuntime(model=model, memory=VectorMemory(embedder="fake", k=2))
    for fact in FACTS:
        await runtime.arun(fact, thread_id="t")
    await runtime.arun("Tomatoes: water them when? My cat: called what?", thread_id="t")
    prompt = system(model.requests[-1])
    assert prompt.index("cat is called Miso") < prompt.index("water the tomatoes")
    assert "invoice" not in prompt


async def test_each_message_is_embedded_once() -> None:
    embedder = CountingEmbedder()
    runtime = AgentRuntime(
        model=ScriptedModel(handler=lambda r: "ok"), memory=VectorMemory(embedder=embedder)
    )
    for fact in FACTS:
        await runtime.arun(fact, thread_id="t")
    # Each prompt when its run starts, each answer at the start of the next run.
    assert embedder.texts == [
        f"user: {FACTS[0]}",
        "assistant: ok",
        f"user: {FACTS[1]}",
        "assistant: ok",
        f"user: {FACTS[2]}",
    ]


async def test_a_tool_call_is_recalled_with_its_result() -> None:
    model = ScriptedModel(
        responses=["", "Found it.", "It is 7731."],
        tool_calls=[[ToolCall(id="c1", name="lookup", arguments={"key": "garage"})], [], []],
    )
    runtime = AgentRuntime(model=model, tools=[lookup], memory=VectorMemory(embedder="fake", k=1))
    await runtime.arun("Look up the garage door code.", thread_id="t")
    await runtime.arun("lookup tool returned what garage code, 7731?", thread_id="t")
    prompt = system(model.requests[-1])
    assert prompt.splitlines()[1:] == [
        "assistant: [called lookup({'key': 'garage'})]",
        "tool lookup returned: the garage code is 7731",
    ]


async def test_the_first_run_recalls_nothing() -> None:
    model = ScriptedModel(handler=lambda r: "ok")
    await AgentRuntime(model=model, memory=VectorMemory(embedder="fake")).arun("hello")
    assert system(model.requests[0]) == ""


async def test_min_score_leaves_out_unrelated_messages() -> None:
    model = ScriptedModel(handler=lambda r: "ok")
    runtime = AgentRuntime(model=model, memory=VectorMemory(embedder="fake", min_score=0.99))
    await runtime.arun("Apples are red.", thread_id="t")
    await runtime.arun("Quantum chromodynamics lecture notes", thread_id="t")
    assert RECALL_HEADING not in system(model.requests[-1])


async def test_vectors_survive_a_new_process_beside_the_sqlite_journals(tmp_path: Path) -> None:
    path = tmp_path / "agent.db"
    first = CountingEmbedder()
    saver = SQLiteCheckpointer(path)
    runtime = AgentRuntime(
        model=ScriptedModel(handler=lambda r: "ok"),
        checkpointer=saver,
        memory=VectorMemory(embedder=first, store=saver),
    )
    for fact in FACTS:
        await runtime.arun(fact, thread_id="t")
    await runtime.aclose()
    await saver.aclose()

    # A new process: new checkpointer, new memory, the same file.
    second = CountingEmbedder()
    saver = SQLiteCheckpointer(path)
    model = ScriptedModel(handler=lambda r: "ok")
    memory = VectorMemory(embedder=second, k=1, store=saver)
    runtime = AgentRuntime(model=model, checkpointer=saver, memory=memory)
    await runtime.arun("What is the cat called?", thread_id="t")
    assert second.texts == ["assistant: ok", "user: What is the cat called?"]  # only what is new
    assert "Miso" in system(model.requests[-1])
    assert isinstance(memory.store, SQLiteVectorStore) and memory.store.path == str(path)
    await memory.aclose()
    await saver.aclose()


async def test_a_message_whose_text_changed_is_embedded_again() -> None:
    embedder = CountingEmbedder()
    memory = VectorMemory(embedder=embedder)
    state = ThreadState("t")
    state.apply(1, UserInput(messages=(Message.user("first version"),), run_id="r1"))
    await memory.recall(state, before=0)
    again = ThreadState("t")  # the thread was deleted and started over
    again.apply(1, UserInput(messages=(Message.user("second version"),), run_id="r1"))
    await memory.recall(again, before=0)
    assert embedder.texts == ["user: first version", "user: second version"]


async def test_through_the_builder() -> None:
    model = ScriptedModel(handler=lambda r: "ok")
    bot = agent().llm(model).memory("vector", embedder="fake", k=1)
    await bot.arun(FACTS[0], thread_id="t")
    await bot.arun(FACTS[1], thread_id="t")
    await bot.arun("cat name?", thread_id="t")
    assert "Miso" in system(model.requests[-1])
    assert bot.describe()["memory"] == {
        "kind": "vector",
        "embedder": {"provider": "fake", "model": "hashing-256", "dimensions": 256},
        "k": 1,
    }


def test_bound_puts_the_vectors_beside_the_checkpointer(tmp_path: Path) -> None:
    memory = VectorMemory(embedder="fake")
    assert isinstance(memory.store, InMemoryVectorStore)
    saver = SQLiteCheckpointer(tmp_path / "a.db")
    bound = memory.bound(saver)
    assert isinstance(bound.store, SQLiteVectorStore) and bound.store.path == saver.path
    assert bound.k == memory.k and bound.embedder is memory.embedder
    given = VectorMemory(embedder="fake", store=InMemoryVectorStore())
    assert given.bound(saver) is given  # a store given explicitly stays
    assert isinstance(store_for(MemoryCheckpointer()), InMemoryVectorStore)
    assert isinstance(store_for(SQLiteCheckpointer(":memory:")), InMemoryVectorStore)


async def test_aclose_closes_the_store_it_opened(tmp_path: Path) -> None:
    memory = VectorMemory(embedder="fake", store=SQLiteCheckpointer(tmp_path / "a.db"))
    await memory.aclose()
    with pytest.raises(ConfigurationError, match="closed"):
        await memory.store.digests("t", "m")
    mine = SQLiteVectorStore(tmp_path / "b.db")
    await VectorMemory(embedder="fake", store=mine).aclose()
    assert await mine.digests("t", "m") == {}  # a store passed in stays the caller's


@pytest.mark.parametrize(
    ("options", "words"),
    [({}, "needs an embedding model"), ({"embedder": "fake", "k": 0}, "at least 1"),
     ({"embedder": "nope:x"}, "Unknown embedding provider"),
     ({"embedder": "fake", "kk": 2}, "Bad option")],
)  # fmt: skip
def test_bad_options_say_what_to_do(options: dict[str, object], words: str) -> None:
    with pytest.raises(ConfigurationError, match=words) as caught:
        resolve_memory("vector", **options)
    assert caught.value.hint


@tool(requires_approval=True)
def deploy(env: str) -> str:
    """Deploy, with approval."""
    return f"deployed to {env}"


async def test_a_run_resumed_after_approval_keeps_its_recall() -> None:
    model = ScriptedModel(
        responses=["Noted.", "", "Done."],
        tool_calls=[[], [ToolCall(id="d1", name="deploy", arguments={"env": "prod"})], []],
    )
    runtime = AgentRuntime(model=model, tools=[deploy], memory=VectorMemory(embedder="fake", k=1))
    await runtime.arun("The prod cluster is called Heron.", thread_id="t")
    with pytest.raises(AgentInterrupt):
        await runtime.arun("Deploy to the prod cluster Heron.", thread_id="t")
    await runtime.aresume("t", approved=True)
    after = model.requests[-1]
    assert "user: The prod cluster is called Heron." in system(after)
    assert conversation(after)[0] == "Deploy to the prod cluster Heron."


async def test_vectors_in_the_postgres_schema_of_the_journals(
    postgres_checkpointer: PostgresCheckpointer,
) -> None:
    saver = postgres_checkpointer
    first = VectorMemory(embedder="fake", store=saver)
    runtime = AgentRuntime(
        model=ScriptedModel(handler=lambda r: "ok"), checkpointer=saver, memory=first
    )
    for fact in FACTS:
        await runtime.arun(fact, thread_id="t")
    await first.aclose()
    embedder = CountingEmbedder()
    model = ScriptedModel(handler=lambda r: "ok")
    memory = VectorMemory(embedder=embedder, k=1, store=saver)
    assert isinstance(memory.store, PostgresVectorStore) and memory.store.schema == saver.schema
    await AgentRuntime(model=model, checkpointer=saver, memory=memory).arun(
        "What is the cat called?", thread_id="t"
    )
    assert embedder.texts == ["assistant: ok", "user: What is the cat called?"]
    assert "Miso" in system(model.requests[-1])
    await memory.aclose()


def test_units_leave_out_system_and_empty_messages() -> None:
    thread = [
        Message.system("rules"),
        Message.user("  "),
        Message.user("hi"),
        Message.assistant(""),
    ]
    assert [(u.start, u.end, u.text) for u in units_of(thread)] == [(2, 3, "user: hi")]


async def test_the_graph_runtime_recalls_too() -> None:
    pytest.importorskip("langgraph", reason="the graph runtime needs the graph extra")
    model = ScriptedModel(handler=lambda r: "ok")
    bot = agent().llm(model).graph().memory("vector", embedder="fake", k=1)
    await bot.arun(FACTS[0], thread_id="g")
    await bot.arun(FACTS[1], thread_id="g")
    await bot.arun("What is the cat called?", thread_id="g")
    assert system(model.requests[-1]) == f"{RECALL_HEADING}\nuser: {FACTS[0]}"
    await bot.aclose()


class FailingEmbedder(CountingEmbedder):
    async def aembed(self, texts: Sequence[str]) -> Embeddings:
        raise ProviderError("embeddings are down", provider="fake", status_code=503)


async def test_a_failing_embedder_fails_the_run_start_and_resume_continues_it() -> None:
    model = ScriptedModel(handler=lambda r: "ok")
    runtime = AgentRuntime(model=model, memory=VectorMemory(embedder=FailingEmbedder()))
    with pytest.raises(ProviderError, match="embeddings are down"):
        await runtime.arun("hello", thread_id="t")
    assert model.requests == []  # the model was not asked
    resumed = await runtime.aresume("t")
    assert resumed.output == "ok" and conversation(model.requests[-1]) == ["hello"]


def test_the_builder_keeps_the_vectors_in_its_checkpointers_file(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "agent.db"
    model = ScriptedModel(handler=lambda r: "Noted.")
    bot = agent().llm(model).checkpoint("sqlite", path=path).memory("vector", embedder="fake", k=1)
    for fact in FACTS:
        bot.run(fact, thread_id="t")
    bot.system("Be brief.")  # a rebuild binds the same store again, not a new one
    bot.run("What is my cat called?", thread_id="t")
    assert f"user: {FACTS[0]}" in system(model.requests[-1])
    bot.close()
    with sqlite3.connect(path) as db:
        [(count,)] = db.execute("SELECT count(*) FROM tidemill_memory_vectors").fetchall()
    assert count >= len(FACTS)


# -- the recall is journaled ------------------------------------------------------


class PricedEmbedder(CountingEmbedder):
    """The hashing embedder, billing 1,000 input tokens and a cent per request."""

    async def aembed(self, texts: Sequence[str]) -> Embeddings:
        found = await super().aembed(texts)
        return Embeddings(
            found.vectors,
            model=found.model,
            usage=Usage(requests=1, input_tokens=1000, cost_usd=0.01),
        )


def approval_model() -> ScriptedModel:
    return ScriptedModel(
        responses=["Noted.", ""],
        tool_calls=[[], [ToolCall(id="d1", name="deploy", arguments={"env": "prod"})]],
    )


async def test_a_run_resumed_by_another_runtime_keeps_its_recall(tmp_path: Path) -> None:
    path = tmp_path / "agent.db"
    saver = SQLiteCheckpointer(path)
    memory = VectorMemory(embedder="fake", k=1, store=saver)
    runtime = AgentRuntime(
        model=approval_model(), tools=[deploy], checkpointer=saver, memory=memory
    )
    await runtime.arun("The prod cluster is called Heron.", thread_id="t")
    with pytest.raises(AgentInterrupt):
        await runtime.arun("Deploy to the prod cluster Heron.", thread_id="t")
    await memory.aclose()
    await saver.aclose()

    # Another process decides the approval: new checkpointer, memory and model, the same file.
    saver = SQLiteCheckpointer(path)
    embedder = CountingEmbedder()
    model = ScriptedModel(handler=lambda r: "Done.")
    memory = VectorMemory(embedder=embedder, k=1, store=saver)
    runtime = AgentRuntime(model=model, tools=[deploy], checkpointer=saver, memory=memory)
    resumed = await runtime.aresume("t", approved=True)
    assert resumed.output == "Done."
    assert (
        system(model.requests[-1]) == f"{RECALL_HEADING}\nuser: The prod cluster is called Heron."
    )
    assert conversation(model.requests[-1])[0] == "Deploy to the prod cluster Heron."
    assert embedder.texts == []  # the recall was read from the journal, not chosen again
    await memory.aclose()
    await saver.aclose()


async def test_the_journal_holds_what_was_recalled_and_the_next_run_forgets_it() -> None:
    saver = MemoryCheckpointer()
    model = ScriptedModel(handler=lambda r: "ok")
    runtime = AgentRuntime(
        model=model, checkpointer=saver, memory=VectorMemory(embedder="fake", k=1)
    )
    for fact in FACTS:
        await runtime.arun(fact, thread_id="t")
    await runtime.arun("What is my cat called?", thread_id="t")
    records = await saver.read("t")
    recalls = [r.event for r in records if isinstance(r.event, MemoryRecalled)]
    assert len(recalls) == 4  # one per run: each embeds its prompt and the last answer
    assert recalls[0].units == ()  # the first run has nothing earlier to recall
    last = recalls[-1]
    assert last.units == (RecalledUnit(start=0, end=1, text=f"user: {FACTS[0]}"),)
    # The hashing embedder counts words: the last answer's, then the request's.
    assert last.usage.input_tokens == 2 + 6
    # Each recall belongs to its run: the next run's input clears it.
    state = ThreadState("t")
    for record in records:
        state.apply(record.seq, record.event)
    assert state.recalled == last.units
    state.apply(state.seq + 1, UserInput(messages=(Message.user("next"),), run_id="r9"))
    assert state.recalled == ()


async def test_embedding_usage_counts_in_the_run_and_its_cost() -> None:
    model = ScriptedModel(handler=lambda r: "ok")
    runtime = AgentRuntime(model=model, memory=VectorMemory(embedder=PricedEmbedder()))
    await runtime.arun(FACTS[0], thread_id="t")
    response = await runtime.arun(FACTS[1], thread_id="t")
    asked = response.steps[-1].usage
    assert asked is not None
    # One embedding request: the new messages, the request among them.
    assert response.usage.input_tokens == asked.input_tokens + 1000
    assert response.usage.requests == asked.requests + 1
    assert response.usage.cost_usd == pytest.approx(0.01 + asked.cost_usd)


async def test_a_token_limit_sees_what_embedding_spent() -> None:
    model = ScriptedModel(handler=lambda r: "ok")
    bot = (
        agent().llm(model).memory(VectorMemory(embedder=PricedEmbedder())).limits(input_tokens=500)
    )
    with pytest.raises(LimitExceeded) as info:
        await bot.arun("hello", thread_id="t")
    assert info.value.limit == "input_tokens" and model.requests == []  # never asked
    assert info.value.response is not None
    assert info.value.response.usage.input_tokens == 1000


async def test_a_recall_compacted_into_a_snapshot_survives_a_resume() -> None:
    saver = MemoryCheckpointer(max_history=4)
    runtime = AgentRuntime(
        model=approval_model(), tools=[deploy], checkpointer=saver,
        memory=VectorMemory(embedder="fake", k=1),
    )  # fmt: skip
    await runtime.arun("The prod cluster is called Heron.", thread_id="t")
    with pytest.raises(AgentInterrupt):
        await runtime.arun("Deploy to the prod cluster Heron.", thread_id="t")
    records = await saver.read("t")
    assert records[0].event.kind == "snapshot" and not any(
        r.event.kind == "memory_recalled" for r in records
    )  # the recall is inside the snapshot now
    model = ScriptedModel(handler=lambda r: "Done.")
    again = AgentRuntime(
        model=model, tools=[deploy], checkpointer=saver, memory=VectorMemory(embedder="fake", k=1)
    )
    await again.aresume("t", approved=True)
    assert "user: The prod cluster is called Heron." in system(model.requests[-1])


async def test_a_journal_from_before_recall_was_journaled_still_loads_and_resumes() -> None:
    # Format 3: no `memory_recalled` records, and snapshots without `recalled`.
    call = ToolCall(id="d1", name="deploy", arguments={"env": "prod"})
    first = ThreadState("t")
    first.apply(1, UserInput(messages=(Message.user("The cluster is Heron."),), run_id="r1"))
    first.apply(2, RunFinished(output="Noted."))
    snapshot = first.snapshot().model_dump(mode="json", exclude={"recalled"})
    snapshot["schema_version"] = 3
    old = [
        decode_event(json.dumps(snapshot), thread_id="t", seq=2),
        UserInput(messages=(Message.user("Deploy to Heron."),), run_id="r2", schema_version=3),
        ModelTurn(
            response=ModelResponse(message=Message.assistant("", tool_calls=(call,))),
            schema_version=3,
        ),
        ApprovalRequested(calls=(call,), schema_version=3),
    ]
    assert old[0].kind == "snapshot" and old[0].recalled == ()
    saver = MemoryCheckpointer()
    await saver.append("t", old, after=0)
    model = ScriptedModel(handler=lambda r: "Done.")
    runtime = AgentRuntime(
        model=model, tools=[deploy], checkpointer=saver, memory=VectorMemory(embedder="fake")
    )
    resumed = await runtime.aresume("t", approved=True)
    assert resumed.output == "Done." and RECALL_HEADING not in system(model.requests[-1])
    # The next run journals its recall in the current format, after the old records.
    await runtime.arun("Which cluster?", thread_id="t")
    assert "user: The cluster is Heron." in system(model.requests[-1])
    recalled = [r.event for r in await saver.read("t") if r.event.kind == "memory_recalled"]
    assert [e.schema_version for e in recalled] == [SCHEMA_VERSION]
