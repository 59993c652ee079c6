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

__all__ = ["Statements", "dumps", "postgres_sql"]


def dumps(value: Any) -> str:
    """JSON text for the store: compact, UTF-8 kept as is."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


@lru_cache(maxsize=512)
def postgres_sql(sql: str) -> str:
    """A statement written with `?` placeholders, as PostgreSQL takes it (`%s`)."""
    return sql.replace("?", "%s")


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
