"""Retention: ended runs older than a limit, pruned a batch per transaction.

`prune_runs` deletes top-level runs that ended before a time, each with the
whole tree of runs under it and all they own (see the store's
`RetentionQueries` for what goes and what stays), `batch` runs per
transaction so that a large prune never holds the database for long.
`Retention` is a worker's standing policy (`Worker(keep_runs=...)`, `tidemill
worker --keep-runs 30d`): every `every` seconds it prunes what has grown
older than the limit, in smaller batches paced to leave the database to the
runs at least half the time. Any number of workers may prune one store:
each batch re-checks its runs in the deleting transaction.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tidemill.errors import InvalidOption, StoreError
from tidemill.store import Store, Tx

if TYPE_CHECKING:
    from tidemill.engine._metrics import Metrics

__all__ = [
    "BACKGROUND_BATCH",
    "RETENTION_BATCH",
    "Pruned",
    "Retention",
    "check_keep",
    "prune_batch",
    "prune_runs",
]

log = logging.getLogger("tidemill.worker")

RETENTION_BATCH = 200
"""Top-level runs one pruning transaction deletes (with the runs under them)."""

BACKGROUND_BATCH = 50
"""Top-level runs per transaction of a worker's standing retention (`Retention`)."""


@dataclass(slots=True)
class Pruned:
    """What a prune deleted (or, with `dry_run`, would delete).

    Attributes:
        before: The cutoff (epoch seconds): runs that ended before it went.
        runs: Top-level runs deleted (each with the runs under it).
        rows: Rows deleted, by table; empty for a dry run.
        dry_run: Nothing was deleted: `runs` is how many would be.
    """

    before: float
    runs: int = 0
    rows: dict[str, int] = field(default_factory=dict)
    dry_run: bool = False

    def add(self, runs: int, rows: dict[str, int]) -> None:
        """Count one batch in."""
        self.runs += runs
        for table, count in rows.items():
            self.rows[table] = self.rows.get(table, 0) + count


def check_keep(seconds: float, what: str = "older_than") -> float:
    """`seconds` if it is a positive, finite number of seconds, else `InvalidOption`.

    Examples:
        >>> check_keep(86400.0)
        86400.0
        >>> check_keep(0)
        Traceback (most recent call last):
        ...
        tidemill.errors.InvalidOption: older_than must be a positive number of seconds, not 0. ...
    """
    if isinstance(seconds, bool) or not isinstance(seconds, int | float):
        raise InvalidOption(
            f"{what} must be a number of seconds, not {type(seconds).__name__}.",
            hint="Pass seconds, or a timedelta (30 days: timedelta(days=30)).",
        )
    if not math.isfinite(seconds) or seconds <= 0:
        raise InvalidOption(
            f"{what} must be a positive number of seconds, not {seconds!r}.",
            hint="Keep ended runs for, say, 30 days (2592000 seconds, or 30d on the CLI).",
        )
    return float(seconds)


async def prune_batch(
    store: Store, *, before: float, workspace: str | None = None, batch: int = RETENTION_BATCH
) -> tuple[int, dict[str, int], bool]:
    """One transaction of a prune: (top-level runs deleted, rows by table, whether it was full)."""

    def one_batch(tx: Tx) -> tuple[int, dict[str, int], bool]:
        roots = tx.ended_roots(before=before, limit=batch, workspace=workspace)
        runs, rows = tx.delete_run_trees(roots)
        return runs, rows, len(roots) == batch and runs > 0

    done: tuple[int, dict[str, int], bool] = await store.transact(one_batch)
    return done


async def prune_runs(
    store: Store,
    *,
    before: float,
    workspace: str | None = None,
    batch: int = RETENTION_BATCH,
    dry_run: bool = False,
    on_batch: Callable[[Pruned], None] | None = None,
) -> Pruned:
    """Delete the top-level runs that ended before `before`, a batch per transaction.

    `workspace` keeps to runs started from that workspace's items. `on_batch`
    is called with the running total after each batch (progress). With
    `dry_run`, nothing is deleted and `Pruned.runs` counts what would be.
    """
    if batch < 1:
        raise InvalidOption(f"batch must be at least 1, not {batch}.", hint="Leave it at 200.")
    pruned = Pruned(before, dry_run=dry_run)
    if dry_run:
        pruned.runs = await store.transact(
            lambda tx: tx.count_ended_roots(before=before, workspace=workspace)
        )
        return pruned
    while True:
        runs, rows, full = await prune_batch(store, before=before, workspace=workspace, batch=batch)
        pruned.add(runs, rows)
        if on_batch is not None:
            on_batch(pruned)
        if not full:
            return pruned


class Retention:
    """A worker's standing retention: prune runs that ended more than `keep` seconds ago.

    It works in the background of the worker's own runs: small batches, and
    after each full one a pause as long as the batch took, so that pruning a
    backlog holds the database (SQLite's one write lock) at most half the
    time.

    Args:
        store: The store.
        keep: Seconds an ended run is kept.
        every: Seconds between prunes.
        batch: Top-level runs per transaction.
        metrics: Where the runs it deletes are counted (`tidemill_runs_pruned_total`).
    """

    def __init__(
        self,
        store: Store,
        keep: float,
        *,
        every: float = 60.0,
        batch: int = BACKGROUND_BATCH,
        metrics: Metrics | None = None,
    ) -> None:
        self.store = store
        self.metrics = metrics
        self.keep = check_keep(keep, "keep_runs")
        self.every = every
        self.batch = batch
        self.pruned = 0
        """Top-level runs this policy deleted."""

    async def once(self) -> int:
        """Prune once, every full batch; how many top-level runs went."""
        now = time.time()
        deleted = 0
        while True:
            started = time.monotonic()
            runs, _rows, full = await prune_batch(
                self.store, before=now - self.keep, batch=self.batch
            )
            deleted += runs
            self.pruned += runs
            if self.metrics is not None:
                self.metrics.runs_pruned(runs)
            if not full:
                break
            await asyncio.sleep(time.monotonic() - started)
        if deleted:
            log.info("retention: pruned %d run(s) that ended %gs or more ago", deleted, self.keep)
        return deleted

    async def run(self, stop: asyncio.Event) -> None:
        """Prune every `every` seconds until `stop` is set; a failed prune is tried again."""
        while not stop.is_set():
            try:
                await self.once()
            except StoreError as exc:
                log.warning("retention: pruning failed, will retry: %s", exc)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=self.every)
