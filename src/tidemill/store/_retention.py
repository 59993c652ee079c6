"""`RetentionQueries`: ended runs found by age and deleted with everything they own.

A run is pruned as a whole tree: a top-level run that ended (`succeeded`,
`failed` or `cancelled`) and every run under it (its branches, loop
iterations, sub-flows and agents' child runs, which share its `root_id`),
with their jobs, results, payloads, logs, usage, approvals, events, waits,
agent journal threads and webhook keys. A flow definition goes with the last
run that ran it. What outlives runs stays: an agent's conversation memory
(kept by `memory_id`, for the next run), the audit log, and a schedule's
history of fires (a fire whose outcome was not recorded yet gets its run's
status, so that no scheduler looks for the run again).

Examples:
    >>> import asyncio, tempfile
    >>> from tidemill.store import Store, StoreURL, upgrade
    >>> async def main():
    ...     store = Store(StoreURL.parse(f"sqlite:///{tempfile.mkdtemp()}/t.db"))
    ...     await upgrade(store)
    ...     found = await store.transact(lambda tx: tx.ended_roots(before=2e9, limit=10))
    ...     deleted = await store.transact(lambda tx: tx.delete_run_trees(found))
    ...     await store.close()
    ...     return found, deleted
    >>> asyncio.run(main())
    ([], (0, {}))
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from tidemill.store._rows import FINISHED_RUN
from tidemill.store._statements import Statements

__all__ = ["RetentionQueries"]

_CHUNK = 500
"""The most ids in one `IN (...)` list (well under either database's limit)."""

_ENDED = "(" + ", ".join(f"'{status}'" for status in sorted(FINISHED_RUN)) + ")"

_BY_ROOT = ("tm_approvals", "tm_usage", "tm_events", "tm_waits")
"""Tables whose rows name their top-level run (`root_id`)."""

_BY_RUN = ("tm_payloads", "tm_jobs", "tm_results", "tm_logs")
"""Tables whose rows name their own run (`run_id`), top-level or not."""


def _chunks(ids: Sequence[str]) -> Iterator[Sequence[str]]:
    for start in range(0, len(ids), _CHUNK):
        yield ids[start : start + _CHUNK]


def _marks(ids: Sequence[str]) -> str:
    return ", ".join("?" * len(ids))


class RetentionQueries(Statements):
    """The statements that find ended runs by age and delete them."""

    def _ended_where(self, before: float, workspace: str | None) -> tuple[str, list[object]]:
        # `created_at < before` walks the index of top-level runs (`tm_runs_top`):
        # a run cannot have ended before it was made.
        where = f"parent_id IS NULL AND status IN {_ENDED} AND created_at < ? AND finished_at < ?"
        params: list[object] = [before, before]
        if workspace is not None:
            where += " AND workspace = ?"
            params.append(workspace)
        return where, params

    def ended_roots(self, *, before: float, limit: int, workspace: str | None = None) -> list[str]:
        """Top-level runs that ended before `before` (epoch seconds), oldest first.

        `workspace` keeps to the runs started from that workspace's items.
        """
        where, params = self._ended_where(before, workspace)
        rows = self.all(
            f"SELECT id FROM tm_runs WHERE {where} ORDER BY created_at, id LIMIT ?",
            (*params, limit),
        )
        return [str(run_id) for (run_id,) in rows]

    def count_ended_roots(self, *, before: float, workspace: str | None = None) -> int:
        """How many top-level runs `ended_roots` would find with no limit."""
        where, params = self._ended_where(before, workspace)
        row = self.one(f"SELECT COUNT(*) FROM tm_runs WHERE {where}", params)
        return 0 if row is None else int(row[0])

    def delete_run_trees(self, roots: Sequence[str]) -> tuple[int, dict[str, int]]:
        """Delete these top-level runs, the runs under them and all they own.

        Returns how many of `roots` were deleted and the rows deleted, by table
        (tables with none left out). A root that is not a top-level run that
        ended is left alone, so a list read in an earlier transaction cannot
        delete a run retried since.
        """
        kept = self._still_ended(roots)
        if not kept:
            return 0, {}
        runs: list[str] = []
        digests: set[str] = set()
        for chunk in _chunks(kept):
            for run_id, digest in self.all(
                f"SELECT id, digest FROM tm_runs WHERE root_id IN ({_marks(chunk)})", chunk
            ):
                runs.append(str(run_id))
                digests.add(str(digest))
        deleted: dict[str, int] = {}

        def count(table: str, cursor: object) -> None:
            rows = max(0, int(getattr(cursor, "rowcount", 0) or 0))
            if rows:
                deleted[table] = deleted.get(table, 0) + rows

        for chunk in _chunks(kept):
            marks = _marks(chunk)
            self.execute(
                "UPDATE tm_schedule_fires SET outcome = (SELECT status FROM tm_runs "
                "WHERE tm_runs.id = tm_schedule_fires.run_id) "
                f"WHERE outcome IS NULL AND run_id IN ({marks})",
                chunk,
            )
            count("tm_hook_keys", self.execute(
                f"DELETE FROM tm_hook_keys WHERE run_id IN ({marks})", chunk
            ))  # fmt: skip
            for table in _BY_ROOT:
                count(table, self.execute(f"DELETE FROM {table} WHERE root_id IN ({marks})", chunk))
        journal = self._has_journal()
        for chunk in _chunks(runs):
            marks = _marks(chunk)
            for table in _BY_RUN:
                count(table, self.execute(f"DELETE FROM {table} WHERE run_id IN ({marks})", chunk))
            if journal:
                for run_id in chunk:  # a range of the primary key: `tidemill:<run>:<step>`
                    count("tidemill_journal", self.execute(
                        "DELETE FROM tidemill_journal WHERE thread_id >= ? AND thread_id < ?",
                        (f"tidemill:{run_id}:", f"tidemill:{run_id};"),
                    ))  # fmt: skip
        for chunk in _chunks(kept):
            count("tm_runs", self.execute(
                f"DELETE FROM tm_runs WHERE root_id IN ({_marks(chunk)})", chunk
            ))  # fmt: skip
        for digest in sorted(digests):
            count("tm_definitions", self.execute(
                "DELETE FROM tm_definitions WHERE digest = ? "
                "AND NOT EXISTS (SELECT 1 FROM tm_runs WHERE digest = ?)",
                (digest, digest),
            ))  # fmt: skip
        return len(kept), deleted

    def _still_ended(self, roots: Sequence[str]) -> list[str]:
        """The roots that are, in this transaction, top-level runs that ended."""
        found: list[str] = []
        for chunk in _chunks(list(dict.fromkeys(roots))):
            found += [
                str(run_id)
                for (run_id,) in self.all(
                    f"SELECT id FROM tm_runs WHERE id IN ({_marks(chunk)}) "
                    f"AND parent_id IS NULL AND status IN {_ENDED}",
                    chunk,
                )
            ]
        return found

    def _has_journal(self) -> bool:
        """Whether the agent journal's table exists (the first `ai_agent` step makes it)."""
        if self.dialect == "postgres":
            row = self.one("SELECT to_regclass('tidemill_journal') IS NOT NULL")
        else:
            row = self.one(
                "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' "
                "AND name = 'tidemill_journal'"
            )
        return bool(row and row[0])
