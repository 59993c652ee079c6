"""The schema: a fresh database equals one migrated step by step; versions are checked."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tidemill.errors import SchemaVersionError
from tidemill.store import Store, StoreURL, Tx, check, current_version, migrations, upgrade


def _shape(tx: Tx) -> list[tuple[object, ...]]:
    """Tables, columns, types, nullability, defaults and indexes, in a stable order."""
    if tx.dialect == "sqlite":
        rows: list[tuple[object, ...]] = []
        tables = tx.all("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
        for (table,) in tables:
            for column in tx.all(f"PRAGMA table_info({table})"):
                rows.append(("column", table, *column[1:]))
        for name, sql in tx.all(
            "SELECT name, sql FROM sqlite_master WHERE type = 'index' ORDER BY name"
        ):
            rows.append(("index", name, " ".join(str(sql).split())))
        return rows
    columns = tx.all(
        "SELECT table_name, column_name, data_type, is_nullable, column_default, is_identity "
        "FROM information_schema.columns WHERE table_schema = current_schema() "
        "ORDER BY table_name, column_name"
    )
    indexes = tx.all(
        "SELECT indexname, replace(indexdef, current_schema() || '.', '') FROM pg_indexes "
        "WHERE schemaname = current_schema() ORDER BY indexname"
    )
    constraints = tx.all(
        "SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid) FROM pg_constraint "
        "WHERE connamespace = current_schema()::regnamespace ORDER BY 1, 2"
    )
    return (
        [("column", *c) for c in columns]
        + [("index", *i) for i in indexes]
        + [("constraint", *c) for c in constraints]
    )


def _second(url: str) -> str:
    if url.startswith("sqlite"):
        return url.replace("tidemill.db", "stepwise.db")
    return url + "_b"


async def test_fresh_schema_equals_the_migrations_applied_in_turn(
    store_url: str, drop_schema: Callable[[str], None]
) -> None:
    fresh = Store(StoreURL.parse(store_url))
    stepwise = Store(StoreURL.parse(_second(store_url)))
    try:
        applied_fresh = await upgrade(fresh)
        applied_steps = await upgrade(stepwise, fresh=False)
        assert [m.version for m in applied_fresh] == [m.version for m in applied_steps]
        assert len(applied_steps) == len(migrations(fresh.dialect)) >= 2
        assert await fresh.transact(_shape) == await stepwise.transact(_shape)
    finally:
        await fresh.close()
        await stepwise.close()
        if not store_url.startswith("sqlite"):
            drop_schema(_second(store_url))


async def test_upgrade_is_idempotent_and_check_passes(store_url: str) -> None:
    store = Store(StoreURL.parse(store_url))
    try:
        assert len(await upgrade(store)) == current_version(store.dialect)
        assert await upgrade(store) == []
        await check(store)
    finally:
        await store.close()


async def test_an_unmigrated_store_says_how_to_upgrade(store_url: str) -> None:
    store = Store(StoreURL.parse(store_url))
    try:
        with pytest.raises(SchemaVersionError, match="tidemill db upgrade"):
            await check(store)
    finally:
        await store.close()


async def test_a_newer_schema_is_refused(store_url: str) -> None:
    store = Store(StoreURL.parse(store_url))
    try:
        await upgrade(store)
        await store.transact(
            lambda tx: tx.execute(
                "INSERT INTO tm_migrations (version, name, applied_at) VALUES (?, ?, ?)",
                (999, "from_the_future", 0.0),
            )
        )
        with pytest.raises(SchemaVersionError, match="newer than this Tidemill"):
            await upgrade(store)
    finally:
        await store.close()
