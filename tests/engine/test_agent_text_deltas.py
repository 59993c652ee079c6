"""An agent step's model text as `text_delta` run events while the model writes.

On SQLite and PostgreSQL: the deltas of a turn add up to its journaled text
and come before its `model_turn`; they are coalesced (about one write per
250 ms, not one per token); a resumed step has none for the turns it reads
back; a specialist's carry its name; a model that cannot stream still
answers; a delta that cannot be written is dropped, the step goes on. And
the coalescing, masking and dropping of `TextDeltas` itself, on a fake store.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections.abc import AsyncGenerator, Callable
from types import SimpleNamespace
from typing import Any, cast

import pytest

from tidemill.engine import AsyncEngine, RunEvent
from tidemill.engine._models import ModelChoice
from tidemill.engine._step_env import Secrets
from tidemill.engine.ai import _deltas
from tidemill.engine.ai._deltas import TextDeltas
from tidemill.errors import ProviderError
from tidemill.flows import Flow
from tidemill.llm import Model, ModelRequest, ModelStreamEvent, ScriptedModel
from tidemill.store import JobRow, RunRow, Store
from tidemill.types import Message, ModelResponse, ResponseDone, TextDelta, ToolCall, Usage

pytestmark = pytest.mark.timeout(90)

LOOKUP = "def main(order_id: str):\n    return {'order_id': order_id, 'status': 'shipped'}\n"
ANSWER = "Order A1 left the warehouse on Monday and reaches you on Thursday."


def agent_flow(agent: dict[str, Any], user: str = "Where is order A1?") -> Flow:
    body = {"id": "agent", "ai_agent": {"model": "fake", **agent}, "inputs": {"user_message": user}}
    return Flow.model_validate({"steps": [body]})


def response(text: str, calls: tuple[ToolCall, ...] = ()) -> ModelResponse:
    return ModelResponse(
        message=Message.assistant(text, tool_calls=calls),
        usage=Usage(requests=1, input_tokens=3, output_tokens=len(text) // 4 + 1),
        finish_reason="tool_calls" if calls else "stop",
        model="slow",
        provider="test",
    )


class SlowStream(Model):
    """Streams each answer in `pieces` chunks, `gap` seconds apart (a model writing)."""

    provider = "test"
    model_name = "slow"

    def __init__(self, answers: list[str], *, pieces: int = 40, gap: float = 0.025) -> None:
        self.answers = answers
        self.pieces, self.gap = pieces, gap
        self.streams = 0
        self.requests = 0

    def _answer(self, request: ModelRequest) -> str:
        turn = sum(1 for m in request.messages if m.role == "assistant")
        return self.answers[min(turn, len(self.answers) - 1)]

    async def request(self, request: ModelRequest) -> ModelResponse:
        self.requests += 1
        return response(self._answer(request))

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelStreamEvent, None]:
        self.streams += 1
        text = self._answer(request)
        size = max(1, -(-len(text) // self.pieces))
        for start in range(0, len(text), size):
            await asyncio.sleep(self.gap)
            yield TextDelta(delta=text[start : start + size])
        yield ResponseDone(response=response(text))


class RequestOnly(Model):
    """A model with no streaming API of its own (`Model.stream`'s default)."""

    provider = "test"
    model_name = "whole"

    async def request(self, request: ModelRequest) -> ModelResponse:
        return response(ANSWER)


class PlainJsonGateway(RequestOnly):
    """A gateway that answers a streaming request with plain JSON: it cannot stream."""

    def __init__(self) -> None:
        self.streams = 0
        self.requests = 0

    async def request(self, request: ModelRequest) -> ModelResponse:
        self.requests += 1
        return response(ANSWER)

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelStreamEvent, None]:
        self.streams += 1
        raise ProviderError(
            "test answered a streaming request with plain JSON instead of an event stream.",
            provider="test",
            status_code=200,
        )
        yield  # pragma: no cover - a generator


async def run_agent(
    engine: AsyncEngine, flow: Flow, models: Callable[[ModelChoice], Model]
) -> tuple[str, Any]:
    async with engine.worker(concurrency=2, poll=0.05, pool_size=1, models=models):
        run_id = await engine.submit(flow)
        return run_id, await engine.wait(run_id, timeout=60)


def deltas_of(events: list[RunEvent]) -> list[RunEvent]:
    return [e for e in events if e.kind == "text_delta"]


def joined(events: list[RunEvent], turn: int, agent: str | None = None) -> str:
    found = [e for e in deltas_of(events) if e.data["turn"] == turn]
    found = [e for e in found if e.data.get("agent") == agent]
    offsets = [e.data["offset"] for e in found]
    text = "".join(e.data["text"] for e in found)
    # Each delta starts where the one before it ended.
    assert offsets == [sum(len(e.data["text"]) for e in found[:i]) for i in range(len(found))]
    return text


# --- end to end -------------------------------------------------------------------------------


async def test_a_streamed_answer_arrives_in_coalesced_deltas_before_its_turn(
    engine: AsyncEngine,
) -> None:
    model = SlowStream([ANSWER], pieces=40, gap=0.025)  # about 1 s of writing
    started = time.monotonic()
    run_id, result = await run_agent(engine, agent_flow({}), lambda _c: model)
    took = time.monotonic() - started
    assert result == ANSWER
    events = await engine.events(run_id)
    deltas = deltas_of(events)
    assert joined(events, 0) == ANSWER
    # Coalesced: 40 chunks in ~1 s make a handful of events, not 40.
    assert 2 <= len(deltas) <= took / 0.25 + 2, [e.data for e in deltas]
    span = deltas[-1].at - deltas[0].at
    assert span > 0.5  # written while the model wrote, not all at the end
    gaps = [b.at - a.at for a, b in itertools.pairwise(deltas[:-1])]
    assert all(gap >= 0.2 for gap in gaps), gaps  # the last one is the turn's flush
    assert all(e.step_id == "agent" and e.job_id is not None for e in deltas)
    assert all(set(e.data) == {"turn", "offset", "text"} for e in deltas)
    (turn,) = [e for e in events if e.kind == "model_turn"]
    assert deltas[-1].id < turn.id  # the last flush comes before the journaled turn
    assert turn.data["response"]["message"]["content"] == ANSWER
    print(f"\n{len(deltas)} text_delta events in {span:.2f} s: {len(deltas) / span:.1f}/s")


async def test_the_scripted_model_streams_word_by_word_each_turn_its_own(
    engine: AsyncEngine,
) -> None:
    model = ScriptedModel(
        ["Let me look that up.", "Order A1 has shipped today."],
        tool_calls=[[ToolCall(id="c1", name="lookup", arguments={"order_id": "A1"})], []],
    )
    flow = agent_flow({"tools": [{"name": "lookup", "script": LOOKUP}]})
    run_id, result = await run_agent(engine, flow, lambda _c: model)
    assert result == "Order A1 has shipped today."
    events = await engine.events(run_id)
    assert joined(events, 0) == "Let me look that up."
    assert joined(events, 1) == "Order A1 has shipped today."
    # The first turn's first word is written at once, the rest with the turn; the second
    # turn starts within 250 ms of that write, so its text may come in one delta.
    assert len([e for e in deltas_of(events) if e.data["turn"] == 0]) >= 2
    # Each turn's deltas come before its model_turn, and after the turn before it.
    order = [(e.kind, e.data.get("turn")) for e in events if e.kind in ("text_delta", "model_turn")]
    kinds = [kind for kind, _ in order]
    first_turn, second_turn = (i for i, kind in enumerate(kinds) if kind == "model_turn")
    assert {turn for _, turn in order[:first_turn]} == {0}
    assert {turn for _, turn in order[first_turn + 1 : second_turn]} == {1}


async def test_a_resumed_step_has_no_deltas_for_the_turns_it_reads_back(
    engine: AsyncEngine,
) -> None:
    model = ScriptedModel(
        ["I will pay it.", "Paid in full."],
        tool_calls=[[ToolCall(id="c1", name="pay", arguments={})], []],
    )
    pay = {"name": "pay", "script": "def main():\n    return 'ok'\n", "requires_approval": True}
    flow = agent_flow({"tools": [pay]})
    async with engine.worker(concurrency=2, poll=0.05, pool_size=1, models=lambda _c: model):
        run_id = await engine.submit(flow)
        for _ in range(1000):
            if rows := await engine.approvals(run_id):
                break
            await asyncio.sleep(0.02)
        before = deltas_of(await engine.events(run_id))
        await engine.approve(rows[0].id)
        assert await engine.wait(run_id, timeout=60) == "Paid in full."
    events = await engine.events(run_id)
    after = [e for e in deltas_of(events) if e.id > before[-1].id]
    assert "".join(e.data["text"] for e in before) == "I will pay it."
    assert {e.data["turn"] for e in after} == {1}  # turn 0 came from the journal
    assert joined(events, 1) == "Paid in full."


async def test_a_specialists_deltas_carry_its_name(engine: AsyncEngine) -> None:
    tasks = [{"id": "t1", "specialist": "scout", "prompt": "Find the carrier."}]
    parent = ScriptedModel(
        ["Asking the scout.", "The carrier is DHL."],
        tool_calls=[[ToolCall(id="c1", name="delegate", arguments={"tasks": tasks})], []],
    )
    scout = ScriptedModel(["The carrier is DHL, tracking 42."])
    flow = agent_flow({"specialists": [{"name": "scout", "description": "finds carriers"}]})

    def team(choice: ModelChoice) -> Model:
        return scout if choice.agent == "scout" else parent

    run_id, result = await run_agent(engine, flow, team)
    assert result == "The carrier is DHL."
    events = await engine.events(run_id)
    assert joined(events, 0) == "Asking the scout."
    assert joined(events, 1) == "The carrier is DHL."
    assert joined(events, 0, agent="scout") == "The carrier is DHL, tracking 42."
    scouts = [e for e in deltas_of(events) if "agent" in e.data]
    assert {(e.data["agent"], e.data["task"]) for e in scouts} == {("scout", 1)}


async def test_a_model_that_cannot_stream_gives_its_text_whole(engine: AsyncEngine) -> None:
    run_id, result = await run_agent(engine, agent_flow({}), lambda _c: RequestOnly())
    assert result == ANSWER
    (delta,) = deltas_of(await engine.events(run_id))
    assert delta.data == {"turn": 0, "offset": 0, "text": ANSWER}


async def test_a_gateway_that_answers_streams_whole_is_asked_whole(
    engine: AsyncEngine, caplog: pytest.LogCaptureFixture
) -> None:
    gateway = PlainJsonGateway()
    flow = Flow.model_validate(
        {
            "steps": [
                {"id": "a", "ai_agent": {"model": "fake"}, "inputs": {"user_message": "One?"}},
                {"id": "b", "ai_agent": {"model": "fake"}, "inputs": {"user_message": "Two?"}},
            ]
        }
    )
    with caplog.at_level(logging.WARNING, "tidemill.worker"):
        run_id, result = await run_agent(engine, flow, lambda _c: gateway)
    assert result == ANSWER
    assert (gateway.streams, gateway.requests) == (1, 2)  # refused once, then asked whole
    assert deltas_of(await engine.events(run_id)) == []
    assert "answered a streaming request whole" in caplog.text


async def test_deltas_that_cannot_be_written_are_dropped_and_the_step_goes_on(
    engine: AsyncEngine, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(*_args: Any) -> Any:
        raise RuntimeError("the events table is on fire")

    monkeypatch.setattr(_deltas, "_add", broken)
    monkeypatch.setattr(_deltas, "Tx", SimpleNamespace(events_statement=broken))
    model = ScriptedModel(["Still answered, word by word."])
    with caplog.at_level(logging.WARNING, "tidemill.worker"):
        run_id, result = await run_agent(engine, agent_flow({}), lambda _c: model)
    assert result == "Still answered, word by word."
    events = await engine.events(run_id)
    assert deltas_of(events) == []
    assert [e.kind for e in events if e.kind == "model_turn"] == ["model_turn"]
    assert "text_delta event(s) not written" in caplog.text


# --- TextDeltas on a fake store ---------------------------------------------------------------


class FakeStore:
    """Records each write's events; `fail` makes writes raise."""

    dialect = "sqlite"

    def __init__(self) -> None:
        self.writes: list[list[dict[str, Any]]] = []
        self.fail = False

    async def transact(self, fn: Callable[[Any], Any]) -> Any:
        if self.fail:
            raise OSError("disk full")
        written: list[dict[str, Any]] = []
        fn(SimpleNamespace(add_event=lambda _run, _kind, data, **_kw: written.append(data)))
        self.writes.append(written)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def fake_deltas(secrets: Secrets | None = None) -> tuple[TextDeltas, FakeStore, Clock]:
    store, clock = FakeStore(), Clock()
    run = cast(RunRow, SimpleNamespace(root_id="r", id="r"))
    job = cast(JobRow, SimpleNamespace(id=7, step_id="agent"))
    deltas = TextDeltas(cast(Store, store), run, job, secrets or Secrets(), clock=clock)
    return deltas, store, clock


async def test_one_write_per_interval_for_every_turn_of_the_step() -> None:
    deltas, store, clock = fake_deltas()
    own, scout = deltas.begin(0, {}), deltas.begin(2, {"agent": "scout", "task": 1})
    deltas.add(own, "Hel")  # the first text is written at once
    await deltas.settle()
    deltas.add(own, "lo")
    deltas.add(scout, "Sc")
    clock.now += 0.1
    deltas.add(scout, "out")  # too soon: kept
    assert len(store.writes) == 1
    clock.now += 0.2
    deltas.add(own, ",")  # both turns' text, in one write
    await deltas.settle()
    deltas.add(own, " world")
    await deltas.end(own)  # the turn's rest, at once
    await deltas.end(scout)
    assert store.writes == [
        [{"turn": 0, "offset": 0, "text": "Hel"}],
        [
            {"turn": 0, "offset": 3, "text": "lo,"},
            {"agent": "scout", "task": 1, "turn": 2, "offset": 0, "text": "Scout"},
        ],
        [{"turn": 0, "offset": 6, "text": " world"}],
    ]
    assert (deltas.writes, deltas.written, deltas.dropped) == (3, 4, 0)


async def test_a_secret_split_across_chunks_is_still_masked() -> None:
    deltas, store, clock = fake_deltas(Secrets({"hunter2"}))
    turn = deltas.begin(0, {})
    deltas.add(turn, "the password is hun")
    await deltas.settle()
    clock.now += 1
    deltas.add(turn, "ter2, really")
    await deltas.end(turn)
    texts = [data["text"] for write in store.writes for data in write]
    assert texts == ["the password is ", "***, really"]


async def test_a_failed_write_is_counted_and_the_next_goes_on() -> None:
    deltas, store, clock = fake_deltas()
    turn = deltas.begin(0, {})
    store.fail = True
    deltas.add(turn, "lost")
    await deltas.settle()
    store.fail = False
    clock.now += 1
    deltas.add(turn, " kept")
    await deltas.end(turn)
    assert store.writes == [[{"turn": 0, "offset": 4, "text": " kept"}]]
    assert (deltas.written, deltas.dropped) == (1, 1)
