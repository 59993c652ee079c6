"""`Store`: connections and transactions, the one place that knows SQLite from PostgreSQL.

Every store operation is a plain function over a `Tx` that runs in a worker
thread, inside one database transaction. `Store.transact` retries it when
the database says to (a deadlock, a lost connection, a busy SQLite file), so
callers write each transaction once, as if nothing could go wrong.

One exception, for the hot path of PostgreSQL workers: `Store.write_one` runs
a single statement as a transaction of its own on the event loop itself, with
no thread hop (which costs more CPU than the statement's own driver work).
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from tidemill.errors import MissingDependencyError, StoreError, TidemillError
from tidemill.store._tx import Tx
from tidemill.store._url import StoreURL

__all__ = ["Store"]

T = TypeVar("T")

_NOTIFY_CHANNEL = "tidemill_jobs"

BUSY_TIMEOUT = 30.0
"""Seconds a SQLite statement waits for another connection's write lock before it fails."""

RECONNECT_FOR = 60.0
"""Seconds a transaction is retried while the database is unreachable or locked."""


class Store:
    """A pool of connections to one store, and transactions over them.

    Args:
        url: Where the store lives.
        max_connections: PostgreSQL connections (one per thread); SQLite
            always uses one, as SQLite has one writer.
        reconnect_for: How long to keep retrying a transaction while the
            database is unreachable (restarting, say) or, for SQLite, locked
            by another connection, before giving up with `StoreError`
            (default `RECONNECT_FOR`).
        busy_timeout: How long one SQLite statement waits for another
            connection's write lock (default `BUSY_TIMEOUT`).
    """

    def __init__(
        self,
        url: StoreURL,
        *,
        max_connections: int = 4,
        reconnect_for: float | None = None,
        busy_timeout: float | None = None,
    ):
        if url.dialect == "postgres":
            _require_psycopg()
        self.url = url
        self.dialect = url.dialect
        self.reconnect_for = RECONNECT_FOR if reconnect_for is None else reconnect_for
        self.busy_timeout = BUSY_TIMEOUT if busy_timeout is None else busy_timeout
        threads = 1 if url.dialect == "sqlite" else max(1, max_connections)
        self._executor = ThreadPoolExecutor(threads, thread_name_prefix="tidemill-store")
        self._max_async = threads
        self._async_loop: asyncio.AbstractEventLoop | None = None
        self._async_slots: asyncio.Semaphore | None = None
        self._async_idle: list[Any] = []
        self._local = threading.local()
        self._connections: list[Any] = []
        self._lock = threading.Lock()
        self._closed = False

    async def transact(self, fn: Callable[[Tx], T]) -> T:
        """Run `fn` in one transaction on a store thread; retry it on transient errors."""
        if self._closed:
            raise StoreError("The store is closed.", hint="Open a new Engine or Store.")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self._transact_blocking, fn)

    async def write_one(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run one PostgreSQL statement as a transaction of its own; return its rows.

        The statement runs on the calling event loop, over a small pool of
        asynchronous connections: no store thread, no `BEGIN`/`COMMIT`, one
        round trip. Transient errors are retried as `transact` retries them
        (a statement that failed changed nothing). From a second event loop
        it runs through `transact` instead, as the pool belongs to the first.
        """
        if self._closed:
            raise StoreError("The store is closed.", hint="Open a new Engine or Store.")
        if self.dialect != "postgres":
            raise StoreError("write_one needs a PostgreSQL store.")
        loop = asyncio.get_running_loop()
        if self._async_loop is None:
            self._async_loop, self._async_slots = loop, asyncio.Semaphore(self._max_async)
        if self._async_loop is not loop or self._async_slots is None:
            return await self.transact(lambda tx: tx.all(sql, params))
        started = time.monotonic()
        deadline = started + self.reconnect_for
        delay = 0.05
        async with self._async_slots:
            while True:
                connection = None
                try:
                    connection = (
                        self._async_idle.pop() if self._async_idle else await self._connect_async()
                    )
                    cursor = await connection.execute(sql, params)
                    return [tuple(row) for row in await cursor.fetchall()]
                except Exception as exc:
                    if self._transient(exc) is None:
                        raise self._refused(exc) from exc
                    if time.monotonic() > deadline:
                        raise self._unavailable(exc, time.monotonic() - started) from exc
                finally:
                    if connection is not None:
                        await self._give_back(connection)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 1.0)

    async def _connect_async(self) -> Any:
        import psycopg

        connection = await psycopg.AsyncConnection.connect(
            self.url.dsn, autocommit=True, connect_timeout=10
        )
        try:
            await connection.execute(f'SET search_path TO "{self.url.schema}"')
        except BaseException:
            await connection.close()
            raise
        return connection

    async def _give_back(self, connection: Any) -> None:
        """Keep an idle, healthy connection for the next statement; close any other."""
        from psycopg.pq import TransactionStatus

        healthy = not connection.closed and connection.info.transaction_status == (
            TransactionStatus.IDLE
        )
        if healthy and not self._closed:
            self._async_idle.append(connection)
            return
        with contextlib.suppress(Exception):
            await connection.close()

    def _transact_blocking(self, fn: Callable[[Tx], T]) -> T:
        started = time.monotonic()
        deadline = started + self.reconnect_for
        delay = 0.05
        while True:
            try:
                connection = self._connection()
                if self.dialect == "sqlite":
                    return _run_sqlite(connection, fn)
                return _run_postgres(connection, fn, self.url.schema)
            except Exception as exc:
                transient = self._transient(exc)
                if transient is None:
                    raise self._refused(exc) from exc
                if transient == "reconnect":
                    self._drop_connection()
                if time.monotonic() > deadline:
                    raise self._unavailable(exc, time.monotonic() - started) from exc
                time.sleep(delay)
                delay = min(delay * 2, 1.0)

    def _unavailable(self, exc: Exception, waited: float) -> StoreError:
        """The `StoreError` for a transaction retried until `reconnect_for` ran out."""
        if isinstance(exc, sqlite3.OperationalError):
            return StoreError(
                f"The SQLite store {self.url.path} is locked: another connection held its "
                f"write lock for all of {waited:.1f}s that this transaction waited ({exc}).",
                hint="Another process has a transaction open on the file (a `sqlite3` shell, "
                "a backup, a long script). Nothing of this transaction was written; end "
                "that transaction and try again. Workers wait it out and take their jobs up "
                "again once it ends.",
                context={"error": "locked", "path": str(self.url.path), "waited": round(waited, 1)},
            )
        return StoreError(
            f"The store at {self.url} is unavailable: {exc}",
            hint="Check that the database is running and reachable.",
            context={"error": "unavailable", "waited": round(waited, 1)},
        )

    def _refused(self, exc: Exception) -> Exception:
        """The database's own refusal (a full disk, a constraint) as a `StoreError`; else `exc`.

        The transaction was rolled back whole; what raised inside it (a
        `TidemillError`, a bug) is passed on as it is.
        """
        if isinstance(exc, TidemillError) or not _driver_error(exc):
            return exc
        return StoreError(
            f"The store at {self.url} refused the transaction: {exc}".strip(),
            hint="Nothing of it was written. Check the database's disk space and its log; "
            "a worker's job whose outcome was refused is taken again when its lease runs out.",
            context={"error": type(exc).__name__},
        )

    def _transient(self, exc: Exception) -> str | None:
        """`"retry"`, `"reconnect"`, or None when `exc` is not the database's passing trouble."""
        if isinstance(exc, sqlite3.OperationalError):
            return "retry" if _busy(exc) else None
        if self.dialect != "postgres" or isinstance(exc, TidemillError):
            return None
        try:
            import psycopg
            from psycopg import errors
        except ImportError:  # then `exc` cannot be the driver's
            return None

        if isinstance(exc, errors.DeadlockDetected | errors.SerializationFailure):
            return "retry"
        if str(getattr(exc, "sqlstate", None) or "").startswith("53"):
            return None  # out of disk, memory or connections: a refusal, not a lost connection
        if isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError):
            return "reconnect"
        return None

    def _connection(self) -> Any:
        connection = getattr(self._local, "connection", None)
        if connection is None:
            connection = self._connect()
            self._local.connection = connection
            with self._lock:
                self._connections.append(connection)
        return connection

    def _connect(self) -> Any:
        if self.dialect == "sqlite":
            assert self.url.path is not None
            lite = _open_sqlite(self.url.path)
            lite.execute(f"PRAGMA busy_timeout = {max(0, round(self.busy_timeout * 1000))}")
            return lite
        psycopg = _require_psycopg()
        connection = psycopg.connect(self.url.dsn, autocommit=True, connect_timeout=10)
        schema = self.url.schema
        if schema != "public":
            connection.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
        connection.execute(f'SET search_path TO "{schema}"')
        return connection

    def _drop_connection(self) -> None:
        connection = getattr(self._local, "connection", None)
        self._local.connection = None
        if connection is None:
            return
        with self._lock:
            if connection in self._connections:
                self._connections.remove(connection)
        with contextlib.suppress(Exception):
            connection.close()

    async def close(self) -> None:
        """Close every connection and the store threads."""
        if self._closed:
            return
        self._closed = True
        loop = asyncio.get_running_loop()
        idle, self._async_idle = self._async_idle, []
        for connection in idle:
            with contextlib.suppress(Exception):
                if loop is self._async_loop:
                    await connection.close()
                else:  # its loop is gone or elsewhere: close the socket alone
                    connection.pgconn.finish()
        await loop.run_in_executor(None, self._close_blocking)

    def _close_blocking(self) -> None:
        self._executor.shutdown(wait=True)
        with self._lock:
            connections, self._connections = self._connections, []
        for connection in connections:
            with contextlib.suppress(Exception):
                connection.close()

    def listen_dsn(self) -> str | None:
        """The connection string for `LISTEN`, or None for SQLite."""
        return self.url.dsn if self.dialect == "postgres" else None

    @property
    def channel(self) -> str:
        """The `NOTIFY` channel that wakes workers when jobs are queued."""
        return f"{_NOTIFY_CHANNEL}_{self.url.schema}"


def _require_psycopg() -> Any:
    """The `psycopg` module; `MissingDependencyError` when the `postgres` extra is missing."""
    try:
        import psycopg
    except ImportError as exc:
        raise MissingDependencyError(
            "psycopg", extra="postgres", feature="A PostgreSQL store"
        ) from exc
    return psycopg


def _driver_error(exc: Exception) -> bool:
    """Whether `exc` is the database's refusal (a full disk, a constraint), not a bug.

    A statement the driver or the database could not make sense of (its
    `ProgrammingError`) is Tidemill's own mistake, and stays as it is.
    """
    if isinstance(exc, sqlite3.Error):
        return not isinstance(exc, sqlite3.ProgrammingError | sqlite3.InterfaceError)
    if type(exc).__module__.partition(".")[0] != "psycopg":
        return False
    import psycopg

    return not isinstance(exc, psycopg.ProgrammingError | psycopg.InterfaceError)


def _busy(exc: sqlite3.Error) -> bool:
    """Whether SQLite refused for now only: another connection holds the file."""
    text = str(exc)
    return "locked" in text or "busy" in text


def _open_sqlite(path: Path) -> sqlite3.Connection:
    """A connection to the SQLite file at `path`, created (with its directory) when missing.

    Raises:
        StoreError: `path` is a directory, is not a SQLite database (it is
            left as it is), or cannot be created or opened.
    """
    if path.is_dir():
        raise StoreError(
            f"The SQLite store {path} is a directory, not a database file.",
            hint=f"Name a file, e.g. sqlite:///{path / 'tidemill.db'}.",
            context={"path": str(path)},
        )
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError(
            f"Cannot create the directory {path.parent} of the SQLite store {path}: "
            f"{exc.strerror or exc}.",
            hint="Choose a path whose parent directories exist or can be created.",
            context={"path": str(path)},
        ) from exc
    lite = None
    try:
        lite = sqlite3.connect(
            path, isolation_level=None, timeout=BUSY_TIMEOUT, check_same_thread=False
        )
        lite.execute("PRAGMA journal_mode=WAL")
        lite.execute("PRAGMA synchronous=NORMAL")
        lite.execute("PRAGMA foreign_keys=ON")
    except sqlite3.DatabaseError as exc:
        if lite is not None:
            lite.close()
        if _busy(exc):
            raise  # the caller retries
        if "not a database" in str(exc):
            raise StoreError(
                f"{path} is not a SQLite database; it was left as it is.",
                hint="Name a Tidemill store (a SQLite file), or a path where no file is yet.",
                context={"path": str(path)},
            ) from exc
        raise StoreError(
            f"Cannot open the SQLite store {path}: {exc}.",
            hint="Check that the file and its directory may be read and written "
            "(a read-only or special file system, such as /proc, cannot hold a store).",
            context={"path": str(path)},
        ) from exc
    return lite


def _run_sqlite(connection: sqlite3.Connection, fn: Callable[[Tx], T]) -> T:
    connection.execute("BEGIN IMMEDIATE")
    try:
        result = fn(Tx(connection.cursor(), "sqlite", None))
        connection.execute("COMMIT")
    except BaseException:
        # SQLite rolls some failures back itself (a full disk): then there is nothing to
        # roll back, and the failure to say is the first one.
        if connection.in_transaction:
            connection.execute("ROLLBACK")
        raise
    return result


def _run_postgres(connection: Any, fn: Callable[[Tx], T], schema: str) -> T:
    with connection.transaction(), connection.cursor() as cursor:
        tx = Tx(cursor, "postgres", f"{_NOTIFY_CHANNEL}_{schema}")
        return fn(tx)
