"""`run_page`: one page of the top-level runs a caller may see, newest first, by keyset.

A page is read after the `(created_at, id)` of the last row of the page
before it, so a page costs the same however deep it is, and runs submitted
meanwhile neither repeat nor hide rows. What a caller may see (`RunReach`)
is filtered in SQL on the run's `workspace`, `folder` and `path` (columns
generated from its source, migration 0009, each indexed with `created_at`)
and on who it runs as; the server then checks each row exactly against the
permission module. `RunFilters` (a folder, a time range, who started a run)
walk the same indexes, and `run_costs` sums a page's model calls in one
aggregate over `tm_usage`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from tidemill.store._rows import RunRow
from tidemill.store._runs import _STORED, SHOWN_STATUS
from tidemill.store._tx import Tx

__all__ = ["RunCost", "RunFilters", "RunReach", "event_tail", "run_costs", "run_page"]

_COLUMNS = ", ".join(f"r.{name.strip()}" for name in RunRow.COLUMNS.split(","))


@dataclass(frozen=True, slots=True)
class RunReach:
    """Which top-level runs a page may hold.

    Examples:
        >>> RunReach("w", run_as="max", folders=("u/max",)).everything
        False
    """

    workspace: str | None
    """Only runs of this workspace (None: of any, and runs with no source)."""
    everything: bool = False
    """Every run of `workspace` (a workspace admin); else only `run_as`'s and those of
    `folders` and `paths`."""
    unsourced: bool = False
    """Also the runs with no source (submitted from Python, not from a workspace path)."""
    run_as: str | None = None
    """Runs that run as this user."""
    folders: tuple[str, ...] = ()
    """Runs of paths in these folders (`f/team`, `u/max`)."""
    paths: tuple[str, ...] = ()
    """Runs of these paths."""
    within: tuple[str, ...] | None = None
    """Further, only runs of paths that start with one of these (a token's scopes);
    None: no such bound."""


@dataclass(frozen=True, slots=True)
class RunFilters:
    """A page's further filters, each walked on an index with `created_at` (migration 0009).

    Examples:
        >>> RunFilters(path_prefix="f/team/sub/").folder
        'f/team'
    """

    path_prefix: str | None = None
    """Only runs of paths in this folder (`f/team/`, `u/max/`), starting with it."""
    started_after: float | None = None
    """Only runs submitted at or after this time (seconds since the epoch)."""
    started_before: float | None = None
    """Only runs submitted before this time (seconds since the epoch)."""
    started_by: str | None = None
    """Only runs that run as this user (who started them)."""

    @property
    def folder(self) -> str | None:
        """The folder `path_prefix` names (`f/team`), walked on its index."""
        if self.path_prefix is None:
            return None
        return "/".join(self.path_prefix.split("/")[:2])


@dataclass(frozen=True, slots=True)
class RunCost:
    """What a run's model calls (and its child runs') cost."""

    cost_usd: float | None
    """The sum over its priced calls; None: none was priced."""
    calls: int
    """How many model calls it made."""
    unpriced: int
    """How many of them have no price (left out of `cost_usd`)."""


def _common(
    reach: RunReach,
    before: tuple[float, str] | None,
    status: str | None,
    flow: str | None,
    path: str | None,
    filters: RunFilters | None = None,
) -> tuple[list[str], list[Any]]:
    """What every row of the page fits, whichever way it is reached."""
    filters = filters or RunFilters()
    where: list[str] = ["r.parent_id IS NULL"]
    params: list[Any] = []
    if reach.workspace is not None:
        own = "r.workspace = ?"
        params.append(reach.workspace)
        where.append(f"({own} OR r.workspace IS NULL)" if reach.unsourced else own)
    if before is not None:
        # `created_at <= ?` alone lets the planner walk an index from there.
        where.append("r.created_at <= ? AND (r.created_at < ? OR r.id < ?)")
        params.extend((before[0], before[0], before[1]))
    if status is not None:
        stored = _STORED.get(status, (status,))
        where.append(f"r.status IN ({', '.join('?' for _ in stored)})")
        params.extend(stored)
        if status in _STORED:  # shown statuses read from the jobs: filter on what is shown
            where.append(f"({SHOWN_STATUS}) = ?")
            params.append(status)
    if flow is not None:
        where.append("r.flow_name = ?")
        params.append(flow)
    if path is not None:
        where.append("r.path = ?")
        params.append(path)
    if filters.path_prefix is not None:
        where.append("r.folder = ?")
        params.append(filters.folder)
        prefix = filters.path_prefix
        if len(prefix) > len(f"{filters.folder}/"):
            where.append("substr(r.path, 1, ?) = ?")
            params.extend((len(prefix), prefix))
    if filters.started_after is not None:
        where.append("r.created_at >= ?")
        params.append(filters.started_after)
    if filters.started_before is not None:
        where.append("r.created_at < ?")
        params.append(filters.started_before)
    if filters.started_by is not None:
        where.append("r.run_as = ?")
        params.append(filters.started_by)
    if reach.within is not None:
        bound = []
        for prefix in reach.within:
            bound.append("substr(r.path, 1, ?) = ?")
            params.extend((len(prefix), prefix))
        where.append(f"({' OR '.join(bound)})" if bound else "1 = 0")
    return where, params


def _ways(reach: RunReach) -> list[tuple[str, tuple[Any, ...]]]:
    """Each way a run is in `reach`, as a condition each index can walk."""
    ways: list[tuple[str, tuple[Any, ...]]] = []
    if reach.run_as is not None:
        ways.append(("r.run_as = ?", (reach.run_as,)))
    ways.extend(("r.folder = ?", (folder,)) for folder in reach.folders)
    ways.extend(("r.path = ?", (path,)) for path in reach.paths)
    if reach.unsourced:
        ways.append(("r.workspace IS NULL", ()))
    return ways


def _narrowed(reach: RunReach, path: str) -> RunReach:
    """`reach` for the runs of one path: all of them, or only `run_as`'s."""
    folder = "/".join(path.split("/")[:2])
    if folder in reach.folders or path in reach.paths:
        return replace(reach, everything=True, unsourced=False)
    return replace(reach, folders=(), paths=(), unsourced=False)


def _filtered(reach: RunReach, filters: RunFilters) -> RunReach:
    """`reach` for a page under `filters`: each way walks the index of what it filters on."""
    if filters.path_prefix is not None:
        folder, prefix = filters.folder, filters.path_prefix
        if reach.everything or folder in reach.folders:
            return replace(reach, everything=True, unsourced=False)
        paths = tuple(p for p in reach.paths if p.startswith(prefix))
        return replace(reach, folders=(), paths=paths, unsourced=False)
    own = filters.started_by is not None and filters.started_by == reach.run_as
    if own and not reach.everything:  # every run of one's own is seen: walk only those
        return replace(reach, folders=(), paths=(), unsourced=False)
    return reach


def run_page(
    tx: Tx,
    reach: RunReach,
    *,
    limit: int = 50,
    before: tuple[float, str] | None = None,
    status: str | None = None,
    flow: str | None = None,
    path: str | None = None,
    filters: RunFilters | None = None,
) -> list[tuple[RunRow, str]]:
    """Top-level runs within `reach`, newest first, each with its status as shown.

    A caller who sees every run of the workspace walks the newest-first
    index once; another walks one index per way it sees runs (its own, each
    folder, each item granted to it), `limit` rows at most each, and the
    page is the newest `limit` of those.

    Args:
        tx: The transaction.
        reach: Which runs may be listed.
        limit: At most this many.
        before: The `(created_at, id)` of the last run of the page before: only older ones.
        status: Only runs with this status as shown (`SHOWN_STATUS`).
        flow: Only runs of the flow of this name.
        path: Only runs of this workspace path.
        filters: Only runs of a folder, submitted in a time range, or started by a user.
    """
    if path is not None and not reach.everything:
        reach = _narrowed(reach, path)
    filters = filters or RunFilters()
    reach = _filtered(reach, filters)
    ways = None if reach.everything else _ways(reach)
    split = reach.everything and reach.unsourced and reach.workspace is not None
    if split and filters.started_by is not None:
        # `workspace = ? OR workspace IS NULL` walks no index: one way for each.
        ways = [("r.workspace = ?", (reach.workspace,)), ("r.workspace IS NULL", ())]
        reach = replace(reach, workspace=None, unsourced=False)
    where, params = _common(reach, before, status, flow, path, filters)
    order = "ORDER BY r.created_at DESC, r.id DESC LIMIT ?"
    select = f"SELECT {_COLUMNS}, {SHOWN_STATUS} AS shown FROM tm_runs r"
    if ways is None:
        sql = f"{select} WHERE {' AND '.join(where)} {order}"
        rows = tx.all(sql, (*params, limit))
    else:
        if not ways:
            return []
        branches: list[str] = []
        values: list[Any] = []
        for index, (test, args) in enumerate(ways):
            branches.append(
                f"SELECT id FROM (SELECT r.id FROM tm_runs r WHERE {' AND '.join(where)} "
                f"AND {test} {order}) w{index}"
            )
            values.extend((*params, *args, limit))
        sql = f"{select} WHERE r.id IN ({' UNION '.join(branches)}) {order}"
        rows = tx.all(sql, (*values, limit))
    return [(RunRow.of(tuple(row[:-1])), str(row[-1])) for row in rows]


def run_costs(tx: Tx, run_ids: Sequence[str]) -> dict[str, RunCost]:
    """What each top-level run's model calls cost (its child runs' too), in one query.

    Runs without model calls are left out.
    """
    if not run_ids:
        return {}
    marks = ", ".join("?" for _ in run_ids)
    rows = tx.all(
        "SELECT root_id, SUM(cost_usd), COUNT(*), COUNT(cost_usd) FROM tm_usage "
        f"WHERE root_id IN ({marks}) GROUP BY root_id",
        tuple(run_ids),
    )
    return {
        str(root): RunCost(
            None if priced == 0 else float(total), int(calls), int(calls) - int(priced)
        )
        for root, total, calls, priced in rows
    }


def event_tail(tx: Tx, root_id: str, count: int, *, run_id: str | None = None) -> int:
    """The event id to read after for a run's last `count` events (0: from its first)."""
    where, params = ("", ()) if run_id is None else (" AND run_id = ?", (run_id,))
    if count == 0:
        row = tx.one(f"SELECT MAX(id) FROM tm_events WHERE root_id = ?{where}", (root_id, *params))
        return 0 if row is None or row[0] is None else int(row[0])
    row = tx.one(
        f"SELECT id FROM tm_events WHERE root_id = ?{where} ORDER BY id DESC LIMIT 1 OFFSET ?",
        (root_id, *params, count),
    )
    return 0 if row is None else int(row[0])
