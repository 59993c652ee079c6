"""`run_page`: one page of the top-level runs a caller may see, newest first, by keyset.

A page is read after the `(created_at, id)` of the last row of the page
before it, so a page costs the same however deep it is, and runs submitted
meanwhile neither repeat nor hide rows. What a caller may see (`RunReach`)
is filtered in SQL on the run's `workspace`, `folder` and `path` (columns
generated from its source, migration 0009, each indexed with `created_at`)
and on who it runs as; the server then checks each row exactly against the
permission module.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from tidemill.store._rows import RunRow
from tidemill.store._runs import _STORED, SHOWN_STATUS
from tidemill.store._tx import Tx

__all__ = ["RunReach", "run_page"]

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


def _common(
    reach: RunReach,
    before: tuple[float, str] | None,
    status: str | None,
    flow: str | None,
    path: str | None,
) -> tuple[list[str], list[Any]]:
    """What every row of the page fits, whichever way it is reached."""
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


def run_page(
    tx: Tx,
    reach: RunReach,
    *,
    limit: int = 50,
    before: tuple[float, str] | None = None,
    status: str | None = None,
    flow: str | None = None,
    path: str | None = None,
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
    """
    if path is not None and not reach.everything:
        reach = _narrowed(reach, path)
    where, params = _common(reach, before, status, flow, path)
    order = "ORDER BY r.created_at DESC, r.id DESC LIMIT ?"
    select = f"SELECT {_COLUMNS}, {SHOWN_STATUS} AS shown FROM tm_runs r"
    if reach.everything:
        sql = f"{select} WHERE {' AND '.join(where)} {order}"
        rows = tx.all(sql, (*params, limit))
    else:
        ways = _ways(reach)
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
