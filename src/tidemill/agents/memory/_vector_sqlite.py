"""`SQLiteVectorStore`: a vector memory's table in the SQLite file of the journals.

Vectors are kept as float32 blobs and compared in Python: SQLite has no
vector type, and a thread holds hundreds of units, not millions. One scan
of a thread's rows per run costs about 60 ms per thousand 256-dimension
units (measured on one core), once per run, never per model call.
"""

from __future__ import annotations

import sqlite3
import threading
from array import array
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from tidemill.agents.memory._vector_store import Match, StoredUnit, top_k
from tidemill.errors import ConfigurationError, SerializationError
from tidemill.llm.embeddings import Vector

__all__ = ["SQLiteVectorStore"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS tidemill_memory_vectors (
    thread_id TEXT    NOT NULL,
    model     TEXT    NOT NULL,
    start     INTEGER NOT NULL,
    stop      INTEGER NOT NULL,
    digest    TEXT    NOT NULL,
    vector    BLOB    NOT NULL,
    PRIMARY KEY (thread_id, model, start)
) WITHOUT ROWID
"""
_DIGESTS = "SELECT start, digest FROM tidemill_memory_vectors WHERE thread_id = ? AND model = ?"
_UPSERT = (
    "INSERT INTO tidemill_memory_vectors (thread_id, model, start, stop, digest, vector) "
    "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (thread_id, model, start) DO UPDATE SET "
    "stop = excluded.stop, digest = excluded.digest, vector = excluded.vector"
)
_CANDIDATES = (
    "SELECT start, stop, vector FROM tidemill_memory_vectors "
    "WHERE thread_id = ? AND model = ? AND stop <= ?"
)
_DELETE = "DELETE FROM tidemill_memory_vectors WHERE thread_id = ?"


class SQLiteVectorStore:
    """Keeps a vector memory's vectors in a SQLite file, beside the journals.

    Give it the path of the `SQLiteCheckpointer`'s file (`store_for` does):
    the table `tidemill_memory_vectors` sits next to `tidemill_journal`, in
    WAL mode, so the same backup holds both. Each OS thread gets its own
    connection, and each statement is its own short transaction.

    Args:
        path: The database file; its folder is created.
        busy_timeout: Seconds to wait for another process's write lock.

    Raises:
        SerializationError: When the file cannot be opened as a database.

    Examples:
        >>> import asyncio, pathlib, tempfile
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "agent.db"
        >>> store = SQLiteVectorStore(path)
        >>> asyncio.run(store.add("t", "m", [StoredUnit(0, 1, "d", (0.6, 0.8))]))
        >>> asyncio.run(SQLiteVectorStore(path).digests("t", "m"))
        {0: 'd'}
    """

    def __init__(self, path: str | Path, *, busy_timeout: float = 30.0) -> None:
        self.path = str(path)
        if self.path == ":memory:":
            raise ConfigurationError(
                "A SQLite vector store needs a file; ':memory:' is private to one connection.",
                hint="Use InMemoryVectorStore() for vectors kept in the process.",
            )
        self.busy_timeout = busy_timeout
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._closed = False
        Path(self.path).expanduser().parent.mkdir(parents=True, exist_ok=True)
        self._connection()  # fail now, not on first use, when the file is unusable

    async def digests(self, thread_id: str, model: str) -> dict[int, str]:
        """The stored fingerprints, by `start`."""
        with self._statement() as db:
            return dict(db.execute(_DIGESTS, (thread_id, model)).fetchall())

    async def add(self, thread_id: str, model: str, units: Sequence[StoredUnit]) -> None:
        """Store `units` in one transaction, replacing those at the same `start`."""
        rows = [
            (thread_id, model, u.start, u.end, u.digest, array("f", u.vector).tobytes())
            for u in units
        ]
        with self._statement() as db:
            db.execute("BEGIN IMMEDIATE")
            try:
                db.executemany(_UPSERT, rows)
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")

    async def nearest(
        self, thread_id: str, model: str, query: Vector, *, before: int, k: int
    ) -> list[Match]:
        """The `k` most similar units that end by `before`, compared in Python."""
        with self._statement() as db:
            rows = db.execute(_CANDIDATES, (thread_id, model, before)).fetchall()
        return top_k(query, ((start, stop, array("f", blob)) for start, stop, blob in rows), k)

    async def delete(self, thread_id: str) -> None:
        """Forget the thread's vectors."""
        with self._statement() as db:
            db.execute(_DELETE, (thread_id,))

    async def aclose(self) -> None:
        """Close every connection this store opened."""
        with self._lock:
            self._closed = True
            for connection in self._connections:
                connection.close()
            self._connections.clear()

    def __repr__(self) -> str:
        return f"SQLiteVectorStore({self.path!r})"

    @contextmanager
    def _statement(self) -> Iterator[sqlite3.Connection]:
        db = self._connection()
        try:
            yield db
        except sqlite3.Error as exc:
            raise SerializationError(
                f"The memory vector table in {self.path!r} failed: {exc}",
                hint="Check that the file is writable and not held by a crashed process.",
                context={"path": self.path},
            ) from exc

    def _connection(self) -> sqlite3.Connection:
        if self._closed:
            raise ConfigurationError("This SQLiteVectorStore was closed.", hint="Create a new one.")
        connection: sqlite3.Connection | None = getattr(self._local, "connection", None)
        if connection is None:
            connection = self._local.connection = self._open()
        return connection

    def _open(self) -> sqlite3.Connection:
        try:
            db = sqlite3.connect(
                self.path,
                timeout=self.busy_timeout,
                isolation_level=None,
                check_same_thread=False,
            )
            db.execute("PRAGMA journal_mode=WAL")
            db.execute(_SCHEMA)
        except sqlite3.Error as exc:
            raise SerializationError(
                f"Cannot open the memory vector table in {self.path!r}: {exc}",
                hint="Check the path, its permissions, and that it is a SQLite database.",
                context={"path": self.path},
            ) from exc
        with self._lock:
            self._connections.append(db)
        return db
