"""`PostgresCheckpointer`: journals in PostgreSQL, shared by many machines."""

from __future__ import annotations

import asyncio
import contextlib
import re
import weakref
from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from tidemill.agents.checkpoint._base import decode_event, encode_event
from tidemill.agents.journal import JournalEvent, JournalRecord
from tidemill.errors import (
    ConfigurationError,
    JournalConflict,
    MissingDependencyError,
    SerializationError,
)

if TYPE_CHECKING:
    import psycopg

__all__ = ["PostgresCheckpointer"]

_IDENTIFIER = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


def _queries(schema: str) -> dict[str, str]:
    table = f'"{schema}".tidemill_journal'
    return {
        "setup": f"""
            CREATE SCHEMA IF NOT EXISTS "{schema}";
            CREATE TABLE IF NOT EXISTS {table} (
                thread_id      text        NOT NULL,
                seq            integer     NOT NULL,
                kind           text        NOT NULL,
                schema_version integer     NOT NULL,
                payload        json        NOT NULL,
                created_at     timestamptz NOT NULL DEFAULT now(),
                PRIMARY KEY (thread_id, seq)
            );
        """,
        # One statement, so it is atomic under autocommit. The row `after` must
        # exist (or `after` is 0 and the thread is new), and the primary key
        # rejects a second writer racing for the same seqs.
        "append": f"""
            INSERT INTO {table} (thread_id, seq, kind, schema_version, payload)
            SELECT %(thread)s, e.seq, e.kind, e.version, e.payload::json
            FROM unnest(%(seqs)s::integer[], %(kinds)s::text[], %(versions)s::integer[],
                        %(payloads)s::text[]) AS e(seq, kind, version, payload)
            WHERE (%(after)s = 0 AND NOT EXISTS (
                       SELECT 1 FROM {table} WHERE thread_id = %(thread)s))
               OR EXISTS (SELECT 1 FROM {table} WHERE thread_id = %(thread)s AND seq = %(after)s)
        """,
        "read": f"""
            SELECT seq, payload::text, created_at FROM {table}
            WHERE thread_id = %s AND seq > %s ORDER BY seq
        """,
        # Code-point order whatever the database's collation, as the other backends sort.
        "threads": (
            f'SELECT thread_id FROM {table} GROUP BY thread_id ORDER BY thread_id COLLATE "C"'
        ),
        "delete": f"DELETE FROM {table} WHERE thread_id = %s",
        "prune": f"""
            DELETE FROM {table} WHERE thread_id IN (
                SELECT thread_id FROM {table} GROUP BY thread_id
                HAVING max(created_at) < now() - %s::interval)
            RETURNING thread_id
        """,
    }


class PostgresCheckpointer:
    """Keeps journals in PostgreSQL, for many workers on many machines.

    Needs the `postgres` extra (psycopg 3). Opens one connection per event
    loop, lazily, and creates its table on first use. Every append is a
    single statement that checks the expected sequence number, so two
    processes racing on one thread cannot both win.

    Args:
        url: A libpq connection string, e.g. `postgresql://user@host:5432/db`.
        schema: The schema holding the journal table; created when missing.

    Raises:
        MissingDependencyError: When psycopg is not installed.
        ConfigurationError: When `schema` is not a plain lowercase identifier.
    """

    def __init__(self, url: str, *, schema: str = "public") -> None:
        try:
            import psycopg  # noqa: F401
        except ImportError:
            raise MissingDependencyError(
                "psycopg", extra="postgres", feature="The PostgreSQL checkpointer"
            ) from None
        if not _IDENTIFIER.match(schema):
            raise ConfigurationError(
                f"Schema name {schema!r} is not a plain identifier.",
                hint="Use lowercase letters, digits and '_', starting with a letter.",
            )
        self.url = url
        self.schema = schema
        self._sql = _queries(schema)
        self._connections: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, psycopg.AsyncConnection[Any]
        ] = weakref.WeakKeyDictionary()
        self._connecting: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
            weakref.WeakKeyDictionary()
        )
        self._ready = False
        self._closed = False

    async def append(self, thread_id: str, events: Sequence[JournalEvent], *, after: int) -> int:
        """Append `events` after entry `after`, in one statement."""
        if not events:
            return after
        import psycopg

        params = {
            "thread": thread_id,
            "after": after,
            "seqs": list(range(after + 1, after + 1 + len(events))),
            "kinds": [e.kind for e in events],
            "versions": [e.schema_version for e in events],
            "payloads": [encode_event(e).decode() for e in events],
        }
        connection = await self._connection()
        try:
            cursor = await connection.execute(self._sql["append"], params)
        except psycopg.errors.UniqueViolation:
            raise JournalConflict(thread_id, after) from None
        except psycopg.Error as exc:
            raise self._failure(exc, connection) from exc
        if cursor.rowcount != len(events):
            raise JournalConflict(thread_id, after)
        return after + len(events)

    async def read(self, thread_id: str, *, after: int = 0) -> list[JournalRecord]:
        """Return the records after `after`, in order."""
        rows = await self._fetch(self._sql["read"], (thread_id, after))
        return [
            JournalRecord(seq, decode_event(payload, thread_id=thread_id, seq=seq), created)
            for seq, payload, created in rows
        ]

    async def threads(self) -> list[str]:
        """Return every thread id, sorted."""
        return [row[0] for row in await self._fetch(self._sql["threads"], ())]

    async def delete(self, thread_id: str) -> bool:
        """Remove a thread's journal."""
        import psycopg

        connection = await self._connection()
        try:
            cursor = await connection.execute(self._sql["delete"], (thread_id,))
        except psycopg.Error as exc:
            raise self._failure(exc, connection) from exc
        return cursor.rowcount > 0

    async def prune(self, *, older_than: timedelta) -> int:
        """Remove threads whose newest record is older than `older_than`."""
        rows = await self._fetch(self._sql["prune"], (older_than,))
        return len({row[0] for row in rows})

    async def aclose(self) -> None:
        """Close the connections this checkpointer opened, on every event loop."""
        self._closed = True
        here = asyncio.get_running_loop()
        connections = list(self._connections.items())
        self._connections.clear()
        for loop, connection in connections:
            if loop is here:
                await connection.close()
            else:
                # Opened on another loop, which may be gone: close the socket directly.
                connection.pgconn.finish()

    async def drop_schema(self) -> None:
        """Drop the whole schema: for tests that made one of their own."""
        connection = await self._connection()
        await connection.execute(f'DROP SCHEMA IF EXISTS "{self.schema}" CASCADE')
        self._ready = False

    def __repr__(self) -> str:
        return f"PostgresCheckpointer(schema={self.schema!r})"

    async def _fetch(self, query: str, params: Sequence[object]) -> list[tuple[Any, ...]]:
        import psycopg

        connection = await self._connection()
        try:
            cursor = await connection.execute(query, params)
            return await cursor.fetchall()
        except psycopg.Error as exc:
            raise self._failure(exc, connection) from exc

    async def _connection(self) -> psycopg.AsyncConnection[Any]:

        if self._closed:
            raise ConfigurationError(
                "This PostgresCheckpointer was closed.", hint="Create a new one."
            )
        loop = asyncio.get_running_loop()
        connection = self._connections.get(loop)
        if connection is not None and not connection.closed:
            return connection
        # Tasks of one loop wait for a single connect instead of each opening one.
        lock = self._connecting.setdefault(loop, asyncio.Lock())
        async with lock:
            connection = self._connections.get(loop)
            if connection is not None and not connection.closed:
                return connection
            connection = await self._connect()
            self._connections[loop] = connection
        # A loop that ends (asyncio.run, a worker thread) takes its connection with it.
        weakref.finalize(loop, connection.pgconn.finish)
        return connection

    async def _connect(self) -> psycopg.AsyncConnection[Any]:
        import psycopg

        connection: psycopg.AsyncConnection[Any] | None = None
        try:
            connection = await psycopg.AsyncConnection.connect(self.url, autocommit=True)
            if not self._ready:
                await self._setup(connection)
        except psycopg.Error as exc:
            if connection is not None:
                await connection.close()
            raise SerializationError(
                f"Cannot reach the journal database: {exc}",
                hint="Check the URL, that PostgreSQL is running and accepts this user.",
            ) from exc
        return connection

    async def _setup(self, connection: psycopg.AsyncConnection[Any]) -> None:
        import psycopg

        # Another process may create the schema or table at the same moment.
        with contextlib.suppress(psycopg.errors.UniqueViolation, psycopg.errors.DuplicateObject):
            await connection.execute(self._sql["setup"])
        self._ready = True

    def _failure(self, exc: Exception, connection: psycopg.AsyncConnection[Any]) -> Exception:
        hint = (
            "The connection was lost and nothing was written; retry once the database is reachable."
            if connection.closed
            else "PostgreSQL refused the statement and nothing was written."
        )
        return SerializationError(
            f"The journal database failed: {exc}",
            hint=hint,
            context={"schema": self.schema, "connection_closed": bool(connection.closed)},
        )
