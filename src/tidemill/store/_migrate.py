"""Versioned schema migrations: `sql/<dialect>/NNNN_name.sql`, applied in order.

A fresh database gets `schema.sql` (the whole current schema) in one step; an
older one gets each missing migration in its own transaction. Both record
every version in `tm_migrations`, and a test checks they build the same schema.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from importlib import resources

from tidemill.errors import SchemaVersionError
from tidemill.store._store import Store
from tidemill.store._tx import Tx

__all__ = [
    "Migration",
    "check",
    "current_version",
    "fresh_schema",
    "migrations",
    "pending",
    "upgrade",
]

_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")
_LOCK_KEY = 7_411_902_261  # pg_advisory_xact_lock key: one migrator at a time


@dataclass(frozen=True, slots=True)
class Migration:
    """One versioned migration."""

    version: int
    name: str
    sql: str


def migrations(dialect: str) -> list[Migration]:
    """Every migration for a dialect, in version order.

    Examples:
        >>> [(m.version, m.name) for m in migrations("sqlite")][:2]
        [(1, 'runs_and_jobs'), (2, 'approvals_logs_gates')]
    """
    found = []
    for entry in resources.files("tidemill.store").joinpath("sql", dialect).iterdir():
        match = _NAME.match(entry.name)
        if match:
            found.append(Migration(int(match[1]), match[2], entry.read_text("utf-8")))
    return sorted(found, key=lambda m: m.version)


def fresh_schema(dialect: str) -> str:
    """The whole current schema as one script."""
    return resources.files("tidemill.store").joinpath("sql", dialect, "schema.sql").read_text()


def current_version(dialect: str) -> int:
    """The newest migration's version: what this code expects."""
    return migrations(dialect)[-1].version


def _statements(script: str) -> list[str]:
    lines = [line for line in script.splitlines() if not line.lstrip().startswith("--")]
    return [part.strip() for part in "\n".join(lines).split(";") if part.strip()]


def _applied(tx: Tx) -> set[int]:
    tx.execute(
        "CREATE TABLE IF NOT EXISTS tm_migrations ("
        "version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at DOUBLE PRECISION NOT NULL)"
    )
    return {int(row[0]) for row in tx.all("SELECT version FROM tm_migrations")}


def _recorded(tx: Tx) -> set[int]:
    """The versions `tm_migrations` records, reading only: none when it does not exist yet."""
    if tx.dialect == "sqlite":
        found = tx.one(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'tm_migrations'"
        )
    else:
        found = tx.one(
            "SELECT 1 FROM information_schema.tables "
            "WHERE table_schema = current_schema() AND table_name = 'tm_migrations'"
        )
    if found is None:
        return set()
    return {int(row[0]) for row in tx.all("SELECT version FROM tm_migrations")}


async def pending(store: Store) -> list[Migration]:
    """The migrations this store has not had yet (asking writes nothing)."""
    applied = await store.transact(_recorded)
    return [m for m in migrations(store.dialect) if m.version not in applied]


async def upgrade(store: Store, *, fresh: bool = True) -> list[Migration]:
    """Bring the store's schema up to date; return the migrations applied.

    Args:
        store: The store to migrate.
        fresh: Build an empty database from `schema.sql` in one step (the
            default); False applies every migration in turn (tests use it).

    Raises:
        SchemaVersionError: The database has migrations this code does not
            know: it was upgraded by a newer Tidemill.
    """
    known = migrations(store.dialect)

    def step(tx: Tx) -> list[Migration]:
        if tx.dialect == "postgres":
            tx.execute("SELECT pg_advisory_xact_lock(?)", (_LOCK_KEY,))
        applied = _applied(tx)
        unknown = applied - {m.version for m in known}
        if unknown:
            raise SchemaVersionError(
                f"The store has schema version {max(unknown)}, newer than this "
                f"Tidemill knows ({known[-1].version}).",
                hint="Upgrade Tidemill on this machine.",
            )
        todo = [m for m in known if m.version not in applied]
        if not todo:
            return []
        now = time.time()
        if fresh and not applied:
            batch, script = todo, fresh_schema(tx.dialect)
        else:
            batch, script = todo[:1], todo[0].sql
        for statement in _statements(script):
            tx.execute(statement)
        for m in batch:
            tx.execute(
                "INSERT INTO tm_migrations (version, name, applied_at) VALUES (?, ?, ?)",
                (m.version, m.name, now),
            )
        return batch

    done: list[Migration] = []
    while True:
        batch = await store.transact(step)
        if not batch:
            return done
        done.extend(batch)


async def check(store: Store) -> None:
    """Raise `SchemaVersionError` unless the store's schema is current."""
    todo = await pending(store)
    if todo:
        raise SchemaVersionError(
            f"The store at {store.url} needs {len(todo)} migration(s) "
            f"({', '.join(f'{m.version:04d}_{m.name}' for m in todo)}).",
            hint=f"Run: tidemill db upgrade --db '{store.url}'",
        )
