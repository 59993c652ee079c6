"""`SQLiteCheckpointer`: journals in a SQLite file, shared by threads and processes."""

from __future__ import annotations

import functools
import sqlite3
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

from tidemill.agents._sqlite import SQLiteConnections
from tidemill.agents.checkpoint._base import decode_event, encode_event
from tidemill.agents.checkpoint._compact import checked_max_history, compaction_point, fold_snapshot
from tidemill.agents.journal import JournalEvent, JournalRecord
from tidemill.errors import JournalConflict, SerializationError

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
        self._db = SQLiteConnections(
            self.path,
            owner="SQLiteCheckpointer",
            description=f"the journal database {self.path!r}",
            schema=_SCHEMA,
            busy_timeout=busy_timeout,
            pragmas=("PRAGMA synchronous=NORMAL",),
            open_hint="Check the path and its permissions.",
        )

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
                with self._db.statement() as db:
                    inserted = db.execute(_append_statement(len(rows)), params).rowcount
            else:
                with self._db.transaction(write=True) as db:
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
        with self._db.statement() as db:
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
        with self._db.statement() as db:
            return [row[0] for row in db.execute(_THREADS)]

    async def delete(self, thread_id: str) -> bool:
        """Remove a thread's journal."""
        with self._db.statement() as db:
            return db.execute(_DELETE, (thread_id,)).rowcount > 0

    async def prune(self, *, older_than: timedelta) -> int:
        """Remove threads whose newest record is older than `older_than`."""
        limit = time.time() - older_than.total_seconds()
        with self._db.transaction(write=True) as db:
            old = [row[0] for row in db.execute(_OLD_THREADS, (limit,))]
            db.executemany(_DELETE, [(t,) for t in old])
        return len(old)

    async def aclose(self) -> None:
        """Close every connection this checkpointer opened."""
        self._db.close()

    def __repr__(self) -> str:
        return f"SQLiteCheckpointer({self.path!r})"
