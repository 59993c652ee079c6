"""Specialists on durable journals: child threads are kept, a delegation runs once across a resume.

The supervisor and its specialist journal to the same SQLite file or
PostgreSQL schema (skipped, saying why, when TIDEMILL_TEST_POSTGRES_URL is
not set); every check reads through new checkpointers and runtimes, as
another process would.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

import pytest

from tidemill import AgentInterrupt, AgentRuntime, ApprovalError, ThreadBusy
from tidemill.agents import AgentTool
from tidemill.agents.checkpoint import Checkpointer, PostgresCheckpointer, SQLiteCheckpointer
from tidemill.agents.journal import JournalEvent, JournalRecord, ToolFinished
from tidemill.llm import ModelRequest, ScriptedModel
from tidemill.types import Message, Role, ToolCall

CALL = ToolCall(id="call_research", name="researcher", arguments={"task": "tides at Brest"})
CHILD_THREAD = f"boss:researcher:{CALL.id}"


@dataclass
class Store:
    """One durable journal; `open()` gives a new checkpointer on it, as a new process would."""

    name: str
    open: Callable[[], Checkpointer]
    opened: list[Checkpointer] = field(default_factory=list)

    def new(self) -> Checkpointer:
        checkpointer = self.open()
        self.opened.append(checkpointer)
        return checkpointer


@pytest.fixture(params=["sqlite", "postgres"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    if request.param == "sqlite":
        path = tmp_path / "journal.db"
        made = Store("sqlite", lambda: SQLiteCheckpointer(path))
    else:
        url = request.getfixturevalue("postgres_url")
        schema = f"tidemill_test_{os.getpid()}_{secrets.token_hex(4)}"
        made = Store("postgres", lambda: PostgresCheckpointer(url, schema=schema))
    try:
        yield made
    finally:
        for checkpointer in made.opened:
            await checkpointer.aclose()
        if isinstance(dropper := made.open(), PostgresCheckpointer):
            await dropper.drop_schema()
        await dropper.aclose()


def supervisor_model() -> ScriptedModel:
    """Delegates CALL, then reports what came back."""

    def handler(request: ModelRequest) -> Message | str:
        results = [m.content for m in request.messages if m.role == Role.TOOL]
        if not results:
            return Message.assistant("Delegating.", tool_calls=(CALL,))
        return "Report: " + " | ".join(results)

    return ScriptedModel(handler=handler)


def researcher_model() -> ScriptedModel:
    return ScriptedModel(handler=lambda r: f"found {r.messages[-1].content}")


def team(
    store: Store,
    boss_model: ScriptedModel,
    child_model: ScriptedModel,
    *,
    boss_checkpointer: Checkpointer | None = None,
    approval: bool = False,
) -> AgentRuntime:
    """A supervisor with one specialist, each on a new checkpointer of the store."""
    child = AgentRuntime(model=child_model, checkpointer=store.new(), name="researcher")
    return AgentRuntime(
        model=boss_model,
        checkpointer=boss_checkpointer or store.new(),
        specialists=[AgentTool(child, name="researcher", description="Finds tides.")],
        require_approval=approval,
        name="boss",
    )


async def test_the_child_thread_is_kept_beside_the_supervisors(store: Store) -> None:
    child_model = researcher_model()
    response = await team(store, supervisor_model(), child_model).arun(
        "When is high tide?", thread_id="boss"
    )
    assert response.output == "Report: found tides at Brest"

    reader = store.new()
    assert {"boss", CHILD_THREAD} <= set(await reader.threads())
    child_journal = await reader.read(CHILD_THREAD)
    first = child_journal[0].event
    assert first.kind == "user_message"
    assert [m.content for m in first.messages] == ["tides at Brest"]  # type: ignore[union-attr]
    assert child_journal[-1].event.kind == "finished"
    assert child_journal[-1].event.output == "found tides at Brest"  # type: ignore[union-attr]
    # The supervisor's journal has the delegation's result and the child's usage rolled up.
    state = await AgentRuntime(model=ScriptedModel(), checkpointer=reader).astate("boss")
    assert state is not None and state.status == "finished"
    assert state.usage.requests == 3


class Crash(Exception):
    """The supervisor's process dies here."""


@dataclass
class DiesBeforeTheResult:
    """A checkpointer whose process dies as it journals the delegation's result: nothing after."""

    inner: Checkpointer
    dead: bool = False

    async def append(self, thread_id: str, events: Sequence[JournalEvent], *, after: int) -> int:
        if self.dead or any(isinstance(e, ToolFinished) for e in events):
            self.dead = True
            raise Crash("killed before the delegation's result was journaled")
        return await self.inner.append(thread_id, events, after=after)

    async def read(self, thread_id: str, *, after: int = 0) -> list[JournalRecord]:
        return await self.inner.read(thread_id, after=after)

    async def threads(self) -> list[str]:
        return await self.inner.threads()

    async def delete(self, thread_id: str) -> bool:
        return await self.inner.delete(thread_id)

    async def prune(self, *, older_than: timedelta) -> int:
        return await self.inner.prune(older_than=older_than)

    async def aclose(self) -> None:
        await self.inner.aclose()


async def test_a_delegation_cut_short_by_a_crash_runs_once_across_the_resume(
    store: Store,
) -> None:
    first_child = researcher_model()
    dying = DiesBeforeTheResult(store.new())
    with pytest.raises(Crash):
        await team(store, supervisor_model(), first_child, boss_checkpointer=dying).arun(
            "When is high tide?", thread_id="boss"
        )
    assert len(first_child.requests) == 1  # the child finished; its answer was never recorded
    assert dying.dead

    # A new supervisor and specialist on new checkpointers: the call is in flight.
    second_child = researcher_model()
    resumed_team = team(store, supervisor_model(), second_child)
    state = await resumed_team.astate("boss")
    assert state is not None and list(state.open_calls) == [CALL.id]
    with pytest.raises(ThreadBusy):
        await resumed_team.aresume("boss")
    response = await resumed_team.aresume("boss", retry_in_flight=True)

    assert response.output == "Report: found tides at Brest"
    assert second_child.requests == []  # the finished child thread answered; nothing re-ran
    child_journal = await store.new().read(CHILD_THREAD)
    assert [r.event.kind for r in child_journal].count("user_message") == 1
    assert [r.event.kind for r in child_journal].count("finished") == 1


async def test_an_approved_delegation_runs_once_however_often_it_is_resumed(
    store: Store,
) -> None:
    first_child = researcher_model()
    with pytest.raises(AgentInterrupt) as pause:
        await team(store, supervisor_model(), first_child, approval=True).arun(
            "When is high tide?", thread_id="boss"
        )
    assert pause.value.pending == [CALL]
    assert first_child.requests == []  # nothing delegated before the decision

    second_child = researcher_model()
    response = await team(store, supervisor_model(), second_child, approval=True).aresume(
        "boss", approved=True
    )
    assert response.output == "Report: found tides at Brest"
    assert len(second_child.requests) == 1

    third_child = researcher_model()
    with pytest.raises(ApprovalError):
        await team(store, supervisor_model(), third_child, approval=True).aresume(
            "boss", approved=True
        )
    assert third_child.requests == []
    child_journal = await store.new().read(CHILD_THREAD)
    assert [r.event.kind for r in child_journal].count("finished") == 1
