"""The SQL text `PostgresCheckpointer` sends, one statement per name."""

from __future__ import annotations

import functools

__all__ = ["VALUES_ROWS", "queries", "values_append"]


def queries(schema: str) -> dict[str, str]:
    """The checkpointer's statements on `schema`'s journal table, by name."""
    table = f'"{schema}".tidemill_journal'
    return {
        "setup": f"""
            CREATE SCHEMA IF NOT EXISTS "{schema}";
            CREATE TABLE IF NOT EXISTS {table} (
                thread_id      text        NOT NULL,
                seq            integer     NOT NULL,
                kind           text        NOT NULL,
                schema_version integer     NOT NULL,
                payload        json        NOT NULL,
                created_at     timestamptz NOT NULL DEFAULT now(),
                PRIMARY KEY (thread_id, seq)
            );
        """,
        # Arrays go in binary (`%(name)b`): as text, psycopg escapes every element
        # in Python, which cost more than the round trip itself.
        # One statement, so it is atomic under autocommit. The row `after` must
        # exist (or `after` is 0 and the thread is new), and the primary key
        # rejects a second writer racing for the same seqs. (A short append
        # goes as `values_append`, the same statement over VALUES.)
        "append": f"""
            INSERT INTO {table} (thread_id, seq, kind, schema_version, payload)
            SELECT %(thread)s, e.seq, e.kind, e.version, e.payload::json
            FROM unnest(%(seqs)b::integer[], %(kinds)b::text[], %(versions)b::integer[],
                        %(payloads)b::text[]) AS e(seq, kind, version, payload)
            WHERE (%(after)s = 0 AND NOT EXISTS (
                       SELECT 1 FROM {table} WHERE thread_id = %(thread)s))
               OR EXISTS (SELECT 1 FROM {table} WHERE thread_id = %(thread)s AND seq = %(after)s)
        """,
        # The same, for several threads at once: each thread's rows go in or none
        # do, by its own condition; a primary-key violation (or a deadlock with
        # another writer of the same threads) rejects them all.
        "append_many": f"""
            INSERT INTO {table} (thread_id, seq, kind, schema_version, payload)
            SELECT e.thread, e.seq, e.kind, e.version, e.payload::json
            FROM unnest(%(threads)b::text[], %(afters)b::integer[], %(seqs)b::integer[],
                        %(kinds)b::text[], %(versions)b::integer[], %(payloads)b::text[])
                 AS e(thread, after, seq, kind, version, payload)
            WHERE (e.after = 0 AND NOT EXISTS (
                       SELECT 1 FROM {table} j WHERE j.thread_id = e.thread))
               OR EXISTS (SELECT 1 FROM {table} j WHERE j.thread_id = e.thread AND j.seq = e.after)
            RETURNING thread_id
        """,
        "read": f"""
            SELECT seq, payload::text, created_at FROM {table}
            WHERE thread_id = %s AND seq > %s ORDER BY seq
        """,
        "read_many": f"""
            SELECT q.thread, j.seq, j.payload::text, j.created_at
            FROM unnest(%(threads)b::text[], %(afters)b::integer[]) AS q(thread, after)
            JOIN {table} j ON j.thread_id = q.thread AND j.seq > q.after
            ORDER BY q.thread, j.seq
        """,
        # Code-point order whatever the database's collation, as the other backends sort.
        "threads": (
            f'SELECT thread_id FROM {table} GROUP BY thread_id ORDER BY thread_id COLLATE "C"'
        ),
        "delete": f"DELETE FROM {table} WHERE thread_id = %s",
        "first": f"SELECT min(seq) FROM {table} WHERE thread_id = %s",
        # The records a compaction folds, locked: a second compaction waits, then
        # finds them gone (it skips) or folds the first one's snapshot.
        "prefix": f"""
            SELECT seq, payload::text FROM {table}
            WHERE thread_id = %s AND seq <= %s ORDER BY seq FOR UPDATE
        """,
        "drop_prefix": f"DELETE FROM {table} WHERE thread_id = %s AND seq < %s",
        "to_snapshot": f"""
            UPDATE {table} SET kind = %s, schema_version = %s, payload = %s::json
            WHERE thread_id = %s AND seq = %s
        """,
        "prune": f"""
            DELETE FROM {table} WHERE thread_id IN (
                SELECT thread_id FROM {table} GROUP BY thread_id
                HAVING max(created_at) < now() - %s::interval)
            RETURNING thread_id
        """,
    }


VALUES_ROWS = 16
"""Appends of up to this many events send them as VALUES, longer ones as arrays."""


@functools.cache
def values_append(schema: str, rows: int) -> str:
    """The single-thread append for `rows` events, each as a row of VALUES.

    Cheaper than arrays for a few rows: nothing to build on either side. One
    statement text per row count, so each can be prepared once.
    """
    table = f'"{schema}".tidemill_journal'
    values = ", ".join(["(%s::integer, %s::text, %s::integer, %s::text)"] * rows)
    return f"""
        INSERT INTO {table} (thread_id, seq, kind, schema_version, payload)
        SELECT %s, e.seq, e.kind, e.version, e.payload::json
        FROM (VALUES {values}) AS e(seq, kind, version, payload)
        WHERE (%s = 0 AND NOT EXISTS (SELECT 1 FROM {table} WHERE thread_id = %s))
           OR EXISTS (SELECT 1 FROM {table} WHERE thread_id = %s AND seq = %s)
    """
