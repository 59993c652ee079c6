"""Bounded threads (`max_history`), `history()` and time travel (`fork`), through the agent."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tidemill import AgentInterrupt, agent, tool
from tidemill.agents import AgentBuilder
from tidemill.agents.checkpoint import (
    HistoryUnavailable,
    MemoryCheckpointer,
    PostgresCheckpointer,
    SQLiteCheckpointer,
)
from tidemill.errors import ConfigurationError, InvalidOption
from tidemill.llm import ModelRequest, ScriptedModel
from tidemill.tools import Tool
from tidemill.types import Message, ToolCall

POSTGRES_ENV = "TIDEMILL_TEST_POSTGRES_URL"


def _answer(request: ModelRequest) -> Message:
    """Asks for `lookup` after each prompt; then answers with how much of the thread it sees."""
    last = request.messages[-1]
    prompts = [m.content for m in request.messages if m.role == "user"]
    if last.role == "user":
        return Message.assistant(
            "", tool_calls=(ToolCall(name="lookup", arguments={"q": len(prompts)}),)
        )
    return Message.assistant(f"seen {len(prompts)}: {' | '.join(str(p) for p in prompts)}")


@tool
def lookup(q: int) -> str:
    """Look something up."""
    return f"found {q}"


@tool(requires_approval=True)
def deploy(env: str) -> str:
    """Deploy."""
    return f"deployed to {env}"


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[dict[str, object]]:
    """`.checkpoint(...)` arguments for each backend, with `max_history=5`."""
    if request.param == "memory":
        yield {"spec": "memory"}
    elif request.param == "sqlite":
        yield {"spec": "sqlite", "path": tmp_path / "agent.db"}
    else:
        url = os.environ.get(POSTGRES_ENV)
        if not url:
            pytest.skip(f"{POSTGRES_ENV} is not set; PostgreSQL tests need a server (CI sets it)")
        from tests.conftest import drop_postgres_schema, unique_schema

        schema = unique_schema()
        try:
            yield {"spec": url, "schema": schema}
        finally:
            drop_postgres_schema(url, schema)


def _bot(backend: dict[str, object], *tools: Tool, **script: Any) -> AgentBuilder:
    """An agent on `backend` with `max_history=5`: `_answer`, or a script."""
    llm = ScriptedModel(**script) if script else ScriptedModel(handler=_answer)
    bot = agent().llm(llm).tool(*tools or (lookup,))
    spec = backend["spec"]
    if isinstance(spec, MemoryCheckpointer):
        return bot.checkpoint(spec)
    assert isinstance(spec, str)
    options = {key: value for key, value in backend.items() if key != "spec"}
    return bot.checkpoint(spec, max_history=5, **options)


def test_a_long_thread_keeps_five_records_and_the_whole_conversation(
    backend: dict[str, object],
) -> None:
    bot = _bot(backend)
    try:
        for run in range(6):
            response = bot.run(f"question {run}", thread_id="t")
            records = bot.history("t", limit=None)
            assert len(records) <= 5, [r.event.kind for r in records]
        assert records[0].event.kind == "snapshot"
        assert records[-1].seq == 30  # 5 records a run; seqs are never renumbered
        # The model saw every earlier question, though their records were compacted.
        assert response.output == "seen 6: " + " | ".join(f"question {i}" for i in range(6))
        state = bot.state("t")
        assert state is not None and state.status == "finished"
        assert [m.content for m in state.messages if m.role == "user"] == [
            f"question {i}" for i in range(6)
        ]
        assert len(state.messages) == 6 * 4
        assert state.usage.requests == 2  # the last run's usage, as without compaction
    finally:
        bot.close()


def test_an_approval_pause_survives_compaction(backend: dict[str, object]) -> None:
    call = ToolCall(name="deploy", arguments={"env": "prod"})
    script: dict[str, object] = {
        "responses": ["a", "b", "", "Deployed."],
        "tool_calls": [[], [], [call], []],
    }
    bot = _bot(backend, deploy, **script)
    try:
        bot.run("one", thread_id="t")
        bot.run("two", thread_id="t")
        with pytest.raises(AgentInterrupt):
            bot.run("ship it", thread_id="t")
        records = bot.history("t", limit=None)
        assert len(records) <= 5 and records[0].event.kind == "snapshot"
        assert records[-1].event.kind == "approval_requested"
        assert bot.pending_approvals("t") == [call]
        # Another process (for memory: another agent on the same store) resumes it.
        shared: dict[str, object] = (
            {"spec": bot.build().checkpointer} if backend["spec"] == "memory" else backend
        )
        again = _bot(shared, deploy, **script)
        try:
            assert again.pending_approvals("t") == [call]
            response = again.resume("t", approved=True)
            assert response.output == "Deployed."
            assert [m.content for m in response.messages if m.role == "tool"] == [
                "deployed to prod"
            ]
            assert [m.content for m in response.messages if m.role == "user"] == [
                "one", "two", "ship it",
            ]  # fmt: skip
            assert len(again.history("t", limit=None)) <= 5
        finally:
            again.close()
    finally:
        bot.close()


def test_fork_then_run_both_threads() -> None:
    bot = agent().llm(ScriptedModel(handler=_answer)).tool(lookup)
    bot.run("question A", thread_id="main")
    after_first = bot.history("main")[-1].seq
    bot.run("question B", thread_id="main")

    fork = bot.fork("main", at=after_first, new_thread_id="alt")
    assert fork == "alt"
    assert [r.event.kind for r in bot.history("alt")] == ["snapshot"]
    assert bot.run("question C", thread_id="alt").output == "seen 2: question A | question C"
    assert bot.run("question D", thread_id="main").output == (
        "seen 3: question A | question B | question D"
    )
    forked = bot.state("alt")
    assert forked is not None and len(forked.messages) == 8
    anonymous = bot.fork("main", at=1)
    assert anonymous.startswith("main:fork-") and bot.state(anonymous) is not None


def test_fork_of_a_paused_thread_is_paused_on_the_same_calls() -> None:
    call = ToolCall(name="deploy", arguments={"env": "prod"})
    bot = agent().llm("fake", responses=["", "Deployed."], tool_calls=[[call], []]).tool(deploy)
    with pytest.raises(AgentInterrupt):
        bot.run("ship it", thread_id="t")
    fork = bot.fork("t", at=bot.history("t")[-1].seq)
    assert bot.pending_approvals(fork) == [call]
    assert bot.resume(fork, approved=True).output == "Deployed."
    assert bot.pending_approvals("t") == [call]  # the original still waits


def test_fork_inside_a_compacted_prefix_names_what_is_left() -> None:
    bot = agent().llm(ScriptedModel(handler=_answer)).tool(lookup).checkpoint(max_history=5)
    for run in range(3):
        bot.run(f"q{run}", thread_id="t")
    first = bot.history("t")[0].seq
    with pytest.raises(HistoryUnavailable) as info:
        bot.fork("t", at=1)
    assert info.value.available == (first, 15)
    assert f"from {first} to 15" in str(info.value)
    with pytest.raises(HistoryUnavailable, match="no record 16"):
        bot.fork("t", at=16)
    with pytest.raises(HistoryUnavailable, match="no records"):
        bot.fork("missing", at=1)
    with pytest.raises(InvalidOption, match="already has records"):
        bot.fork("t", at=first, new_thread_id="t")


def test_history_keeps_the_last_twenty_by_default() -> None:
    bot = agent().llm(ScriptedModel(handler=_answer)).tool(lookup)
    for run in range(5):
        bot.run(f"q{run}", thread_id="t")  # 25 records
    records = bot.history("t")
    assert [r.seq for r in records] == list(range(6, 26))  # newest last
    assert len(bot.history("t", limit=None)) == 25
    assert [r.seq for r in bot.history("t", limit=2)] == [24, 25]


@pytest.mark.parametrize("value", [0, 1, 3, -5])
def test_too_small_a_max_history_is_refused_with_a_hint(value: int) -> None:
    for make in (
        lambda: MemoryCheckpointer(max_history=value),
        lambda: SQLiteCheckpointer(":memory:", max_history=value),
        lambda: agent().llm("fake").checkpoint("memory", max_history=value).build(),
    ):
        with pytest.raises(InvalidOption, match="at least 4") as info:
            make()
        assert isinstance(info.value, ConfigurationError) and isinstance(info.value, ValueError)
        assert info.value.hint and "None to keep every record" in info.value.hint


@pytest.mark.parametrize("value", ["5", 5.0, True])
def test_max_history_must_be_a_whole_number(value: object) -> None:
    with pytest.raises(InvalidOption, match="whole number"):
        MemoryCheckpointer(max_history=value)  # type: ignore[arg-type]


def test_postgres_refuses_a_small_max_history_before_connecting() -> None:
    with pytest.raises(InvalidOption, match="at least 4"):
        PostgresCheckpointer("postgresql://nobody@127.0.0.1:1/none", max_history=2)
