"""`PostgresVectorStore`: a vector memory's table in the journals' PostgreSQL schema.

Where the server has the pgvector extension (`CREATE EXTENSION vector`
succeeds, or it is already installed), vectors are stored as `vector` and
PostgreSQL ranks them (`<=>`, cosine distance), so only the `k` best rows
come back. Where it does not (the extension is not installed on the
server, or the user may not create it), vectors are stored as `real[]` and
ranked in Python after reading the thread's rows: the same answers, one
scan of one thread's rows per run. The choice is made once, when the table
is created, and kept: `uses_pgvector` says which it is.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import weakref
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Any

from tidemill.agents.memory._vector_store import Match, StoredUnit, top_k
from tidemill.errors import ConfigurationError, MissingDependencyError, SerializationError
from tidemill.llm.embeddings import Vector

if TYPE_CHECKING:
    import psycopg

__all__ = ["PostgresVectorStore"]

_IDENTIFIER = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


def _literal(vector: Sequence[float]) -> str:
    """The text form pgvector reads a vector in: `[1.0,2.0]`."""
    return "[" + ",".join(repr(float(x)) for x in vector) + "]"


class PostgresVectorStore:
    """Keeps a vector memory's vectors in PostgreSQL, beside the journals.

    Give it the `url` and `schema` of the `PostgresCheckpointer` (`store_for`
    does): the table `tidemill_memory_vectors` is created in that schema on
    first use. Needs the `postgres` extra (psycopg 3). One connection per
    event loop, opened lazily.

    Args:
        url: A libpq connection string.
        schema: The schema of the table; created when missing.
        pgvector: `None` (the default) uses pgvector when it can be had;
            `False` never asks for it.

    Raises:
        MissingDependencyError: When psycopg is not installed.
        ConfigurationError: When `schema` is not a plain lowercase identifier.
    """

    def __init__(self, url: str, *, schema: str = "public", pgvector: bool | None = None) -> None:
        try:
            import psycopg  # noqa: F401
        except ImportError:
            raise MissingDependencyError(
                "psycopg", extra="postgres", feature="The PostgreSQL vector memory store"
            ) from None
        if not _IDENTIFIER.match(schema):
            raise ConfigurationError(
                f"Schema name {schema!r} is not a plain identifier.",
                hint="Use lowercase letters, digits and '_', starting with a letter.",
            )
        self.url = url
        self.schema = schema
        self.pgvector = pgvector
        self.uses_pgvector: bool | None = None
        """Whether vectors are ranked by pgvector; None until the table is set up."""
        self._table = f'"{schema}".tidemill_memory_vectors'
        self._loops: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, psycopg.AsyncConnection[Any]
        ] = weakref.WeakKeyDictionary()
        self._closed = False

    async def digests(self, thread_id: str, model: str) -> dict[int, str]:
        """The stored fingerprints, by `start`."""
        rows = await self._fetch(
            f"SELECT start, digest FROM {self._table} WHERE thread_id = %s AND model = %s",
            (thread_id, model),
        )
        return {start: digest for start, digest in rows}

    async def add(self, thread_id: str, model: str, units: Sequence[StoredUnit]) -> None:
        """Store `units` in one statement, replacing those at the same `start`."""
        if not units:
            return
        cast = "::vector" if await self._pgvector() else "::real[]"
        values = ", ".join([f"(%s, %s, %s, %s, %s, %s{cast})"] * len(units))
        params: list[object] = []
        for unit in units:
            vector = _literal(unit.vector) if self.uses_pgvector else list(unit.vector)
            params += (thread_id, model, unit.start, unit.end, unit.digest, vector)
        await self._fetch(
            f"INSERT INTO {self._table} (thread_id, model, start, stop, digest, embedding) "
            f"VALUES {values} ON CONFLICT (thread_id, model, start) DO UPDATE SET "
            "stop = excluded.stop, digest = excluded.digest, embedding = excluded.embedding",
            params,
            rows=False,
        )

    async def nearest(
        self, thread_id: str, model: str, query: Vector, *, before: int, k: int
    ) -> list[Match]:
        """The `k` most similar units that end by `before`: ranked by pgvector, or in Python."""
        if await self._pgvector():
            rows = await self._fetch(
                f"SELECT start, stop, 1 - (embedding <=> %s::vector) FROM {self._table} "
                "WHERE thread_id = %s AND model = %s AND stop <= %s "
                "AND vector_dims(embedding) = %s "
                "ORDER BY embedding <=> %s::vector, start LIMIT %s",
                (_literal(query), thread_id, model, before, len(query), _literal(query), k),
            )
            return [Match(float(score), start, stop) for start, stop, score in rows]
        rows = await self._fetch(
            f"SELECT start, stop, embedding FROM {self._table} "
            "WHERE thread_id = %s AND model = %s AND stop <= %s",
            (thread_id, model, before),
        )
        return top_k(query, ((start, stop, vector) for start, stop, vector in rows), k)

    async def delete(self, thread_id: str) -> None:
        """Forget the thread's vectors."""
        await self._fetch(
            f"DELETE FROM {self._table} WHERE thread_id = %s", (thread_id,), rows=False
        )

    async def aclose(self) -> None:
        """Close the connections this store opened, on every event loop."""
        self._closed = True
        here = asyncio.get_running_loop()
        loops = list(self._loops.items())
        self._loops.clear()
        for loop, connection in loops:
            if loop is here:
                await connection.close()
            else:  # opened on another loop, which may be gone: close the socket directly
                connection.pgconn.finish()

    def __repr__(self) -> str:
        return f"PostgresVectorStore(schema={self.schema!r})"

    # -- mechanics -------------------------------------------------------------------

    async def _pgvector(self) -> bool:
        if self.uses_pgvector is None:
            async with self._connection():
                pass  # connecting sets the table up, and with it `uses_pgvector`
        return bool(self.uses_pgvector)

    async def _fetch(
        self, query: str, params: Sequence[object], *, rows: bool = True
    ) -> list[tuple[Any, ...]]:
        import psycopg

        async with self._connection() as connection:
            try:
                cursor = await connection.execute(query, params)
                return await cursor.fetchall() if rows else []
            except psycopg.Error as exc:
                raise SerializationError(
                    f"The memory vector table failed: {exc}",
                    hint="PostgreSQL refused the statement; nothing was written.",
                    context={"schema": self.schema},
                ) from exc

    @contextlib.asynccontextmanager
    async def _connection(self) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        if self._closed:
            raise ConfigurationError(
                "This PostgresVectorStore was closed.", hint="Create a new one."
            )
        loop = asyncio.get_running_loop()
        connection = self._loops.get(loop)
        if connection is None or connection.closed:
            fresh = await self._connect()
            connection = self._loops.get(loop)
            if connection is None or connection.closed:  # no other task connected meanwhile
                connection = self._loops[loop] = fresh
                weakref.finalize(loop, fresh.pgconn.finish)
            else:
                await fresh.close()
        yield connection

    async def _connect(self) -> psycopg.AsyncConnection[Any]:
        import psycopg

        try:
            connection = await psycopg.AsyncConnection.connect(self.url, autocommit=True)
        except psycopg.Error as exc:
            raise SerializationError(
                f"Cannot reach the memory vector database: {exc}",
                hint="Check the URL, that PostgreSQL is running and accepts this user.",
            ) from exc
        if self.uses_pgvector is None:
            try:
                await self._setup(connection)
            except psycopg.Error as exc:
                await connection.close()
                raise SerializationError(
                    f"Cannot create the memory vector table: {exc}",
                    hint="Check that the user may create tables in the schema.",
                    context={"schema": self.schema},
                ) from exc
        return connection

    async def _setup(self, connection: psycopg.AsyncConnection[Any]) -> None:
        """Create the schema and table, with a `vector` column if pgvector can be had."""
        import psycopg

        with contextlib.suppress(psycopg.errors.UniqueViolation, psycopg.errors.DuplicateObject):
            await connection.execute(f'CREATE SCHEMA IF NOT EXISTS "{self.schema}"')
        found = await (
            await connection.execute(
                "SELECT udt_name FROM information_schema.columns "
                "WHERE table_schema = %s AND table_name = 'tidemill_memory_vectors' "
                "AND column_name = 'embedding'",
                (self.schema,),
            )
        ).fetchone()
        if found is not None:  # made earlier, perhaps by another process: keep its kind
            self.uses_pgvector = found[0] == "vector"
            return
        use = self.pgvector is not False and await _has_pgvector(connection)
        column = "vector" if use else "real[]"
        with contextlib.suppress(psycopg.errors.UniqueViolation, psycopg.errors.DuplicateTable):
            await connection.execute(
                f"CREATE TABLE IF NOT EXISTS {self._table} ("
                "thread_id text NOT NULL, model text NOT NULL, start integer NOT NULL, "
                f"stop integer NOT NULL, digest text NOT NULL, embedding {column} NOT NULL, "
                "PRIMARY KEY (thread_id, model, start))"
            )
        self.uses_pgvector = use


async def _has_pgvector(connection: psycopg.AsyncConnection[Any]) -> bool:
    """Whether the `vector` type can be used: installed, or installable by this user."""
    import psycopg

    available = await (
        await connection.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'")
    ).fetchone()
    if available is None:
        return False
    try:
        await connection.execute("CREATE EXTENSION IF NOT EXISTS vector")
    except psycopg.Error:
        return False  # not allowed to create it here: fall back to arrays
    return True
