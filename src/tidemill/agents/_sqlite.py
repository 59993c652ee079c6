"""`SQLiteConnections`: the connections of one SQLite file, one per OS thread.

`SQLiteCheckpointer` and `SQLiteVectorStore` keep their tables in the same
kind of file, opened the same way: WAL mode, a busy timeout, the table
created if missing, and `sqlite3.Error` reported as `SerializationError`.
This class owns those connections so that each store keeps only its SQL.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext
from pathlib import Path

from tidemill.errors import ConfigurationError, SerializationError

__all__ = ["SQLiteConnections"]


class SQLiteConnections:
    """A connection per OS thread to one SQLite file, each closed by `close()`.

    A `":memory:"` database is private to one connection, so there is one,
    shared by the threads in turn.

    Args:
        path: The database file; its folder is created.
        owner: The class name the "was closed" error names.
        description: What the file holds, for error messages, such as
            `"the journal database 'agent.db'"`.
        schema: The statement that creates the table, run on each new connection.
        busy_timeout: Seconds to wait for another process's write lock.
        pragmas: Statements run after WAL mode is set, before `schema`.
        open_hint: The hint of the error raised when a connection cannot be opened.
    """

    def __init__(
        self,
        path: str,
        *,
        owner: str,
        description: str,
        schema: str,
        busy_timeout: float,
        pragmas: Sequence[str] = (),
        open_hint: str,
    ) -> None:
        self.path = path
        self._owner = owner
        self._description = description
        self._setup = (*pragmas, schema)
        self._busy_timeout = busy_timeout
        self._open_hint = open_hint
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._memory_lock = threading.Lock()
        self._closed = False
        self._shared: sqlite3.Connection | None = None
        if path != ":memory:":
            Path(path).expanduser().parent.mkdir(parents=True, exist_ok=True)
        self.connection()  # fail now, not on first use, when the file is unusable

    @contextmanager
    def statement(self) -> Iterator[sqlite3.Connection]:
        """A connection for statements that are each their own transaction.

        Raises:
            SerializationError: When a statement fails, with the `sqlite3.Error` as its cause.
        """
        # A ":memory:" database is one connection; threads take turns on it.
        with self._memory_lock if self.path == ":memory:" else nullcontext():
            db = self.connection()
            try:
                yield db
            except sqlite3.Error as exc:
                what = self._description[:1].upper() + self._description[1:]
                hint = "Check that the file is writable and not held by a crashed process."
                raise self._error(f"{what} failed: {exc}", hint) from exc

    @contextmanager
    def transaction(self, *, write: bool = False) -> Iterator[sqlite3.Connection]:
        """Several statements as one transaction; `write` takes the write lock first."""
        with self.statement() as db:
            db.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            try:
                yield db
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")

    def connection(self) -> sqlite3.Connection:
        """The calling thread's connection, opened on first use.

        Raises:
            ConfigurationError: After `close()`.
            SerializationError: When the file cannot be opened as a database.
        """
        if self._closed:
            raise ConfigurationError(f"This {self._owner} was closed.", hint="Create a new one.")
        if self.path == ":memory:":
            if self._shared is None:
                self._shared = self._open()
            return self._shared
        connection: sqlite3.Connection | None = getattr(self._local, "connection", None)
        if connection is None:
            connection = self._local.connection = self._open()
        return connection

    def close(self) -> None:
        """Close every connection opened; later use raises `ConfigurationError`."""
        with self._lock:
            self._closed = True
            for connection in self._connections:
                connection.close()
            self._connections.clear()

    def _open(self) -> sqlite3.Connection:
        try:
            db = sqlite3.connect(
                self.path,
                timeout=self._busy_timeout,
                isolation_level=None,
                check_same_thread=False,
            )
            db.execute("PRAGMA journal_mode=WAL")
            for statement in self._setup:
                db.execute(statement)
        except sqlite3.Error as exc:
            raise self._error(f"Cannot open {self._description}: {exc}", self._open_hint) from exc
        with self._lock:
            self._connections.append(db)
        return db

    def _error(self, message: str, hint: str) -> SerializationError:
        return SerializationError(message, hint=hint, context={"path": self.path})
