"""`SQLiteCheckpointer`: journals in a SQLite file, shared by threads and processes."""

from __future__ import annotations

import functools
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext
from datetime import UTC, datetime, timedelta
from pathlib import Path

from tidemill.agents.checkpoint._base import decode_event, encode_event
from tidemill.agents.checkpoint._compact import checked_max_history, compaction_point, fold_snapshot
from tidemill.agents.journal import JournalEvent, JournalRecord
from tidemill.errors import ConfigurationError, JournalConflict, SerializationError

__all__ = ["SQLiteCheckpointer"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS tidemill_journal (
    thread_id      TEXT    NOT NULL,
    seq            INTEGER NOT NULL,
    kind           TEXT    NOT NULL,
    schema_version INTEGER NOT NULL,
    payload        TEXT    NOT NULL,
    created_at     REAL    NOT NULL,
    PRIMARY KEY (thread_id, seq)
) WITHOUT ROWID
"""


@functools.cache
def _append_statement(rows: int) -> str:
    """One INSERT for `rows` events that stores nothing unless `after` is still last.

    A single statement is its own transaction, and a writing statement takes
    SQLite's write lock before it reads, so the check and the insert are atomic.
    """
    values = ", ".join(["(?, ?, ?, ?, ?, ?)"] * rows)
    return (
        "INSERT INTO tidemill_journal (thread_id, seq, kind, schema_version, payload, created_at) "
        f"SELECT * FROM (VALUES {values}) "
        "WHERE (SELECT coalesce(max(seq), 0) FROM tidemill_journal WHERE thread_id = ?) = ?"
    )


_READ = (
    "SELECT seq, payload, created_at FROM tidemill_journal "
    "WHERE thread_id = ? AND seq > ? ORDER BY seq"
)
_THREADS = "SELECT DISTINCT thread_id FROM tidemill_journal ORDER BY thread_id"
_DELETE = "DELETE FROM tidemill_journal WHERE thread_id = ?"
_FIRST = "SELECT min(seq) FROM tidemill_journal WHERE thread_id = ?"
_PREFIX = "SELECT seq, payload FROM tidemill_journal WHERE thread_id = ? AND seq <= ? ORDER BY seq"
_DROP_PREFIX = "DELETE FROM tidemill_journal WHERE thread_id = ? AND seq < ?"
_TO_SNAPSHOT = (
    "UPDATE tidemill_journal SET kind = ?, schema_version = ?, payload = ? "
    "WHERE thread_id = ? AND seq = ?"
)
_OLD_THREADS = (
    "SELECT thread_id FROM tidemill_journal GROUP BY thread_id HAVING max(created_at) < ?"
)


class SQLiteCheckpointer:
    """Keeps journals in a SQLite database file: durable, nothing to install.

    Uses WAL mode, so readers never block the writer, and takes SQLite's
    write lock for each append, so several threads and processes can share
    one file. Each OS thread gets its own connection. Statements run
    directly on the calling thread: an append is one short transaction,
    cheaper than handing it to a worker thread.

    Args:
        path: The database file; its folder is created. `":memory:"` gives a
            private in-process database.
        busy_timeout: Seconds to wait for another process's write lock.
        max_history: The most records a thread keeps. An append that would
            pass it folds the thread's older records into one
            `ThreadSnapshot` record in the same transaction (see
            `tidemill.agents.checkpoint`); None (the default) keeps every
            record. The table is the same either way, so a database written
            without it is compacted from its next append on.

    Raises:
        SerializationError: When the file cannot be opened.
        InvalidOption: When `max_history` is below `MIN_HISTORY` (4).

    Examples:
        >>> import asyncio, pathlib, tempfile
        >>> from tidemill.agents.journal import RunFinished
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "agent.db"
        >>> _ = asyncio.run(SQLiteCheckpointer(path).append("t", [RunFinished(output=7)], after=0))
        >>> asyncio.run(SQLiteCheckpointer(path).read("t"))[0].event.output
        7
    """

    def __init__(
        self,
        path: str | Path = ".tidemill/agent.db",
        *,
        busy_timeout: float = 30.0,
        max_history: int | None = None,
    ):
        self.path = str(path)
        self.busy_timeout = busy_timeout
        self.max_history = checked_max_history(max_history)
        """The most records a thread keeps, or None for all of them."""
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._memory_lock = threading.Lock()
        self._closed = False
        self._shared: sqlite3.Connection | None = None
        if self.path != ":memory:":
            Path(self.path).expanduser().parent.mkdir(parents=True, exist_ok=True)
        self._connection()  # fail now, not on first use, when the file is unusable

    async def append(self, thread_id: str, events: Sequence[JournalEvent], *, after: int) -> int:
        """Append `events` after entry `after`, in one statement."""
        if not events:
            return after
        now = time.time()
        rows = [
            (thread_id, after + i, e.kind, e.schema_version, encode_event(e).decode(), now)
            for i, e in enumerate(events, start=1)
        ]
        params = [value for row in rows for value in row]
        params += [thread_id, after]
        last = after + len(events)
        try:
            if self.max_history is None:
                with self._statement() as db:
                    inserted = db.execute(_append_statement(len(rows)), params).rowcount
            else:
                with self._transaction(write=True) as db:
                    inserted = db.execute(_append_statement(len(rows)), params).rowcount
                    if inserted == len(rows):
                        self._compact(db, thread_id, last)
        except SerializationError as exc:
            if isinstance(exc.__cause__, sqlite3.IntegrityError):
                raise JournalConflict(thread_id, after) from None
            raise
        if inserted != len(rows):
            raise JournalConflict(thread_id, after)
        return last

    def _compact(self, db: sqlite3.Connection, thread_id: str, last: int) -> None:
        """Fold the thread's oldest records into a snapshot, inside the append's transaction."""
        (first,) = db.execute(_FIRST, (thread_id,)).fetchone()
        point = compaction_point(first, last, self.max_history)
        if point is None:
            return
        prefix = db.execute(_PREFIX, (thread_id, point)).fetchall()
        snapshot = fold_snapshot(
            thread_id,
            ((seq, decode_event(payload, thread_id=thread_id, seq=seq)) for seq, payload in prefix),
        )
        db.execute(_DROP_PREFIX, (thread_id, point))
        db.execute(
            _TO_SNAPSHOT,
            (
                snapshot.kind,
                snapshot.schema_version,
                encode_event(snapshot).decode(),
                thread_id,
                point,
            ),
        )

    async def read(self, thread_id: str, *, after: int = 0) -> list[JournalRecord]:
        """Return the records after `after`, in order."""
        with self._statement() as db:
            rows = db.execute(_READ, (thread_id, after)).fetchall()
        return [
            JournalRecord(
                seq,
                decode_event(payload, thread_id=thread_id, seq=seq),
                datetime.fromtimestamp(created, UTC),
            )
            for seq, payload, created in rows
        ]

    async def threads(self) -> list[str]:
        """Return every thread id, sorted."""
        with self._statement() as db:
            return [row[0] for row in db.execute(_THREADS)]

    async def delete(self, thread_id: str) -> bool:
        """Remove a thread's journal."""
        with self._statement() as db:
            return db.execute(_DELETE, (thread_id,)).rowcount > 0

    async def prune(self, *, older_than: timedelta) -> int:
        """Remove threads whose newest record is older than `older_than`."""
        limit = time.time() - older_than.total_seconds()
        with self._transaction(write=True) as db:
            old = [row[0] for row in db.execute(_OLD_THREADS, (limit,))]
            db.executemany(_DELETE, [(t,) for t in old])
        return len(old)

    async def aclose(self) -> None:
        """Close every connection this checkpointer opened."""
        with self._lock:
            self._closed = True
            for connection in self._connections:
                connection.close()
            self._connections.clear()

    def __repr__(self) -> str:
        return f"SQLiteCheckpointer({self.path!r})"

    @contextmanager
    def _transaction(self, *, write: bool = False) -> Iterator[sqlite3.Connection]:
        """Several statements as one transaction; `write` takes the write lock first."""
        with self._statement() as db:
            db.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            try:
                yield db
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")

    @contextmanager
    def _statement(self) -> Iterator[sqlite3.Connection]:
        """A connection for statements that are each their own transaction."""
        # A ":memory:" database is one connection; threads take turns on it.
        with self._memory_lock if self.path == ":memory:" else nullcontext():
            db = self._connection()
            try:
                yield db
            except sqlite3.Error as exc:
                raise SerializationError(
                    f"The journal database {self.path!r} failed: {exc}",
                    hint="Check that the file is writable and not held by a crashed process.",
                    context={"path": self.path},
                ) from exc

    def _connection(self) -> sqlite3.Connection:
        if self._closed:
            raise ConfigurationError(
                "This SQLiteCheckpointer was closed.", hint="Create a new one."
            )
        if self.path == ":memory:":
            if self._shared is None:
                self._shared = self._open()
            return self._shared
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
            db.execute("PRAGMA synchronous=NORMAL")
            db.execute(_SCHEMA)
        except sqlite3.Error as exc:
            raise SerializationError(
                f"Cannot open the journal database {self.path!r}: {exc}",
                hint="Check the path and its permissions.",
                context={"path": self.path},
            ) from exc
        with self._lock:
            self._connections.append(db)
        return db
