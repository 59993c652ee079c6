"""Runs and approvals read for a caller who sees only some of them.

A page of runs (with what each cost, and what those sleeping or waiting
for an event wait for), approvals with their runs, a run's
flow definition and input as stored, a job with the masked copy of its
inputs and result, and where to start a run's last events.

The server asks these (and filters each row exactly against the caller's
permissions); `AsyncEngine.runs` and `AsyncEngine.approvals` list everything.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from tidemill.engine._run_info import RunInfo, run_info
from tidemill.errors import RunNotFound
from tidemill.flows import iso_time
from tidemill.store import ApprovalRow, JobRow, RunReach, RunRow, Tx, WaitRow, run_page
from tidemill.store._run_pages import RunCost, RunFilters, event_tail, run_costs

if TYPE_CHECKING:
    from tidemill.engine._engine import AsyncEngine

__all__ = [
    "RunCost",
    "RunFilters",
    "RunReach",
    "approval_with_run",
    "approvals_with_runs",
    "job_view",
    "run_definition",
    "run_input",
    "runs_page",
    "tail_start",
    "wait_line",
    "waiting_for",
]


async def runs_page(
    engine: AsyncEngine,
    reach: RunReach,
    *,
    limit: int = 50,
    before: tuple[float, str] | None = None,
    status: str | None = None,
    flow: str | None = None,
    path: str | None = None,
    filters: RunFilters | None = None,
) -> list[tuple[RunInfo, RunCost | None]]:
    """Top-level runs within `reach`, newest first, older than `before` (see `run_page`).

    Each comes with what its model calls cost (None: it made none), read for
    the whole page in one query.
    """

    def read(tx: Tx) -> list[tuple[RunInfo, RunCost | None]]:
        rows = run_page(
            tx, reach, limit=limit, before=before, status=status, flow=flow, path=path,
            filters=filters or RunFilters(),
        )  # fmt: skip
        costs = run_costs(tx, [run.id for run, _ in rows])
        return [(run_info(tx, run, shown), costs.get(run.id)) for run, shown in rows]

    infos: list[tuple[RunInfo, RunCost | None]] = await engine._transact(read)
    return infos


def wait_line(wait: WaitRow) -> str:
    """A wait for a time or an event in a few words, as a list of runs shows it.

    Examples:
        >>> from tidemill.store import WaitRow
        >>> wait_line(WaitRow(1, "r", "r", "sleep", "", "", None, None, 0.0, 0.0))
        'sleeping until 1970-01-01T00:00:00Z'
        >>> wait_line(WaitRow(1, "r", "r", "event", "", "", "paid", "A-1", None, 0.0))
        "event 'paid' with key 'A-1'"
    """
    if wait.kind == "sleep":
        return f"sleeping until {iso_time(wait.due_at or wait.created_at)}"
    return f"event {wait.name!r} with key {wait.key!r}"


async def waiting_for(engine: AsyncEngine, run_ids: list[str]) -> dict[str, str]:
    """For each of these top-level runs with a step sleeping or waiting for an event: what, briefly.

    One query for the whole page (see `wait_line`); runs waiting only for
    people, or not waiting, are not in the answer.
    """
    rows: list[WaitRow] = await engine._transact(lambda tx: tx.roots_waits(run_ids))
    lines: dict[str, str] = {}
    for wait in rows:
        lines.setdefault(wait.root_id, wait_line(wait))
    return lines


def _run(tx: Tx, run_id: str) -> RunRow:
    run = tx.run(run_id)
    if run is None:
        raise RunNotFound(
            f"No run {run_id} in this store.", hint="List runs with `tidemill runs list`.",
            context={"run_id": run_id},
        )  # fmt: skip
    return run


async def run_input(engine: AsyncEngine, run_id: str) -> dict[str, Any]:
    """The input a run was submitted with, as stored.

    Its `$var:`/`$res:` references are unresolved: a worker resolves them in
    memory only, when a step uses them, and stores no plaintext.

    Raises:
        RunNotFound: There is no such run.
    """

    def read(tx: Tx) -> dict[str, Any]:
        context = tx.payload(_run(tx, run_id).id, "context", {}) or {}
        found = context.get("flow_input", {})
        return dict(found) if isinstance(found, dict) else {}

    found: dict[str, Any] = await engine._transact(read)
    return found


async def job_view(engine: AsyncEngine, run_id: str, job_id: int) -> tuple[JobRow, Any]:
    """A job of a run (or of its branches, loops, sub-flows) and what the API shows of it.

    The second value is `{"inputs", "result"}` as the job recorded it, with
    the secrets the job resolved masked (`shown_copy`), or None when it
    recorded none (it has not ended, its step is not a leaf step, it was
    skipped, or it ended before this was recorded).

    Raises:
        RunNotFound: There is no such run, or no such job in it.
    """

    def read(tx: Tx) -> tuple[JobRow, Any]:
        run = _run(tx, run_id)
        job = tx.job(job_id)
        owner = None if job is None else tx.run(job.run_id)
        if job is None or owner is None or owner.root_id != run.root_id:
            raise RunNotFound(
                f"No job {job_id} in run {run_id}.",
                hint=f"List its jobs: GET /api/runs/{run_id}/jobs.",
                context={"run_id": run_id, "job_id": job_id},
            )
        return job, tx.shown(job.run_id, job.id)

    found: tuple[JobRow, Any] = await engine._transact(read)
    return found


async def run_definition(engine: AsyncEngine, run_id: str) -> tuple[RunRow, dict[str, Any]]:
    """A run and the flow definition it executes, as stored with it (a child run: its root's).

    Raises:
        RunNotFound: There is no such run (or its definition is gone).
    """

    def read(tx: Tx) -> tuple[RunRow, dict[str, Any]]:
        run = _run(tx, run_id)
        body = tx.definition(run.digest)
        if body is None:
            raise RunNotFound(
                f"Run {run_id}'s flow definition is not in this store.",
                context={"run_id": run_id, "digest": run.digest},
            )
        return run, json.loads(body)

    found: tuple[RunRow, dict[str, Any]] = await engine._transact(read)
    return found


async def tail_start(engine: AsyncEngine, run_id: str, count: int) -> int:
    """The event id after which a run's last `count` events come (0: its latest event's).

    Raises:
        RunNotFound: There is no such run.
    """

    def read(tx: Tx) -> int:
        run = _run(tx, run_id)
        own = None if run.parent_id is None else run.id
        return event_tail(tx, run.root_id, count, run_id=own)

    start: int = await engine._transact(read)
    return start


async def approvals_with_runs(
    engine: AsyncEngine,
    *,
    status: str | None = "pending",
    run_id: str | None = None,
    limit: int | None = None,
    after: tuple[float, str] | None = None,
) -> list[tuple[ApprovalRow, RunRow]]:
    """Approvals (oldest first), each with its top-level run, read in one transaction.

    `limit` and `after` (`(created_at, id)` of the page before's last) read a page.
    """

    def read(tx: Tx) -> list[tuple[ApprovalRow, RunRow]]:
        runs: dict[str, RunRow | None] = {}
        found = []
        for approval in tx.approvals(status=status, root_id=run_id, limit=limit, after=after):
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
