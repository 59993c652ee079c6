"""`HookKeyQueries`: webhooks' idempotency keys, each naming the run its first call started.

A key is kept `HOOK_KEY_TTL` seconds (24 hours) from its first call: a replay
within that time gets the first run, one after it starts a new run. An
expired key is never answered, whether or not it was pruned yet. One
`put_hook_key` in `PRUNE_EVERY` (chosen by a hash of its key and run, so it is
the same each time) also prunes at most `PRUNE_BATCH` expired keys: the table
stays about one day of keys long with no sweeper to run, and deleting
expired keys (found by the index on `created_at`) is paid once in
`PRUNE_EVERY` calls, not by every one. Pruning ended runs deletes their keys too.

Examples:
    >>> import asyncio, tempfile
    >>> from tidemill.store import Store, StoreURL, upgrade
    >>> async def main():
    ...     store = Store(StoreURL.parse(f"sqlite:///{tempfile.mkdtemp()}/t.db"))
    ...     await upgrade(store)
    ...     first = await store.transact(lambda tx: tx.put_hook_key("w", "f/a/x", "k", "r1", 1e9))
    ...     again = await store.transact(lambda tx: tx.put_hook_key("w", "f/a/x", "k", "r2", 1e9))
    ...     await store.close()
    ...     return first, again
    >>> asyncio.run(main())
    ('r1', 'r1')
"""

from __future__ import annotations

import zlib

from tidemill.store._statements import DB_NOW, Statements

__all__ = ["HOOK_KEY_TTL", "PRUNE_BATCH", "PRUNE_EVERY", "HookKeyQueries", "prunes"]

HOOK_KEY_TTL = 24 * 3600.0
"""Seconds a webhook's `Idempotency-Key` names its first run."""

PRUNE_BATCH = 100
"""The most expired keys one `put_hook_key` deletes."""

PRUNE_EVERY = 32
"""About one `put_hook_key` in this many prunes (it keeps up while `PRUNE_BATCH` is larger)."""


def prunes(key: str, run_id: str) -> bool:
    """Whether the `put_hook_key` of `key` and `run_id` prunes expired keys."""
    return zlib.crc32(f"{key}\0{run_id}".encode()) % PRUNE_EVERY == 0


class HookKeyQueries(Statements):
    """The statements about `tm_hook_keys`."""

    def hook_key_run(
        self, workspace: str, path: str, key: str, *, now: float | None = None
    ) -> str | None:
        """The run the key's first call started at `path`; None: no such key (or it expired).

        `now` is when the key is asked about (None: the database's clock).
        """
        if now is None:
            since, params = f"{DB_NOW[self.dialect]} - ?", [HOOK_KEY_TTL]
        else:
            since, params = "?", [now - HOOK_KEY_TTL]
        row = self.one(
            "SELECT run_id FROM tm_hook_keys WHERE workspace = ? AND path = ? AND key = ? "
            f"AND created_at > {since}",
            (workspace, path, key, *params),
        )
        return None if row is None else str(row[0])

    def put_hook_key(self, workspace: str, path: str, key: str, run_id: str, now: float) -> str:
        """Name `run_id` as the key's run, unless the key has one; return the key's run.

        The first call's run wins: a key already stored (and not expired)
        keeps its run, and that run is returned. Two transactions racing with
        one key both get the run of the one that stored it first (PostgreSQL
        waits for the first to commit). An expired key is replaced.
        """
        self.execute(
            "DELETE FROM tm_hook_keys WHERE workspace = ? AND path = ? AND key = ? "
            "AND created_at <= ?",
            (workspace, path, key, now - HOOK_KEY_TTL),
        )
        self.execute(
            "INSERT INTO tm_hook_keys (workspace, path, key, run_id, created_at) "
            "VALUES (?, ?, ?, ?, ?) ON CONFLICT (workspace, path, key) DO NOTHING",
            (workspace, path, key, run_id, now),
        )
        row = self.one(
            "SELECT run_id FROM tm_hook_keys WHERE workspace = ? AND path = ? AND key = ?",
            (workspace, path, key),
        )
        if prunes(key, run_id):
            self.prune_hook_keys(now - HOOK_KEY_TTL, limit=PRUNE_BATCH)
        return run_id if row is None else str(row[0])

    def prune_hook_keys(self, before: float, *, limit: int | None = None) -> int:
        """Delete the keys made at or before `before` (at most `limit` of them); how many."""
        if limit is None:
            cursor = self.execute("DELETE FROM tm_hook_keys WHERE created_at <= ?", (before,))
        else:
            cursor = self.execute(
                "DELETE FROM tm_hook_keys WHERE (workspace, path, key) IN ("
                "SELECT workspace, path, key FROM tm_hook_keys WHERE created_at <= ? LIMIT ?)",
                (before, limit),
            )
        return max(0, int(cursor.rowcount or 0))
