"""`tm_hook_keys` on SQLite and PostgreSQL: the first run wins, keys expire after a day."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from functools import partial

import pytest

from tidemill.store import Store, StoreURL, Tx, upgrade
from tidemill.store._hook_keys import HOOK_KEY_TTL, PRUNE_BATCH, prunes


@pytest.fixture
async def store(store_url: str) -> AsyncIterator[Store]:
    store = Store(StoreURL.parse(store_url))
    await upgrade(store)
    try:
        yield store
    finally:
        await store.close()


def count(tx: Tx) -> int:
    row = tx.one("SELECT COUNT(*) FROM tm_hook_keys")
    assert row is not None
    return int(row[0])


async def test_the_first_run_of_a_key_wins(store: Store) -> None:
    now = time.time()
    assert await store.transact(lambda tx: tx.hook_key_run("w", "f/a/hook", "k1")) is None
    first = await store.transact(lambda tx: tx.put_hook_key("w", "f/a/hook", "k1", "run-1", now))
    again = await store.transact(lambda tx: tx.put_hook_key("w", "f/a/hook", "k1", "run-2", now))
    assert (first, again) == ("run-1", "run-1")
    assert await store.transact(lambda tx: tx.hook_key_run("w", "f/a/hook", "k1")) == "run-1"
    # The key is per workspace and path.
    other = await store.transact(lambda tx: tx.put_hook_key("w", "f/a/other", "k1", "run-3", now))
    elsewhere = await store.transact(
        lambda tx: tx.put_hook_key("v", "f/a/hook", "k1", "run-4", now)
    )
    assert (other, elsewhere) == ("run-3", "run-4")
    assert await store.transact(count) == 3


async def test_a_key_expires_after_a_day_and_is_then_replaced(store: Store) -> None:
    old = time.time() - HOOK_KEY_TTL - 60
    await store.transact(lambda tx: tx.put_hook_key("w", "f/a/hook", "k", "run-old", old))
    assert await store.transact(lambda tx: tx.hook_key_run("w", "f/a/hook", "k")) is None
    assert (
        await store.transact(lambda tx: tx.hook_key_run("w", "f/a/hook", "k", now=old + 1))
        == "run-old"
    )
    now = time.time()
    new = await store.transact(lambda tx: tx.put_hook_key("w", "f/a/hook", "k", "run-new", now))
    assert new == "run-new"
    assert await store.transact(lambda tx: tx.hook_key_run("w", "f/a/hook", "k")) == "run-new"


def put(tx: Tx, *, key: str, run_id: str, now: float) -> str:
    return tx.put_hook_key("w", "f/a/hook", key, run_id, now)


def pruning_run(key: str, *, prune: bool = True) -> str:
    """A run id whose `put_hook_key` of `key` prunes (or, with `prune=False`, does not)."""
    return next(f"run-{n}" for n in range(10_000) if prunes(key, f"run-{n}") is prune)


async def test_pruning_deletes_only_expired_keys_and_a_put_prunes_a_bounded_batch(
    store: Store,
) -> None:
    now = time.time()
    old = now - HOOK_KEY_TTL - 60

    def fill(tx: Tx) -> None:
        for n in range(PRUNE_BATCH + 5):
            tx.execute(
                "INSERT INTO tm_hook_keys (workspace, path, key, run_id, created_at) "
                "VALUES (?, ?, ?, ?, ?)",
                ("w", "f/a/hook", f"old-{n}", f"run-{n}", old),
            )

    await store.transact(fill)
    # Most puts leave the expired keys be ...
    quiet = pruning_run("quiet", prune=False)
    await store.transact(lambda tx: tx.put_hook_key("w", "f/a/hook", "quiet", quiet, now - 10))
    assert await store.transact(count) == PRUNE_BATCH + 6
    # ... one in PRUNE_EVERY prunes a batch of them, never a fresh one.
    for key in ("first", "second"):
        await store.transact(partial(put, key=key, run_id=pruning_run(key), now=now))
    assert await store.transact(count) == 3
    assert await store.transact(lambda tx: tx.prune_hook_keys(now - HOOK_KEY_TTL)) == 0
    assert await store.transact(lambda tx: tx.prune_hook_keys(now)) == 3
    assert await store.transact(count) == 0


async def test_racing_puts_of_one_key_all_get_one_run(store: Store) -> None:
    now = time.time()

    async def put(n: int) -> str:
        run: str = await store.transact(
            lambda tx: tx.put_hook_key("w", "f/a/race", "same", f"run-{n}", now)
        )
        return run

    runs = await asyncio.gather(*(put(n) for n in range(8)))
    assert len(set(runs)) == 1 and runs[0].startswith("run-")
    assert await store.transact(count) == 1
