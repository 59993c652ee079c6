"""`Statements`: the plumbing every operation of a transaction runs on.

Statements are written once with `?` placeholders; on PostgreSQL they are
translated to `%s`, and row locks (`FOR UPDATE`, `SKIP LOCKED`) are added.
SQLite needs no row locks: a write transaction (`BEGIN IMMEDIATE`) holds the
whole file.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import lru_cache
from typing import Any, Literal, Self

from tidemill.errors import StoreError

__all__ = ["DB_NOW", "Statements", "due_by", "dumps", "lease_clock", "lease_end", "postgres_sql"]

DB_NOW = {
    "sqlite": "((julianday('now') - 2440587.5) * 86400.0)",
    "postgres": "EXTRACT(EPOCH FROM now())::float8",
}
"""The database's clock, in seconds since the epoch, as SQL.

Leases are set and judged on it, so that a worker whose clock is wrong or
jumps neither takes a job over early nor keeps one past its end. PostgreSQL's
`now()` is the transaction's start, which is never later than the statement
that sets a lease: a lease can only end later than its holder counts. A SQLite
file is on one machine, and its clock is that machine's (the operating
system's, read by SQLite, not Python's `time.time`).
"""


def lease_end(dialect: Literal["sqlite", "postgres"]) -> str:
    """SQL for a lease's end; its parameters are the lease (seconds) and an explicit end.

    With the lease given, the end is that long after the database's clock; with
    None, it is the explicit end (on the caller's clock: tests and tools).
    """
    real = "DOUBLE PRECISION" if dialect == "postgres" else "REAL"
    return f"COALESCE({DB_NOW[dialect]} + CAST(? AS {real}), CAST(? AS {real}))"


def lease_clock(dialect: Literal["sqlite", "postgres"]) -> str:
    """SQL for the time a lease is judged by; its parameters are the lease and the caller's time.

    A claim made with a lease (seconds) is judged on the database's clock,
    one made with an explicit end on the caller's: each on the clock it was
    set by.
    """
    real = "DOUBLE PRECISION" if dialect == "postgres" else "REAL"
    return (
        f"(CASE WHEN CAST(? AS {real}) IS NULL THEN CAST(? AS {real}) ELSE {DB_NOW[dialect]} END)"
    )


def dumps(value: Any) -> str:
    """JSON text for the store: compact, UTF-8 kept as is."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


@lru_cache(maxsize=512)
def postgres_sql(sql: str) -> str:
    """A statement written with `?` placeholders, as PostgreSQL takes it (`%s`)."""
    return sql.replace("?", "%s")


def due_by(dialect: Literal["sqlite", "postgres"]) -> str:
    """SQL for the time queued jobs must be due by; its parameters: the lease, `now`, `now`.

    A claim made with a lease takes the jobs due by the caller's clock or the
    database's, whichever is later: a worker whose clock fell behind still
    takes the jobs that are due. One with an explicit end judges by `now`.
    """
    real = "DOUBLE PRECISION" if dialect == "postgres" else "REAL"
    later = "GREATEST" if dialect == "postgres" else "MAX"
    return (
        f"(CASE WHEN CAST(? AS {real}) IS NULL THEN CAST(? AS {real}) "
        f"ELSE {later}(CAST(? AS {real}), {DB_NOW[dialect]}) END)"
    )


class _Offline:
    """The cursor of `Tx.offline`: every statement is refused."""

    def execute(self, sql: str, params: Sequence[Any] = ()) -> None:
        raise StoreError("This needs the database.", context={"sql": sql[:80]})


class Statements:
    """One transaction's cursor, with the dialect's placeholders and row locks."""

    def __init__(self, cursor: Any, dialect: Literal["sqlite", "postgres"], channel: str | None):
        self._cursor = cursor
        self.dialect = dialect
        self._channel = channel
        self._lock = " FOR UPDATE" if dialect == "postgres" else ""
        self._skip_locked = " FOR UPDATE SKIP LOCKED" if dialect == "postgres" else ""

    @classmethod
    def offline(cls, dialect: Literal["sqlite", "postgres"]) -> Self:
        """A `Tx` with no database behind it: its first statement raises `StoreError`.

        For code that usually needs no query (reading what a claimed job needs
        from caches) to try first, and to run in a real transaction only when
        it does need one.
        """
        return cls(_Offline(), dialect, None)

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        """Run one statement; return the cursor."""
        if self.dialect == "postgres":
            sql = postgres_sql(sql)
        self._cursor.execute(sql, params)
        return self._cursor

    def all(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Every row of a query."""
        return list(self.execute(sql, params).fetchall())

    def one(self, sql: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None:
        """The first row of a query, or None."""
        row: tuple[Any, ...] | None = self.execute(sql, params).fetchone()
        return row

    def notify(self) -> None:
        """Wake listening workers when this transaction commits (PostgreSQL only)."""
        if self._channel is not None:
            self.execute(f"NOTIFY {self._channel}")
