"""Backend-specific behaviour: files, connections, closed stores, journals from elsewhere."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import os
import secrets
import sqlite3
import time
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from tidemill import AgentRuntime, ScriptedModel, tool
from tidemill.agents._thread import load_state
from tidemill.agents.checkpoint import Checkpointer, PostgresCheckpointer, SQLiteCheckpointer
from tidemill.agents.checkpoint.conformance import check_threads_sorted, sample_events, validate
from tidemill.agents.journal import SCHEMA_VERSION, ModelTurn, RunFinished, ToolStarted
from tidemill.errors import ConfigurationError, JournalConflict, SerializationError, ThreadBusy


# Not imported from tests/conftest.py: with tests/llm/conftest.py beside it,
# `import conftest` may find either one.
def unique_schema() -> str:
    """A PostgreSQL schema name no other test uses."""
    return f"tidemill_test_{os.getpid()}_{secrets.token_hex(4)}"


# -- SQLite --------------------------------------------------------------------------


async def test_sqlite_file_survives_reopening(tmp_path: Path) -> None:
    path = tmp_path / "nested" / "folder" / "journal.db"
    events = sample_events("reopen")
    first = SQLiteCheckpointer(path)
    await first.append("t", events, after=0)
    await first.aclose()

    second = SQLiteCheckpointer(path)
    try:
        assert [record.event for record in await second.read("t")] == events
        assert await second.threads() == ["t"]
        with pytest.raises(JournalConflict):
            await second.append("t", [RunFinished(output="stale")], after=0)
        last = await second.append("t", [RunFinished(output="more")], after=len(events))
        assert last == len(events) + 1
    finally:
        await second.aclose()


async def test_sqlite_instances_on_one_file_see_each_other(tmp_path: Path) -> None:
    one, two = SQLiteCheckpointer(tmp_path / "j.db"), SQLiteCheckpointer(tmp_path / "j.db")
    try:
        await one.append("t", [RunFinished(output=1)], after=0)
        with pytest.raises(JournalConflict):
            await two.append("t", [RunFinished(output=2)], after=0)
        assert [r.seq for r in await two.read("t")] == [1]
        assert await two.delete("t") is True
        assert await one.read("t") == []
    finally:
        await one.aclose()
        await two.aclose()


async def test_sqlite_memory_database_is_private_and_conforms() -> None:
    one, two = SQLiteCheckpointer(":memory:"), SQLiteCheckpointer(":memory:")
    try:
        await one.append("t", [RunFinished(output=1)], after=0)
        assert await two.read("t") == []
        assert await two.threads() == []
        assert await validate(two) == []
        assert [r.seq for r in await one.read("t")] == [1]
    finally:
        await one.aclose()
        await two.aclose()


async def test_sqlite_unopenable_path_fails_at_construction(tmp_path: Path) -> None:
    folder = tmp_path / "a-folder.db"
    folder.mkdir()
    with pytest.raises(SerializationError) as info:
        SQLiteCheckpointer(folder)
    assert info.value.hint


# -- journals written by something else -------------------------------------------------


@dataclass
class RawStore:
    """A checkpointer plus a way to put rows in its table behind its back."""

    checkpointer: Checkpointer
    insert: Callable[[str, int, str], Awaitable[None]]
    takes_any_text: bool
    """SQLite stores any text; PostgreSQL's jsonb only valid JSON."""


@pytest.fixture(params=["sqlite", "postgres"])
async def raw_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[RawStore]:
    if request.param == "sqlite":
        path = tmp_path / "journal.db"
        sqlite_store = SQLiteCheckpointer(path)

        async def insert_sqlite(thread_id: str, seq: int, payload: str) -> None:
            with contextlib.closing(sqlite3.connect(path)) as db, db:
                db.execute(
                    "INSERT INTO tidemill_journal VALUES (?, ?, ?, ?, ?, ?)",
                    (thread_id, seq, "unknown", 99, payload, time.time()),
                )

        try:
            yield RawStore(sqlite_store, insert_sqlite, takes_any_text=True)
        finally:
            await sqlite_store.aclose()
        return

    url = request.getfixturevalue("postgres_url")
    postgres_store = PostgresCheckpointer(url, schema=unique_schema())
    await postgres_store.threads()  # creates the schema and table

    async def insert_postgres(thread_id: str, seq: int, payload: str) -> None:
        async with await psycopg.AsyncConnection.connect(
            postgres_store.url, autocommit=True
        ) as connection:
            await connection.execute(
                f'INSERT INTO "{postgres_store.schema}".tidemill_journal '
                "(thread_id, seq, kind, schema_version, payload) "
                "VALUES (%s, %s, 'unknown', 99, %s::jsonb)",
                (thread_id, seq, payload),
            )

    try:
        yield RawStore(postgres_store, insert_postgres, takes_any_text=False)
    finally:
        await postgres_store.drop_schema()
        await postgres_store.aclose()


async def test_a_newer_journal_format_says_to_upgrade(raw_store: RawStore) -> None:
    payload = json.dumps({"schema_version": 99, "kind": "hologram", "frames": [1, 2]})
    await raw_store.insert("future", 1, payload)
    with pytest.raises(SerializationError) as info:
        await raw_store.checkpointer.read("future")
    error = info.value
    assert not isinstance(error, JournalConflict)
    assert "99" in error.message
    assert "upgrade" in str(error).lower()
    assert error.context == {"thread_id": "future", "seq": 1}


async def test_a_newer_format_with_familiar_fields_says_to_upgrade(raw_store: RawStore) -> None:
    payload = json.dumps({"schema_version": 99, "kind": "finished", "output": "means more in v99"})
    await raw_store.insert("future", 1, payload)
    with pytest.raises(SerializationError, match=r"(?i)upgrade"):
        await raw_store.checkpointer.read("future")


# Entries exactly as format 1 wrote them (tidemill a3fa33f): a turn, then its call's start.
_FORMAT_1 = [
    '{"schema_version":1,"kind":"user_message","messages":[{"role":"user","content":"Add 1 and 2.",'
    '"images":[],"reasoning":[],"tool_calls":[],"tool_call_id":null,"name":null,"is_error":false}],'
    '"run_id":"r1"}',
    '{"schema_version":1,"kind":"model_response","response":{"message":{"role":"assistant",'
    '"content":"","images":[],"reasoning":[],"tool_calls":[{"id":"call_1","name":"add",'
    '"arguments":{"a":1,"b":2},"raw_arguments":null,"signature":null}],"tool_call_id":null,'
    '"name":null,"is_error":false},"usage":{"requests":1,"input_tokens":5,"output_tokens":3,'
    '"cache_read_tokens":0,"cache_write_tokens":0,"reasoning_tokens":0,"cost_usd":0.0,'
    '"unpriced_requests":0},"finish_reason":"tool_calls","model":"fake","provider":"fake",'
    '"response_id":null}}',
    '{"schema_version":1,"kind":"tool_started","call":{"id":"call_1","name":"add",'
    '"arguments":{"a":1,"b":2},"raw_arguments":null,"signature":null},"attempt":1}',
]


async def test_a_format_1_journal_still_reads_and_resumes(raw_store: RawStore) -> None:
    """A thread written before starts moved into the turn: its started call is still in flight."""
    for seq, payload in enumerate(_FORMAT_1, start=1):
        await raw_store.insert("old", seq, payload)
    records = await raw_store.checkpointer.read("old")
    assert [(r.event.kind, r.event.schema_version) for r in records] == [
        ("user_message", 1),
        ("model_response", 1),
        ("tool_started", 1),
    ]
    turn = records[1].event
    assert isinstance(turn, ModelTurn) and turn.started == ()
    state = await load_state(raw_store.checkpointer, "old")
    assert (state.attempts, state.tool_calls, list(state.open_calls)) == (
        {"call_1": 1},
        1,
        ["call_1"],
    )

    added: list[int] = []

    @tool
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        added.append(a + b)
        return a + b

    runtime = AgentRuntime(
        model=ScriptedModel(["3"]), tools=[add], checkpointer=raw_store.checkpointer
    )
    # Started and never finished, as format 1 recorded it: not run again unless told to.
    with pytest.raises(ThreadBusy):
        await runtime.aresume("old")
    response = await runtime.aresume("old", retry_in_flight=True)
    assert (response.output, added) == ("3", [3])
    retried = [r.event for r in await raw_store.checkpointer.read("old")][3]
    assert isinstance(retried, ToolStarted)
    assert (retried.attempt, retried.schema_version) == (2, SCHEMA_VERSION)


async def test_garbage_payloads_are_serialization_errors(raw_store: RawStore) -> None:
    payloads = [
        "[1, 2, 3]",
        '"just a string"',
        '{"kind": "nonsense"}',
        '{"kind": "model_response", "response": 7}',
        '{"kind": "finished", "output": 1, "unexpected": true}',
        '{"schema_version": "one", "kind": "finished", "output": 1}',
    ]
    if raw_store.takes_any_text:
        payloads += ["not json at all", '{"kind": "finished"', ""]
    for index, payload in enumerate(payloads):
        thread_id = f"garbage-{index}"
        await raw_store.insert(thread_id, 1, payload)
        await raw_store.checkpointer.append(thread_id, [RunFinished(output="ok")], after=1)
        with pytest.raises(SerializationError) as info:
            await raw_store.checkpointer.read(thread_id)
        assert not isinstance(info.value, JournalConflict), payload
        assert f"Entry 1 of thread {thread_id!r}" in info.value.message, payload
        assert info.value.hint, payload
        assert info.value.__cause__ is not None, payload
        # The damage stays where it is: later entries still read.
        (record,) = await raw_store.checkpointer.read(thread_id, after=1)
        assert record.event == RunFinished(output="ok")


# -- PostgreSQL ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "schema",
    ["Public", "my-schema", "1abc", "", 'x"; DROP TABLE y; --', "a" * 64, "é"],
)
def test_postgres_rejects_a_bad_schema_name(schema: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        PostgresCheckpointer("postgresql://nobody@127.0.0.1:1/none", schema=schema)
    assert info.value.hint


async def test_postgres_unreachable_is_a_serialization_error_with_a_hint() -> None:
    checkpointer = PostgresCheckpointer(
        "postgresql://postgres@127.0.0.1:1/test?connect_timeout=5", schema=unique_schema()
    )
    try:
        for operation in (
            lambda: checkpointer.read("t"),
            lambda: checkpointer.append("t", [RunFinished(output=1)], after=0),
            checkpointer.threads,
        ):
            with pytest.raises(SerializationError) as info:
                await operation()
            assert not isinstance(info.value, JournalConflict)
            assert "reach" in info.value.message
            assert "PostgreSQL is running" in (info.value.hint or "")
    finally:
        await checkpointer.aclose()


def test_postgres_closes_connections_of_finished_event_loops(postgres_url: str) -> None:
    checkpointer = PostgresCheckpointer(postgres_url, schema=unique_schema())
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ResourceWarning)
            asyncio.run(checkpointer.read("t"))  # a loop that comes and goes
            asyncio.run(checkpointer.aclose())
            gc.collect()
        leaks = [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]
        assert not leaks
    finally:
        asyncio.run(_drop(postgres_url, checkpointer.schema))


async def _drop(url: str, schema: str) -> None:
    checkpointer = PostgresCheckpointer(url, schema=schema)
    await checkpointer.drop_schema()
    await checkpointer.aclose()


async def test_postgres_threads_sorted_under_a_locale_collation(postgres_url: str) -> None:
    database = f"tidemill_icu_{secrets.token_hex(4)}"
    admin = await psycopg.AsyncConnection.connect(postgres_url, autocommit=True)
    try:
        try:
            await admin.execute(
                f"CREATE DATABASE {database} TEMPLATE template0 "
                "LOCALE_PROVIDER icu ICU_LOCALE 'en-US' LOCALE 'C.UTF-8'"
            )
        except psycopg.Error as exc:
            pytest.skip(f"cannot create a database with an ICU collation here: {exc}")
        checkpointer = PostgresCheckpointer(make_conninfo(postgres_url, dbname=database))
        try:
            await check_threads_sorted(checkpointer)
        finally:
            await checkpointer.aclose()
            await admin.execute(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")
    finally:
        await admin.close()


# -- closed checkpointers -------------------------------------------------------------


@pytest.fixture(params=["sqlite", "postgres"])
async def closable(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Checkpointer]:
    if request.param == "sqlite":
        yield SQLiteCheckpointer(tmp_path / "journal.db")
        return
    url = request.getfixturevalue("postgres_url")
    checkpointer = PostgresCheckpointer(url, schema=unique_schema())
    try:
        yield checkpointer
    finally:
        await _drop(url, checkpointer.schema)


async def test_a_closed_checkpointer_refuses_to_work(closable: Checkpointer) -> None:
    await closable.append("t", [RunFinished(output=1)], after=0)
    await closable.aclose()
    await closable.aclose()  # closing twice is harmless
    for operation in (
        lambda: closable.append("t", [RunFinished(output=2)], after=1),
        lambda: closable.read("t"),
        closable.threads,
        lambda: closable.delete("t"),
        lambda: closable.prune(older_than=timedelta(0)),
    ):
        with pytest.raises(ConfigurationError, match="closed") as info:
            await operation()
        assert info.value.hint
