"""`PostgresCheckpointer`: journals in PostgreSQL, shared by many machines."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
import re
import weakref
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from tidemill.agents.checkpoint._base import decode_event, encode_event
from tidemill.agents.checkpoint._compact import checked_max_history, compaction_point, fold_snapshot
from tidemill.agents.checkpoint._postgres_sql import VALUES_ROWS, queries, values_append
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

_log = logging.getLogger("tidemill.agents.checkpoint")

_IDENTIFIER = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
_BATCH = 500
"""The most threads one batched read or append carries."""


@dataclass(frozen=True, slots=True)
class _Rows:
    """The rows one append adds to its thread."""

    after: int
    kinds: list[str]
    versions: list[int]
    payloads: list[str]


_Batch = dict[str, tuple[Any, "asyncio.Future[Any]"]]
"""Reads (their `after`) or appends (their `_Rows`) by thread, and who waits for each."""


@dataclass
class _Connections:
    """The connections of one event loop: those free to use, and a bound on those in use.

    Also the reads and appends waiting to go out together (`pending`, by
    kind), and the tasks sending them.
    """

    slots: asyncio.Semaphore
    setting_up: asyncio.Lock = field(default_factory=asyncio.Lock)
    idle: list[psycopg.AsyncConnection[Any]] = field(default_factory=list)
    opened: list[psycopg.AsyncConnection[Any]] = field(default_factory=list)
    pending: dict[str, _Batch] = field(default_factory=dict)
    sending: set[asyncio.Task[None]] = field(default_factory=set)

    def forget(self, connection: psycopg.AsyncConnection[Any]) -> None:
        """Drop a connection that closed (the server went away, say)."""
        if connection in self.opened:
            self.opened.remove(connection)


class PostgresCheckpointer:
    """Keeps journals in PostgreSQL, for many workers on many machines.

    Needs the `postgres` extra (psycopg 3). Opens connections per event
    loop, lazily, up to `max_connections` of them as concurrent statements
    need them, and creates its table on first use. Every append is a single
    statement that checks the expected sequence number, so two processes
    racing on one thread cannot both win.

    Reads and appends of different threads made at the same time (the
    agents of a busy worker) go out together: one statement reads (or
    appends to) many threads, each thread's append still all or nothing
    under its own check. Each statement is a round trip; two hundred agents
    starting at once then wait for two, not for four hundred in turn.

    Args:
        url: A libpq connection string, e.g. `postgresql://user@host:5432/db`.
        schema: The schema holding the journal table; created when missing.
        max_connections: The most connections open at once on one event loop.
        max_history: The most records a thread keeps. After an append that
            passes it, the thread's older records are folded into one
            `ThreadSnapshot` record, in a transaction of its own that locks
            them (see `tidemill.agents.checkpoint`); the append itself stays
            one statement. If that transaction fails, the append stands and
            the next one compacts. None (the default) keeps every record.
            The table is the same either way.

    Raises:
        MissingDependencyError: When psycopg is not installed.
        ConfigurationError: When `schema` is not a plain lowercase identifier,
            or `max_connections` is below 1.
        InvalidOption: When `max_history` is below `MIN_HISTORY` (4).
    """

    def __init__(
        self,
        url: str,
        *,
        schema: str = "public",
        max_connections: int = 4,
        max_history: int | None = None,
    ) -> None:
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
        if max_connections < 1:
            raise ConfigurationError(f"max_connections must be at least 1, not {max_connections}.")
        self.url = url
        self.schema = schema
        self.max_connections = max_connections
        self.max_history = checked_max_history(max_history)
        """The most records a thread keeps, or None for all of them."""
        self._first: dict[str, int] = {}
        """The first seq of threads this process compacted; 1 (never compacted) when absent."""
        self._sql = queries(schema)
        self._loops: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Connections] = (
            weakref.WeakKeyDictionary()
        )
        self._ready = False
        self._closed = False

    async def append(self, thread_id: str, events: Sequence[JournalEvent], *, after: int) -> int:
        """Append `events` after entry `after`, in one statement."""
        if not events:
            return after
        rows = _Rows(
            after,
            [e.kind for e in events],
            [e.schema_version for e in events],
            [encode_event(e).decode() for e in events],
        )
        inserted: int = await self._batched("append", thread_id, rows)
        if inserted != len(events):
            raise JournalConflict(thread_id, after)
        last = after + len(events)
        if compaction_point(self._first.get(thread_id, 1), last, self.max_history) is not None:
            try:
                await self._compact(thread_id, last)
            except SerializationError as exc:
                # The append is stored; the next append that passes the bound compacts.
                _log.warning("Could not compact thread %r: %s", thread_id, exc)
        return last

    async def _compact(self, thread_id: str, last: int) -> None:
        """Fold the thread's oldest records into a snapshot, in one transaction."""
        import psycopg

        async with self._connection() as connection:
            try:
                async with connection.transaction():
                    cursor = await connection.execute(self._sql["first"], (thread_id,))
                    row = await cursor.fetchone()
                    first = row[0] if row is not None and row[0] is not None else None
                    if first is None:  # deleted meanwhile
                        self._first.pop(thread_id, None)
                        return
                    point = compaction_point(first, last, self.max_history)
                    if point is None:
                        self._first[thread_id] = first
                        return
                    cursor = await connection.execute(self._sql["prefix"], (thread_id, point))
                    prefix = sorted(await cursor.fetchall())
                    if not prefix or prefix[-1][0] != point:
                        return  # another compaction went past `point` meanwhile
                    snapshot = fold_snapshot(
                        thread_id,
                        (
                            (seq, decode_event(payload, thread_id=thread_id, seq=seq))
                            for seq, payload in prefix
                        ),
                    )
                    await connection.execute(self._sql["drop_prefix"], (thread_id, point))
                    await connection.execute(
                        self._sql["to_snapshot"],
                        (
                            snapshot.kind,
                            snapshot.schema_version,
                            encode_event(snapshot).decode(),
                            thread_id,
                            point,
                        ),
                    )
            except psycopg.Error as exc:
                raise self._failure(exc, connection) from exc
        self._first[thread_id] = point

    async def read(self, thread_id: str, *, after: int = 0) -> list[JournalRecord]:
        """Return the records after `after`, in order."""
        rows: list[tuple[Any, ...]] = await self._batched("read", thread_id, after)
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

        self._first.pop(thread_id, None)
        async with self._connection() as connection:
            try:
                cursor = await connection.execute(self._sql["delete"], (thread_id,))
            except psycopg.Error as exc:
                raise self._failure(exc, connection) from exc
        return cursor.rowcount > 0

    async def prune(self, *, older_than: timedelta) -> int:
        """Remove threads whose newest record is older than `older_than`."""
        rows = await self._fetch(self._sql["prune"], (older_than,))
        self._first.clear()
        return len({row[0] for row in rows})

    async def aclose(self) -> None:
        """Close the connections this checkpointer opened, on every event loop."""
        self._closed = True
        here = asyncio.get_running_loop()
        loops = list(self._loops.items())
        self._loops.clear()
        for loop, connections in loops:
            for connection in connections.opened:
                if loop is here:
                    await connection.close()
                else:
                    # Opened on another loop, which may be gone: close the socket directly.
                    connection.pgconn.finish()

    async def drop_schema(self) -> None:
        """Drop the whole schema: for tests that made one of their own."""
        async with self._connection() as connection:
            await connection.execute(f'DROP SCHEMA IF EXISTS "{self.schema}" CASCADE')
        self._ready = False

    def __repr__(self) -> str:
        return f"PostgresCheckpointer(schema={self.schema!r})"

    # -- batches ---------------------------------------------------------------------

    async def _batched(self, kind: str, thread_id: str, item: Any) -> Any:
        """Send a read or append of `thread_id` with the others of its kind made meanwhile.

        The first opens a batch and starts the task that sends it; the
        batch takes whoever comes before that task gets a connection (a
        second request for a thread already in it opens the next one). A
        caller that finds a free connection and no batch forming has nobody
        to wait for: it sends its own statement at once, on its own task.
        """
        self._check_open()
        loop = asyncio.get_running_loop()
        connections = self._state(loop)
        batch = connections.pending.get(kind)
        if batch is None and connections.idle and not connections.slots.locked():
            alone: asyncio.Future[Any] = loop.create_future()
            await self._send(kind, {thread_id: (item, alone)}, connections)
            return alone.result()
        if batch is None or thread_id in batch or len(batch) >= _BATCH:
            batch = connections.pending[kind] = {}
            task = loop.create_task(self._send(kind, batch, connections))
            connections.sending.add(task)
            task.add_done_callback(connections.sending.discard)
        future: asyncio.Future[Any] = loop.create_future()
        batch[thread_id] = (item, future)
        return await future

    async def _send(self, kind: str, batch: _Batch, connections: _Connections) -> None:
        """Send one batch and hand each waiting caller its own outcome."""
        outcomes: dict[str, Any] = {}
        try:
            async with self._connection() as connection:
                if connections.pending.get(kind) is batch:
                    del connections.pending[kind]  # closed: later callers open the next one
                if kind == "append":
                    outcomes = await self._append_many(connection, batch)
                else:
                    outcomes = await self._read_many(connection, batch)
        except BaseException as exc:
            outcomes = {thread: exc for thread in batch}
            if not isinstance(exc, Exception):
                raise  # cancelled: the callers are told below
        finally:
            if connections.pending.get(kind) is batch:
                del connections.pending[kind]
            for thread, (_, future) in batch.items():
                outcome = outcomes.get(thread)
                if future.done():
                    continue
                if isinstance(outcome, asyncio.CancelledError) or thread not in outcomes:
                    future.cancel()
                elif isinstance(outcome, BaseException):
                    future.set_exception(copy.copy(outcome))  # one traceback per caller
                else:
                    future.set_result(outcome)

    async def _append_many(
        self, connection: psycopg.AsyncConnection[Any], batch: _Batch
    ) -> dict[str, Any]:
        """Each thread's inserted row count (0: its check failed), or the error it gets."""
        import psycopg

        if len(batch) > 1:
            params: dict[str, list[Any]] = {
                "threads": [], "afters": [], "seqs": [], "kinds": [], "versions": [],
                "payloads": [],
            }  # fmt: skip
            for thread, (rows, _) in batch.items():
                count = len(rows.kinds)
                params["threads"] += [thread] * count
                params["afters"] += [rows.after] * count
                params["seqs"] += range(rows.after + 1, rows.after + 1 + count)
                params["kinds"] += rows.kinds
                params["versions"] += rows.versions
                params["payloads"] += rows.payloads
            try:
                cursor = await connection.execute(self._sql["append_many"], params)
                inserted = Counter(row[0] for row in await cursor.fetchall())
            except (psycopg.errors.UniqueViolation, psycopg.errors.DeadlockDetected):
                pass  # a thread lost a race, and nothing was written: each alone, to tell which
            except psycopg.Error as exc:
                return {thread: self._failure(exc, connection) for thread in batch}
            else:
                return {thread: inserted[thread] for thread in batch}
        return {
            thread: await self._append_one(connection, thread, rows)
            for thread, (rows, _) in batch.items()
        }

    async def _append_one(
        self, connection: psycopg.AsyncConnection[Any], thread: str, rows: _Rows
    ) -> int | Exception:
        import psycopg

        after, count = rows.after, len(rows.kinds)
        query: str
        params: Sequence[object] | dict[str, object]
        if count <= VALUES_ROWS:
            query = values_append(self.schema, count)
            params = [thread]
            for seq, kind, version, payload in zip(
                range(after + 1, after + 1 + count),
                rows.kinds,
                rows.versions,
                rows.payloads,
                strict=True,
            ):
                params += (seq, kind, version, payload)
            params += (after, thread, thread, after)
        else:
            query = self._sql["append"]
            params = {
                "thread": thread,
                "after": after,
                "seqs": list(range(after + 1, after + 1 + count)),
                "kinds": rows.kinds,
                "versions": rows.versions,
                "payloads": rows.payloads,
            }
        try:
            cursor = await connection.execute(query, params)
        except psycopg.errors.UniqueViolation:
            return 0
        except psycopg.Error as exc:
            return self._failure(exc, connection)
        return cursor.rowcount

    async def _read_many(
        self, connection: psycopg.AsyncConnection[Any], batch: _Batch
    ) -> dict[str, Any]:
        """Each thread's rows `(seq, payload, created_at)` in order, or the error it gets."""
        import psycopg

        try:
            if len(batch) == 1:
                ((thread, (after, _)),) = batch.items()
                cursor = await connection.execute(self._sql["read"], (thread, after))
                return {thread: await cursor.fetchall()}
            params = {"threads": list(batch), "afters": [after for after, _ in batch.values()]}
            cursor = await connection.execute(self._sql["read_many"], params)
            found: dict[str, list[tuple[Any, ...]]] = {thread: [] for thread in batch}
            for thread, *row in await cursor.fetchall():
                found[thread].append(tuple(row))
        except psycopg.Error as exc:
            return {thread: self._failure(exc, connection) for thread in batch}
        return dict(found)

    # -- connections -----------------------------------------------------------------

    async def _fetch(self, query: str, params: Sequence[object]) -> list[tuple[Any, ...]]:
        import psycopg

        async with self._connection() as connection:
            try:
                cursor = await connection.execute(query, params)
                return await cursor.fetchall()
            except psycopg.Error as exc:
                raise self._failure(exc, connection) from exc

    def _check_open(self) -> None:
        if self._closed:
            raise ConfigurationError(
                "This PostgresCheckpointer was closed.", hint="Create a new one."
            )

    def _state(self, loop: asyncio.AbstractEventLoop) -> _Connections:
        """The connections (and batches) of `loop`."""
        connections = self._loops.get(loop)
        if connections is None:
            connections = self._loops[loop] = _Connections(asyncio.Semaphore(self.max_connections))
        return connections

    @contextlib.asynccontextmanager
    async def _connection(self) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        """A connection of this event loop for one statement: a free one, or a new one."""
        self._check_open()
        loop = asyncio.get_running_loop()
        connections = self._state(loop)
        async with connections.slots:
            while connections.idle and connections.idle[-1].closed:  # lost while idle
                connections.forget(connections.idle.pop())
            if connections.idle:
                connection = connections.idle.pop()
            else:
                connection = await self._open(loop, connections)
            try:
                yield connection
            finally:
                if connection.closed:
                    connections.forget(connection)
                elif self._loops.get(loop) is connections:  # not closed meanwhile
                    connections.idle.append(connection)

    async def _open(
        self, loop: asyncio.AbstractEventLoop, connections: _Connections
    ) -> psycopg.AsyncConnection[Any]:
        """Connect (the first connection creates the table, once)."""
        if self._ready:
            connection = await self._connect()
        else:
            async with connections.setting_up:  # its tasks wait for one setup, not each do it
                connection = await self._connect()
        connections.opened.append(connection)
        # A loop that ends (asyncio.run, a worker thread) takes its connections with it.
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
