"""`EventQueries`: a run's events, in order, for live runs (server-sent events).

Every change to a run that a watcher would show (a run or step started or
finished, a log chunk, a model turn, a tool call, a wait and its decision)
adds a row to `tm_events` in the transaction that makes the change, so the
log never disagrees with the run. Events carry their top-level run's
`root_id`: a subscriber to a run sees its child runs' events too. Their ids
only grow; `events(root_id, after=id)` resumes exactly after an event.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from tidemill.store._statements import Statements, dumps

__all__ = ["EventQueries", "EventRow", "started_events_sql"]

_COLUMNS = "root_id, run_id, job_id, step_id, kind, data, at"


@dataclass(frozen=True, slots=True)
class EventRow:
    """One event of a run, as stored in `tm_events`."""

    id: int
    """Its place in the store's events: later events have larger ids."""
    root_id: str
    """The top-level run it belongs to."""
    run_id: str
    """The run (the top-level run, or a child run of it) it is about."""
    job_id: int | None
    """The job (step attempt) it is about, if any."""
    step_id: str | None
    """The step it is about, if any."""
    kind: str
    """What happened: `run_started`, `step_finished`, `log`, `model_turn`, ..."""
    data: dict[str, Any]
    """The kind's details (see the engine's docs, "A run's events")."""
    at: float
    """When it was recorded (seconds since the epoch)."""


def _job_json(dialect: Literal["sqlite", "postgres"], alias: str, reclaimed: bool) -> str:
    """SQL for a claimed job's `step_started` data, from the job's columns under `alias`."""
    if dialect == "postgres":
        extra = ", 'reclaimed', true" if reclaimed else ""
        return (
            f"json_build_object('attempt', {alias}.attempt, 'worker', {alias}.worker{extra})::text"
        )
    extra = ", 'reclaimed', json('true')" if reclaimed else ""
    return f"json_object('attempt', {alias}.attempt, 'worker', {alias}.worker{extra})"


def started_events_sql(
    dialect: Literal["sqlite", "postgres"], source: str, where: str = "", *, reclaimed: bool = False
) -> str:
    """An `INSERT` of one `step_started` event per claimed job of `source`, in id order.

    `source` names the claimed jobs as `j` (`tm_jobs j`, or a CTE: `c j`),
    `where` (` AND ...`) narrows them; the parameters are the event's time,
    then those of `where`.
    """
    return (
        f"INSERT INTO tm_events ({_COLUMNS}) SELECT r.root_id, j.run_id, j.id, j.step_id, "
        f"'step_started', {_job_json(dialect, 'j', reclaimed)}, ? FROM {source} "
        f"JOIN tm_runs r ON r.id = j.run_id{where} ORDER BY j.id"
    )


class EventQueries(Statements):
    """The statements that add a run's events and read them in order."""

    @staticmethod
    def events_statement(
        rows: Sequence[tuple[str, str, int | None, str | None, str, Mapping[str, Any], float]],
    ) -> tuple[str, tuple[Any, ...]]:
        """One PostgreSQL statement adding `rows` in order; run it with `Store.write_one`.

        Each row is `(root_id, run_id, job_id, step_id, kind, data, at)`.
        """
        values = ", ".join("(%s, %s, %s, %s, %s, %s, %s)" for _ in rows)
        params = tuple(
            value
            for root, run, job, step, kind, data, at in rows
            for value in (root, run, job, step, kind, dumps(data), at)
        )
        return f"INSERT INTO tm_events ({_COLUMNS}) VALUES {values} RETURNING id", params

    def add_event(
        self,
        run_id: str,
        kind: str,
        data: Mapping[str, Any],
        *,
        now: float,
        root_id: str | None = None,
        job_id: int | None = None,
        step_id: str | None = None,
    ) -> None:
        """Add one event of `run_id` (its `root_id` is looked up when not given)."""
        if root_id is not None:
            self.execute(
                f"INSERT INTO tm_events ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (root_id, run_id, job_id, step_id, kind, dumps(data), now),
            )
            return
        self.execute(
            f"INSERT INTO tm_events ({_COLUMNS}) SELECT root_id, id, ?, ?, ?, ?, ? "
            "FROM tm_runs WHERE id = ?",
            (job_id, step_id, kind, dumps(data), now, run_id),
        )

    def add_job_events(
        self, job_id: int, events: Sequence[tuple[str, Mapping[str, Any]]], *, now: float
    ) -> None:
        """Add events about a job (its run, root and step are looked up once)."""
        if not events:
            return
        found = self.one(
            "SELECT r.root_id, j.run_id, j.step_id FROM tm_jobs j "
            "JOIN tm_runs r ON r.id = j.run_id WHERE j.id = ?",
            (job_id,),
        )
        if found is None:
            return
        root_id, run_id, step_id = found
        for kind, data in events:
            self.add_event(
                run_id, kind, data, now=now, root_id=root_id, job_id=job_id, step_id=step_id
            )

    def add_started_events(self, job_ids: Sequence[int], *, now: float, reclaimed: bool) -> None:
        """Add a `step_started` event for each of the claimed jobs `job_ids`, in id order."""
        if not job_ids:
            return
        marks = ", ".join("?" for _ in job_ids)
        where = f" AND j.id IN ({marks})"
        sql = started_events_sql(self.dialect, "tm_jobs j", where, reclaimed=reclaimed)
        self.execute(sql, (now, *job_ids))

    def events(
        self, root_id: str, *, after: int = 0, limit: int = 500, run_id: str | None = None
    ) -> list[EventRow]:
        """The events of a top-level run and its child runs after the event `after`, in order.

        With `run_id`, only those about that run.
        """
        where, params = ("", ()) if run_id is None else (" AND run_id = ?", (run_id,))
        rows = self.all(
            f"SELECT id, {_COLUMNS} FROM tm_events WHERE root_id = ? AND id > ?{where} "
            "ORDER BY id LIMIT ?",
            (root_id, after, *params, limit),
        )
        return [
            EventRow(int(id_), root, run, job, step, kind, json.loads(data), float(at))
            for id_, root, run, job, step, kind, data, at in rows
        ]
