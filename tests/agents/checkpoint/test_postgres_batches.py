"""PostgreSQL: reads and appends of many threads at once share statements, each checked alone."""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
import pytest

from tidemill.agents.checkpoint import PostgresCheckpointer
from tidemill.agents.journal import RunFinished, UserInput
from tidemill.errors import ConfigurationError, JournalConflict
from tidemill.types import Message


@pytest.fixture
def statements(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every statement the journal sends, as it sends it."""
    sent: list[str] = []
    execute = psycopg.AsyncConnection.execute

    async def spy(self: psycopg.AsyncConnection[Any], query: Any, *args: Any, **kw: Any) -> Any:
        sent.append(str(query))
        return await execute(self, query, *args, **kw)

    monkeypatch.setattr(psycopg.AsyncConnection, "execute", spy)
    return sent


def _event(n: int) -> RunFinished:
    return RunFinished(output=n)


async def test_many_threads_at_once_go_out_in_few_statements(
    postgres_checkpointer: PostgresCheckpointer, statements: list[str]
) -> None:
    journal = postgres_checkpointer
    await journal.threads()  # connected, table made
    statements.clear()
    threads = [f"t{i}" for i in range(50)]
    seqs = await asyncio.gather(
        *(journal.append(t, [_event(i)], after=0) for i, t in enumerate(threads))
    )
    assert seqs == [1] * 50
    read = await asyncio.gather(*(journal.read(t) for t in threads))
    assert [[r.event for r in records] for records in read] == [[_event(i)] for i in range(50)]
    assert len(statements) <= 2 * journal.max_connections  # not 100


async def test_a_batched_append_checks_each_thread_alone(
    postgres_checkpointer: PostgresCheckpointer,
) -> None:
    journal = postgres_checkpointer
    await journal.append("taken", [_event(1), _event(2)], after=0)
    await journal.append("other", [_event(1)], after=0)
    outcomes = await asyncio.gather(
        journal.append("taken", [_event(3)], after=1),  # seq 2 exists: a primary-key clash
        journal.append("fresh", [_event(1)], after=0),
        journal.append("missing", [_event(1)], after=5),  # no entry 5: nothing stored
        journal.append("other", [_event(2)], after=1),
        return_exceptions=True,
    )
    assert isinstance(outcomes[0], JournalConflict)
    assert outcomes[1] == 1
    assert isinstance(outcomes[2], JournalConflict)
    assert outcomes[3] == 2
    assert [r.event for r in await journal.read("taken")] == [_event(1), _event(2)]
    assert [r.event for r in await journal.read("fresh")] == [_event(1)]
    assert await journal.read("missing") == []
    assert [r.seq for r in await journal.read("other")] == [1, 2]


async def test_two_writers_of_one_thread_at_once_one_wins(
    postgres_checkpointer: PostgresCheckpointer,
) -> None:
    journal = postgres_checkpointer
    await journal.threads()
    outcomes = await asyncio.gather(
        journal.append("t", [_event(1)], after=0),
        journal.append("t", [_event(2)], after=0),
        journal.append("u", [_event(3)], after=0),
        return_exceptions=True,
    )
    assert sorted(map(type, outcomes[:2]), key=str) == sorted([int, JournalConflict], key=str)
    assert outcomes[2] == 1
    assert len(await journal.read("t")) == 1


async def test_batched_reads_keep_each_after(postgres_checkpointer: PostgresCheckpointer) -> None:
    journal = postgres_checkpointer
    user = UserInput(messages=(Message.user("hi"),), run_id="run_1")
    for thread in ("a", "b", "c"):
        await journal.append(thread, [user, _event(1), _event(2)], after=0)
    a, b, c, none = await asyncio.gather(
        journal.read("a"), journal.read("b", after=2), journal.read("c", after=3), journal.read("x")
    )
    assert [r.seq for r in a] == [1, 2, 3] and a[0].event == user
    assert [r.seq for r in b] == [3]
    assert c == [] and none == []


def test_max_connections_must_be_positive() -> None:
    with pytest.raises(ConfigurationError):
        PostgresCheckpointer("postgresql://nobody@127.0.0.1:1/none", max_connections=0)


async def test_a_lone_append_goes_out_on_the_callers_task(
    postgres_checkpointer: PostgresCheckpointer, monkeypatch: pytest.MonkeyPatch
) -> None:
    journal = postgres_checkpointer
    await journal.threads()  # one idle connection, nothing forming
    senders: list[asyncio.Task[Any] | None] = []
    execute = psycopg.AsyncConnection.execute

    async def spy(self: psycopg.AsyncConnection[Any], query: Any, *args: Any, **kw: Any) -> Any:
        senders.append(asyncio.current_task())
        return await execute(self, query, *args, **kw)

    monkeypatch.setattr(psycopg.AsyncConnection, "execute", spy)
    assert await journal.append("alone", [_event(1)], after=0) == 1
    assert [r.event for r in await journal.read("alone")] == [_event(1)]
    assert senders == [asyncio.current_task()] * 2  # no batch task in between


async def test_a_cancelled_append_leaves_no_busy_connection_behind(
    postgres_checkpointer: PostgresCheckpointer, postgres_url: str
) -> None:
    journal = postgres_checkpointer
    await journal.threads()
    # Another transaction holds seq 1 of the thread: the append waits on its key.
    async with await psycopg.AsyncConnection.connect(postgres_url) as holder:
        await holder.execute(
            f'INSERT INTO "{journal.schema}".tidemill_journal '
            "(thread_id, seq, kind, schema_version, payload) VALUES ('t', 1, 'finished', 1, '{}')"
        )
        append = asyncio.ensure_future(journal.append("t", [_event(1)], after=0))
        await asyncio.sleep(0.3)
        assert not append.done()
        append.cancel()
        with pytest.raises(asyncio.CancelledError):
            await append
        await holder.rollback()
    assert await journal.append("t", [_event(2)], after=0) == 1
    assert [r.event for r in await journal.read("t")] == [_event(2)]


async def test_short_and_long_appends_take_their_own_statements_and_both_check(
    postgres_checkpointer: PostgresCheckpointer, statements: list[str]
) -> None:
    journal = postgres_checkpointer
    await journal.threads()
    statements.clear()
    assert await journal.append("t", [_event(i) for i in range(3)], after=0) == 3
    assert await journal.append("t", [_event(i) for i in range(3, 43)], after=3) == 43
    assert "VALUES" in statements[0] and "unnest" in statements[1]  # rows, then arrays
    assert [r.event for r in await journal.read("t")] == [_event(i) for i in range(43)]
    for events in ([_event(0)], [_event(i) for i in range(40)]):  # a stale `after`, each way
        with pytest.raises(JournalConflict):
            await journal.append("t", events, after=3)
    assert len(await journal.read("t")) == 43
