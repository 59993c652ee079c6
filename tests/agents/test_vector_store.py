"""The vector stores of `VectorMemory`: one contract, run on memory, SQLite and PostgreSQL."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from tests.conftest import POSTGRES_ENV, drop_postgres_schema, unique_schema

from tidemill.agents.checkpoint import PostgresCheckpointer, SQLiteCheckpointer
from tidemill.agents.journal import RunFinished
from tidemill.agents.memory import (
    InMemoryVectorStore,
    PostgresVectorStore,
    SQLiteVectorStore,
    StoredUnit,
    VectorStore,
    store_for,
)
from tidemill.errors import ConfigurationError, SerializationError

EAST, NORTH, NORTHEAST = (1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.7, 0.7, 0.0)


@pytest.fixture(params=["memory", "sqlite", "postgres", "postgres-arrays"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[VectorStore]:
    """Each backend in turn; PostgreSQL (with pgvector where the server has it, and with
    arrays ranked in Python) in a schema of its own, dropped afterwards."""
    made: VectorStore
    if request.param == "memory":
        made = InMemoryVectorStore()
    elif request.param == "sqlite":
        made = SQLiteVectorStore(tmp_path / "vectors.db")
    else:
        url = os.environ.get(POSTGRES_ENV)
        if not url:
            pytest.skip(f"{POSTGRES_ENV} is not set; PostgreSQL tests need a server (CI sets it)")
        arrays = request.param == "postgres-arrays"
        made = PostgresVectorStore(url, schema=unique_schema(), pgvector=False if arrays else None)
    try:
        yield made
    finally:
        await made.aclose()
        if isinstance(made, PostgresVectorStore):
            drop_postgres_schema(made.url, made.schema)


async def test_stored_units_are_known_by_their_fingerprints(store: VectorStore) -> None:
    assert await store.digests("t", "m") == {}
    await store.add("t", "m", [StoredUnit(0, 1, "a", EAST), StoredUnit(1, 3, "b", NORTH)])
    assert await store.digests("t", "m") == {0: "a", 1: "b"}
    assert await store.digests("t", "other-model") == {}
    assert await store.digests("other-thread", "m") == {}


async def test_adding_at_the_same_start_replaces(store: VectorStore) -> None:
    await store.add("t", "m", [StoredUnit(0, 1, "old", EAST)])
    await store.add("t", "m", [StoredUnit(0, 2, "new", NORTH)])
    assert await store.digests("t", "m") == {0: "new"}
    found = await store.nearest("t", "m", NORTH, before=5, k=3)
    assert [(m.start, m.end, round(m.score, 4)) for m in found] == [(0, 2, 1.0)]


async def test_nearest_ranks_by_cosine_within_before_and_k(store: VectorStore) -> None:
    await store.add(
        "t",
        "m",
        [StoredUnit(0, 1, "a", EAST), StoredUnit(1, 2, "b", NORTHEAST),
         StoredUnit(2, 3, "c", NORTH), StoredUnit(3, 5, "d", EAST)],
    )  # fmt: skip
    found = await store.nearest("t", "m", (2.0, 0.1, 0.0), before=3, k=2)
    assert [m.start for m in found] == [0, 1]  # unit 3 ends after message 3: not a candidate
    assert found[0].score == pytest.approx(0.99875, abs=1e-4)
    assert found[0] > found[1]
    assert await store.nearest("t", "m", EAST, before=0, k=5) == []
    assert len(await store.nearest("t", "m", EAST, before=10, k=10)) == 4


async def test_vectors_of_another_length_are_not_compared(store: VectorStore) -> None:
    await store.add("t", "m", [StoredUnit(0, 1, "a", (1.0, 0.0))])
    await store.add("t", "m", [StoredUnit(1, 2, "b", EAST)])
    assert [m.start for m in await store.nearest("t", "m", EAST, before=9, k=9)] == [1]


async def test_delete_forgets_one_thread(store: VectorStore) -> None:
    await store.add("t", "m", [StoredUnit(0, 1, "a", EAST)])
    await store.add("u", "m", [StoredUnit(0, 1, "a", EAST)])
    await store.delete("t")
    assert await store.digests("t", "m") == {}
    assert await store.digests("u", "m") == {0: "a"}


async def test_the_sqlite_table_sits_in_the_checkpointer_file(tmp_path: Path) -> None:
    saver = SQLiteCheckpointer(tmp_path / "agent.db")
    await saver.append("t", [RunFinished(output="x")], after=0)
    store = store_for(saver)
    await store.add("t", "m", [StoredUnit(0, 1, "a", EAST)])
    with sqlite3.connect(saver.path) as db:
        tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"tidemill_journal", "tidemill_memory_vectors"} <= tables
    await store.aclose()
    await saver.aclose()


def test_sqlite_refuses_what_is_not_a_database(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("not a database, just text that is long enough to have a header " * 20)
    with pytest.raises(SerializationError, match="Cannot open the memory vector table"):
        SQLiteVectorStore(path)
    with pytest.raises(ConfigurationError, match="needs a file"):
        SQLiteVectorStore(":memory:")


async def test_postgres_falls_back_to_arrays_without_pgvector(postgres_url: str) -> None:
    saver = PostgresCheckpointer(postgres_url, schema=unique_schema())
    store = store_for(saver)
    assert isinstance(store, PostgresVectorStore) and store.schema == saver.schema
    try:
        await saver.append("t", [RunFinished(output="x")], after=0)
        never = PostgresVectorStore(postgres_url, schema=saver.schema, pgvector=False)
        await never.add("t", "m", [StoredUnit(0, 1, "a", EAST)])
        assert never.uses_pgvector is False
        await store.add("t", "m", [StoredUnit(1, 2, "b", NORTH)])  # keeps the table's kind
        assert store.uses_pgvector is False
        assert [m.start for m in await store.nearest("t", "m", NORTH, before=9, k=1)] == [1]
        import psycopg

        with psycopg.connect(postgres_url) as db:
            tables = {
                row[0]
                for row in db.execute(
                    "SELECT table_name FROM information_schema.tables WHERE table_schema = %s",
                    (saver.schema,),
                )
            }
        assert {"tidemill_journal", "tidemill_memory_vectors"} <= tables
        await never.aclose()
    finally:
        await store.aclose()
        await saver.drop_schema()
        await saver.aclose()


async def test_postgres_ranks_with_pgvector_where_the_server_has_it(postgres_url: str) -> None:
    import psycopg

    with psycopg.connect(postgres_url) as db:
        available = db.execute(
            "SELECT 1 FROM pg_available_extensions WHERE name = 'vector'"
        ).fetchone()
    if available is None:
        pytest.skip("this PostgreSQL server has no pgvector extension to test against")
    store = PostgresVectorStore(postgres_url, schema=unique_schema())
    try:
        await store.add("t", "m", [StoredUnit(0, 1, "a", EAST), StoredUnit(1, 2, "b", NORTH)])
        assert store.uses_pgvector is True
        found = await store.nearest("t", "m", (0.1, 1.0, 0.0), before=9, k=1)
        assert [m.start for m in found] == [1] and found[0].score > 0.99
    finally:
        await store.aclose()
        drop_postgres_schema(postgres_url, store.schema)


async def test_a_closed_store_says_so(store: VectorStore) -> None:
    await store.aclose()
    if isinstance(store, InMemoryVectorStore):  # nothing to close: it keeps working
        assert await store.digests("t", "m") == {}
        return
    with pytest.raises(ConfigurationError, match="was closed"):
        await store.digests("t", "m")


def test_a_bad_schema_name_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="Schema name") as caught:
        PostgresVectorStore("postgresql://x", schema="Bad-Name")
    assert caught.value.hint
