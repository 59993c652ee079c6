"""`SQLiteVectorStore`: a vector memory's table in the SQLite file of the journals.

Vectors are kept as float32 blobs and compared in Python: SQLite has no
vector type, and a thread holds hundreds of units, not millions. One scan
of a thread's rows per run costs about 60 ms per thousand 256-dimension
units (measured on one core), once per run, never per model call.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from pathlib import Path

from tidemill.agents._sqlite import SQLiteConnections
from tidemill.agents.memory._vector_store import Match, StoredUnit, top_k
from tidemill.errors import ConfigurationError
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
        self._db = SQLiteConnections(
            self.path,
            owner="SQLiteVectorStore",
            description=f"the memory vector table in {self.path!r}",
            schema=_SCHEMA,
            busy_timeout=busy_timeout,
            open_hint="Check the path, its permissions, and that it is a SQLite database.",
        )

    async def digests(self, thread_id: str, model: str) -> dict[int, str]:
        """The stored fingerprints, by `start`."""
        with self._db.statement() as db:
            return dict(db.execute(_DIGESTS, (thread_id, model)).fetchall())

    async def add(self, thread_id: str, model: str, units: Sequence[StoredUnit]) -> None:
        """Store `units` in one transaction, replacing those at the same `start`."""
        rows = [
            (thread_id, model, u.start, u.end, u.digest, array("f", u.vector).tobytes())
            for u in units
        ]
        with self._db.transaction(write=True) as db:
            db.executemany(_UPSERT, rows)

    async def nearest(
        self, thread_id: str, model: str, query: Vector, *, before: int, k: int
    ) -> list[Match]:
        """The `k` most similar units that end by `before`, compared in Python."""
        with self._db.statement() as db:
            rows = db.execute(_CANDIDATES, (thread_id, model, before)).fetchall()
        return top_k(query, ((start, stop, array("f", blob)) for start, stop, blob in rows), k)

    async def delete(self, thread_id: str) -> None:
        """Forget the thread's vectors."""
        with self._db.statement() as db:
            db.execute(_DELETE, (thread_id,))

    async def aclose(self) -> None:
        """Close every connection this store opened."""
        self._db.close()

    def __repr__(self) -> str:
        return f"SQLiteVectorStore({self.path!r})"
