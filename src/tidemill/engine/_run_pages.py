"""Runs and approvals read for a caller who sees only some of them.

A page of runs, and approvals with their runs.

The server asks these (and filters each row exactly against the caller's
permissions); `AsyncEngine.runs` and `AsyncEngine.approvals` list everything.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tidemill.engine._run_info import RunInfo, run_info
from tidemill.errors import RunNotFound
from tidemill.store import ApprovalRow, RunReach, RunRow, Tx, run_page

if TYPE_CHECKING:
    from tidemill.engine._engine import AsyncEngine

__all__ = ["RunReach", "approval_with_run", "approvals_with_runs", "runs_page"]


async def runs_page(
    engine: AsyncEngine,
    reach: RunReach,
    *,
    limit: int = 50,
    before: tuple[float, str] | None = None,
    status: str | None = None,
    flow: str | None = None,
    path: str | None = None,
) -> list[RunInfo]:
    """Top-level runs within `reach`, newest first, older than `before` (see `run_page`)."""

    def read(tx: Tx) -> list[RunInfo]:
        rows = run_page(tx, reach, limit=limit, before=before, status=status, flow=flow, path=path)
        return [run_info(tx, run, shown) for run, shown in rows]

    infos: list[RunInfo] = await engine._transact(read)
    return infos


async def approvals_with_runs(
    engine: AsyncEngine, *, status: str | None = "pending", run_id: str | None = None
) -> list[tuple[ApprovalRow, RunRow]]:
    """Approvals (oldest first), each with its top-level run, read in one transaction."""

    def read(tx: Tx) -> list[tuple[ApprovalRow, RunRow]]:
        runs: dict[str, RunRow | None] = {}
        found = []
        for approval in tx.approvals(status=status, root_id=run_id):
            if approval.root_id not in runs:
                runs[approval.root_id] = tx.run(approval.root_id)
            run = runs[approval.root_id]
            if run is not None:
                found.append((approval, run))
        return found

    rows: list[tuple[ApprovalRow, RunRow]] = await engine._transact(read)
    return rows


async def approval_with_run(engine: AsyncEngine, approval_id: str) -> tuple[ApprovalRow, RunRow]:
    """An approval and its top-level run.

    Raises:
        RunNotFound: No such approval.
    """

    def read(tx: Tx) -> tuple[ApprovalRow, RunRow]:
        approval = tx.approval(approval_id)
        run = None if approval is None else tx.run(approval.root_id)
        if approval is None or run is None:
            raise RunNotFound(
                f"No approval {approval_id} in this store.",
                hint="List pending approvals with `tidemill approvals list`.",
                context={"approval_id": approval_id},
            )
        return approval, run

    found: tuple[ApprovalRow, RunRow] = await engine._transact(read)
    return found
