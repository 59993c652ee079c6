"""`JournalSaver`: LangGraph's saver protocol over every checkpointer backend."""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from typing import Annotated, Any, TypedDict

import pytest
from graph_agents import add
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import Checkpoint, empty_checkpoint
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.graph import END, START, StateGraph
from langgraph.types import Interrupt

from tidemill import ConfigurationError, SerializationError
from tidemill.agents.checkpoint import Checkpointer, MemoryCheckpointer
from tidemill.agents.graph import GraphRuntime, JournalSaver
from tidemill.agents.graph._codec import decode, encode
from tidemill.agents.journal import GraphCheckpoint, GraphWrites, JournalEvent
from tidemill.llm import ScriptedModel
from tidemill.types import Message, ToolCall


def config(thread_id: str = "t", checkpoint_id: str | None = None, ns: str = "") -> RunnableConfig:
    configurable: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": ns}
    if checkpoint_id:
        configurable["checkpoint_id"] = checkpoint_id
    return {"configurable": configurable}


def checkpoint(
    saver: JournalSaver, values: dict[str, Any], previous: Checkpoint | None = None
) -> tuple[Checkpoint, dict[str, str | int | float]]:
    """A checkpoint after `previous` with `values` changed; and its new versions."""
    base = empty_checkpoint()
    versions = dict(previous["channel_versions"]) if previous else {}
    new: dict[str, str | int | float] = {
        channel: saver.get_next_version(
            str(versions[channel]) if channel in versions else None, None
        )
        for channel in values
    }
    versions.update(new)
    stored = dict(previous["channel_values"]) if previous else {}
    stored.update(values)
    base["channel_versions"] = versions
    base["channel_values"] = stored
    return base, new


async def test_put_and_get_round_trip(checkpointer: Checkpointer) -> None:
    saver = JournalSaver(checkpointer)
    messages = [Message.user("Hi"), Message.assistant(tool_calls=(ToolCall(id="c1", name="x"),))]
    first, new = checkpoint(saver, {"messages": messages, "pair": ("a", 1), "none": None})
    stored = await saver.aput(config(), first, {"source": "input", "step": -1, "parents": {}}, new)
    assert stored["configurable"]["checkpoint_id"] == first["id"]

    second, new = checkpoint(saver, {"count": 2}, previous=first)
    await saver.aput(stored, second, {"source": "loop", "step": 0, "parents": {}}, new)

    latest = await saver.aget_tuple(config())
    assert latest is not None
    assert latest.checkpoint["id"] == second["id"]
    assert latest.checkpoint["channel_values"] == {
        "messages": messages,
        "pair": ("a", 1),
        "none": None,
        "count": 2,
    }
    assert latest.checkpoint["channel_versions"] == second["channel_versions"]
    assert latest.metadata == {"source": "loop", "step": 0, "parents": {}}
    assert latest.parent_config == config(checkpoint_id=first["id"])
    assert latest.config == config(checkpoint_id=second["id"])

    older = await saver.aget_tuple(config(checkpoint_id=first["id"]))
    assert older is not None
    assert "count" not in older.checkpoint["channel_values"]
    assert older.parent_config is None
    assert await saver.aget_tuple(config("unknown")) is None
    assert await saver.aget_tuple(config(checkpoint_id="nope")) is None

    # Each checkpoint stores only the values it changed, as readable JSON.
    events = [r.event for r in await checkpointer.read("t")]
    assert all(isinstance(e, GraphCheckpoint) for e in events)
    bodies = [e.checkpoint for e in events if isinstance(e, GraphCheckpoint)]
    assert isinstance(bodies[1], dict)
    assert bodies[1]["channel_values"] == {"count": 2}
    first_body = bodies[0]
    assert isinstance(first_body, dict)
    first_values = first_body["channel_values"]
    assert isinstance(first_values, dict)
    stored_messages = first_values["messages"]
    assert isinstance(stored_messages, list)
    assert stored_messages[0] == {
        "$model": "Message",
        "data": Message.user("Hi").model_dump(mode="json"),
    }


async def test_list_newest_first_with_filter_before_and_limit(checkpointer: Checkpointer) -> None:
    saver = JournalSaver(checkpointer)
    previous: Checkpoint | None = None
    address = config()
    ids = []
    for step in range(3):
        current, new = checkpoint(saver, {"step": step}, previous)
        address = await saver.aput(address, current, {"step": step, "source": "loop"}, new)
        ids.append(current["id"])
        previous = current
    other, new = checkpoint(saver, {"step": 0})
    await saver.aput(config("u"), other, {"step": 0, "source": "input"}, new)

    listed = [t.checkpoint["id"] async for t in saver.alist(config())]
    assert listed == ids[::-1]
    assert [t.checkpoint["id"] async for t in saver.alist(config(), limit=2)] == ids[:0:-1]
    before = config(checkpoint_id=ids[2])
    assert [t.checkpoint["id"] async for t in saver.alist(config(), before=before)] == ids[1::-1]
    assert [t.metadata["step"] async for t in saver.alist(config(), filter={"step": 1})] == [1]
    everywhere = [t.config["configurable"]["thread_id"] async for t in saver.alist(None)]
    assert sorted(everywhere) == ["t", "t", "t", "u"]
    only = [t.checkpoint["id"] async for t in saver.alist(config(checkpoint_id=ids[0]))]
    assert only == [ids[0]]


async def test_pending_writes_are_kept_once_and_read_in_order(checkpointer: Checkpointer) -> None:
    saver = JournalSaver(checkpointer)
    first, new = checkpoint(saver, {"messages": []})
    address = await saver.aput(config(), first, {"step": -1}, new)
    pause = Interrupt(value={"calls": ["c1"]}, id="i1")
    await saver.aput_writes(address, [("messages", [Message.user("a")]), ("x", 1)], "task-b", "b")
    await saver.aput_writes(address, [("messages", [Message.user("again")])], "task-b", "b")
    await saver.aput_writes(address, [("__interrupt__", [pause])], "task-a", "a")
    await saver.aput_writes(address, [("__interrupt__", [pause, pause])], "task-a", "a")
    await saver.aput_writes(address, [("__resume__", {"decisions": {}})], "task-a", "a")

    found = await saver.aget_tuple(config())
    assert found is not None
    assert found.pending_writes == [
        ("task-a", "__resume__", {"decisions": {}}),  # special writes sort by their index
        ("task-a", "__interrupt__", [pause, pause]),  # and the last one stands
        ("task-b", "messages", [Message.user("a")]),  # a regular write: the first one stands
        ("task-b", "x", 1),
    ]
    writes = [r.event for r in await checkpointer.read("t") if isinstance(r.event, GraphWrites)]
    assert len(writes) == 4  # the repeated regular write was not stored
    with pytest.raises(ConfigurationError, match="names a checkpoint"):
        await saver.aput_writes(config(), [("x", 1)], "task")


async def test_a_graph_of_your_own_keeps_its_state_in_the_journal(
    checkpointer: Checkpointer,
) -> None:
    class Counter(TypedDict):
        count: Annotated[int, operator.add]
        seen: Annotated[list[Message], operator.add]

    def step(state: Counter) -> dict[str, Any]:
        return {"count": 1, "seen": [Message.user(f"#{state['count']}")]}

    graph = StateGraph(Counter)
    graph.add_node("step", step)
    graph.add_edge(START, "step")
    graph.add_edge("step", END)
    saver = JournalSaver(checkpointer)
    app = graph.compile(checkpointer=saver)
    thread: RunnableConfig = {"configurable": {"thread_id": "mine"}}
    await app.ainvoke({"count": 0, "seen": []}, thread)
    # A new saver and graph on the same store carry the thread on.
    again = graph.compile(checkpointer=JournalSaver(checkpointer))
    result = await again.ainvoke({"count": 0, "seen": []}, thread)
    assert result == {"count": 2, "seen": [Message.user("#0"), Message.user("#1")]}
    history = [s async for s in again.aget_state_history(thread)]
    assert len(history) >= 4
    await saver.adelete_thread("mine")
    assert await checkpointer.read("mine") == []


def test_versions_increase_and_never_repeat() -> None:
    saver = JournalSaver(MemoryCheckpointer())
    first = saver.get_next_version(None, None)
    second = saver.get_next_version(first, None)
    assert first < second
    assert saver.get_next_version(first, None) != second  # a fork gets its own version
    assert saver.get_next_version(7, None) > saver.get_next_version(6, None)  # type: ignore[arg-type]


def test_the_sync_methods_say_the_saver_is_async() -> None:
    saver = JournalSaver(MemoryCheckpointer())
    with pytest.raises(ConfigurationError, match="only works asynchronously"):
        saver.get_tuple(config())
    with pytest.raises(ConfigurationError, match="only works asynchronously"):
        saver.list(config())
    with pytest.raises(ConfigurationError, match="only works asynchronously"):
        saver.put(config(), empty_checkpoint(), {}, {})
    with pytest.raises(ConfigurationError, match="only works asynchronously"):
        saver.put_writes(config(), [], "task")
    with pytest.raises(ConfigurationError, match="only works asynchronously"):
        saver.delete_thread("t")


async def test_a_config_without_a_thread_is_refused() -> None:
    saver = JournalSaver(MemoryCheckpointer())
    with pytest.raises(ConfigurationError, match="needs a thread_id"):
        await saver.aget_tuple({"configurable": {}})


@pytest.mark.parametrize(
    "value",
    [
        {"$ref": "not a tag", "n": 1},
        {1: "int key"},
        (1, [2, (3,)]),
        float("inf"),
        {"nested": [Message.assistant("x"), ToolCall(id="c", name="n")]},
        Interrupt(value={"ask": True}, id="i"),
        {"when", "sets"},
    ],
)
def test_values_round_trip_through_json(value: object) -> None:
    serde = JsonPlusSerializer(allowed_msgpack_modules=None)
    stored = encode(value, serde)
    assert decode(stored, serde) == value


def test_nan_survives_as_nan() -> None:
    serde = JsonPlusSerializer()
    assert math.isnan(decode(encode(float("nan"), serde), serde))


class _Pickler(JsonPlusSerializer):
    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        return "pickle", b"\x80\x04N."


def test_pickle_is_never_stored_nor_loaded() -> None:
    with pytest.raises(SerializationError, match="never pickle"):
        encode(object(), _Pickler())
    with pytest.raises(SerializationError, match="not loaded"):
        decode({"$serde": "pickle", "data": "gAROLg=="}, JsonPlusSerializer())
    with pytest.raises(SerializationError, match="cannot be stored"):
        encode(object(), JsonPlusSerializer())
    with pytest.raises(SerializationError, match="Unknown model"):
        decode({"$model": "Nope", "data": {}}, JsonPlusSerializer())


class _LosesOneSave(MemoryCheckpointer):
    """Fails the first checkpoint save after a model turn, as a full disk would."""

    failed = False

    async def append(self, thread_id: str, events: Sequence[JournalEvent], *, after: int) -> int:
        if not self.failed and any(isinstance(e, GraphCheckpoint) for e in events):
            kinds = [record.event.kind for record in await self.read(thread_id)]
            saved = max(
                (i for i, kind in enumerate(kinds) if kind == "graph_checkpoint"), default=-1
            )
            if "model_response" in kinds[saved + 1 :]:
                self.failed = True
                raise SerializationError("disk full")
        return await super().append(thread_id, events, after=after)


async def test_a_failed_save_stops_the_run_and_resume_carries_it_on() -> None:
    checkpointer = _LosesOneSave()
    call = ToolCall(name="add", arguments={"a": 2, "b": 3})
    model = ScriptedModel(["", "It is 5."], tool_calls=[[call], []], strict=True)
    runtime = GraphRuntime(model=model, tools=[add], checkpointer=checkpointer)
    with pytest.raises(SerializationError, match="disk full"):
        await runtime.arun("2+3?", thread_id="t")
    state = await runtime.astate("t")
    assert state is not None
    assert state.status == "running"

    again = GraphRuntime(model=model, tools=[add], checkpointer=checkpointer)
    response = await again.aresume("t")
    assert response.output == "It is 5."
    assert len(model.requests) == 2  # the turn journaled before the failure was not asked again
    assert [m.content for m in response.messages] == ["2+3?", "", "5", "It is 5."]
    messages = (await again.agraph_state("t")).values["messages"]
    assert messages == response.messages
