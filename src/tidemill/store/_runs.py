"""`RunQueries`: flow definitions, runs, their JSON payloads, and concurrency gates."""

from __future__ import annotations

import json
import time
from typing import Any

from tidemill.store._events import EventQueries
from tidemill.store._rows import FINISHED_RUN, RunRow
from tidemill.store._statements import dumps

__all__ = ["SHOWN_STATUS", "RunQueries"]

_RUN = RunRow.COLUMNS

_TREE_JOBS = (
    "SELECT 1 FROM tm_jobs j WHERE j.run_id IN (SELECT t.id FROM tm_runs t WHERE t.root_id = r.id)"
)

SHOWN_STATUS = (
    "CASE WHEN r.parent_id IS NOT NULL OR r.status <> 'running' THEN r.status "
    f"WHEN NOT EXISTS ({_TREE_JOBS} AND j.started_at IS NOT NULL) THEN 'queued' "
    f"WHEN NOT EXISTS ({_TREE_JOBS} AND j.status IN ('queued', 'running')) "
    "AND (EXISTS (SELECT 1 FROM tm_approvals a WHERE a.root_id = r.id AND a.status = 'pending') "
    "OR EXISTS (SELECT 1 FROM tm_waits w WHERE w.root_id = r.id)) "
    "THEN 'waiting' ELSE 'running' END"
)
"""A run's status as shown (`RunInfo.status`), as SQL over `tm_runs r`.

The store keeps a top-level run `running` from its start (or from its
concurrency slot) to its end; what is shown is read from its tree's jobs:
`queued` while no worker has claimed any of its steps yet, `waiting` while
nothing is left but pending approvals and steps that sleep or wait for an
event, else `running`. Child runs, and runs
in any other status, show the status stored.
"""

_STORED = {"queued": ("queued", "running"), "running": ("running",), "waiting": ("running",)}
"""For a shown status, the stored ones it comes from."""


class RunQueries(EventQueries):
    """The statements about runs: definitions, runs, payloads and concurrency gates."""

    # --- definitions ----------------------------------------------------

    def put_definition(self, digest: str, name: str, body: str, now: float) -> None:
        """Store a flow definition under its content digest (once)."""
        self.execute(
            "INSERT INTO tm_definitions (digest, name, body, created_at) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (digest) DO NOTHING",
            (digest, name, body, now),
        )

    def definition(self, digest: str) -> str | None:
        """A stored flow definition's JSON text."""
        row = self.one("SELECT body FROM tm_definitions WHERE digest = ?", (digest,))
        return None if row is None else str(row[0])

    # --- runs -----------------------------------------------------------

    def insert_run(self, run: RunRow) -> None:
        """Add a run."""
        self.execute(
            f"INSERT INTO tm_runs ({_RUN}) VALUES ({', '.join('?' * 18)})",
            (
                run.id,
                run.root_id,
                run.parent_id,
                run.parent_job,
                run.child_index,
                run.scope,
                run.flow_name,
                run.digest,
                run.status,
                run.concurrency_key,
                run.created_at,
                run.started_at,
                run.finished_at,
                None if run.error is None else dumps(run.error),
                run.run_as,
                None if run.source is None else dumps(run.source),
                run.memory_id,
                int(run.masked),
            ),
        )
        self.add_event(run.id, *_created(run), now=run.created_at, root_id=run.root_id)

    def run_ids_starting(self, prefix: str, limit: int = 10) -> list[str]:
        """The ids of top-level runs that start with `prefix` (hex digits and dashes), in order."""
        rows = self.all(
            "SELECT id FROM tm_runs WHERE parent_id IS NULL AND id LIKE ? ORDER BY id LIMIT ?",
            (prefix + "%", limit),
        )
        return [str(row[0]) for row in rows]

    def run(self, run_id: str, *, lock: bool = False) -> RunRow | None:
        """A run by id; `lock` holds its row until the transaction ends."""
        suffix = self._lock if lock else ""
        row = self.one(f"SELECT {_RUN} FROM tm_runs WHERE id = ?{suffix}", (run_id,))
        return None if row is None else RunRow.of(row)

    def run_and_payload(self, run_id: str, key: str) -> tuple[RunRow, Any] | None:
        """A run and one of its payloads (None when absent), in one query."""
        columns = ", ".join(f"r.{name.strip()}" for name in _RUN.split(","))
        row = self.one(
            f"SELECT {columns}, p.body FROM tm_runs r LEFT JOIN tm_payloads p "
            "ON p.run_id = r.id AND p.key = ? WHERE r.id = ?",
            (key, run_id),
        )
        if row is None:
            return None
        *run, body = row
        return RunRow.of(tuple(run)), None if body is None else json.loads(body)

    def set_run(self, run_id: str, **fields: Any) -> None:
        """Update a run's columns (`error` is given as a dict)."""
        if "error" in fields and fields["error"] is not None:
            fields["error"] = dumps(fields["error"])
        assignments = ", ".join(f"{name} = ?" for name in fields)
        self.execute(f"UPDATE tm_runs SET {assignments} WHERE id = ?", (*fields.values(), run_id))
        status = fields.get("status")
        if status is not None:
            data: dict[str, Any] = {"status": status}
            if fields.get("error") is not None:
                data["error"] = json.loads(fields["error"])
            kind = "run_finished" if status in FINISHED_RUN else f"run_{status}"
            when = fields.get("finished_at") or fields.get("started_at") or time.time()
            kind = "run_started" if kind == "run_running" else kind
            self.add_event(run_id, kind, data, now=float(when))

    def runs(
        self,
        *,
        status: str | None = None,
        flow: str | None = None,
        limit: int = 50,
        before: tuple[float, str] | None = None,
    ) -> list[tuple[RunRow, str]]:
        """Top-level runs, newest first, each with its status as shown (`SHOWN_STATUS`).

        `status` filters on the status as shown, before the `limit`; `before`
        is the `(created_at, id)` of the last run of the page before (keyset).
        """
        where: list[str] = ["r.parent_id IS NULL"]
        params: list[Any] = []
        if before is not None:
            where.append("r.created_at <= ? AND (r.created_at < ? OR r.id < ?)")
            params.extend((before[0], before[0], before[1]))
        if status is not None:
            stored = _STORED.get(status, (status,))
            where.append(f"r.status IN ({', '.join('?' for _ in stored)})")
            params.extend(stored)
        if flow is not None:
            where.append("r.flow_name = ?")
            params.append(flow)
        columns = ", ".join(f"r.{name.strip()}" for name in _RUN.split(","))
        sql = (
            f"SELECT {columns}, {SHOWN_STATUS} AS shown FROM tm_runs r WHERE {' AND '.join(where)}"
        )
        if status in _STORED:  # shown statuses read from the jobs: filter on what is shown
            sql = f"SELECT * FROM ({sql}) r WHERE r.shown = ?"
            params.append(status)
        rows = self.all(f"{sql} ORDER BY r.created_at DESC, r.id DESC LIMIT ?", (*params, limit))
        return [(RunRow.of(tuple(row[:-1])), str(row[-1])) for row in rows]

    def shown_status(self, run_id: str) -> str | None:
        """A run's status as shown (`SHOWN_STATUS`); None when there is no such run."""
        row = self.one(f"SELECT {SHOWN_STATUS} FROM tm_runs r WHERE r.id = ?", (run_id,))
        return None if row is None else str(row[0])

    def children(self, parent_job: int) -> list[RunRow]:
        """The child runs of a container job, in their declared order."""
        rows = self.all(
            f"SELECT {_RUN} FROM tm_runs WHERE parent_job = ? ORDER BY child_index",
            (parent_job,),
        )
        return [RunRow.of(row) for row in rows]

    def set_parent_job(self, run_id: str, parent_job: int) -> None:
        """Hand a child run to another job of the same step (a tool call's child, on a retry)."""
        self.execute("UPDATE tm_runs SET parent_job = ? WHERE id = ?", (parent_job, run_id))

    def tree(self, root_id: str) -> list[RunRow]:
        """A top-level run and all its descendants, oldest first."""
        rows = self.all(
            f"SELECT {_RUN} FROM tm_runs WHERE root_id = ? ORDER BY created_at, id", (root_id,)
        )
        return [RunRow.of(row) for row in rows]

    # --- payloads -------------------------------------------------------

    def put_payload(self, run_id: str, key: str, value: Any) -> None:
        """Store a JSON value for a run (its input, context, result, loop items)."""
        self.execute(
            "INSERT INTO tm_payloads (run_id, key, body) VALUES (?, ?, ?) "
            "ON CONFLICT (run_id, key) DO UPDATE SET body = excluded.body",
            (run_id, key, dumps(value)),
        )

    def payload(self, run_id: str, key: str, default: Any = None) -> Any:
        """A run's stored JSON value, or `default`."""
        row = self.one("SELECT body FROM tm_payloads WHERE run_id = ? AND key = ?", (run_id, key))
        return default if row is None else json.loads(row[0])

    # --- concurrency gates ---------------------------------------------

    def lock_gate(self, key: str) -> None:
        """Serialise the transactions that start or finish runs under one concurrency key."""
        self.execute("INSERT INTO tm_gates (key) VALUES (?) ON CONFLICT (key) DO NOTHING", (key,))
        self.execute(f"SELECT key FROM tm_gates WHERE key = ?{self._lock}", (key,))

    def gate_active(self, key: str) -> int:
        """How many top-level runs under `key` hold a slot."""
        row = self.one(
            "SELECT COUNT(*) FROM tm_runs WHERE concurrency_key = ? AND parent_id IS NULL "
            "AND status IN ('running', 'waiting')",
            (key,),
        )
        return 0 if row is None else int(row[0])

    def gate_next(self, key: str) -> RunRow | None:
        """The oldest run waiting for a slot under `key`."""
        row = self.one(
            f"SELECT {_RUN} FROM tm_runs WHERE concurrency_key = ? AND status = 'queued' "
            "ORDER BY created_at, id LIMIT 1",
            (key,),
        )
        return None if row is None else RunRow.of(row)

    def gate_ahead(self, key: str, run: RunRow) -> int:
        """How many runs wait for a slot under `key` ahead of `run` (they start first)."""
        row = self.one(
            "SELECT COUNT(*) FROM tm_runs WHERE concurrency_key = ? AND status = 'queued' "
            "AND (created_at < ? OR (created_at = ? AND id < ?))",
            (key, run.created_at, run.created_at, run.id),
        )
        return 0 if row is None else int(row[0])


def _created(run: RunRow) -> tuple[str, dict[str, Any]]:
    """The event of a new run: a top-level run is queued, a child run starts."""
    if run.parent_id is None:
        return "run_queued", {"flow": run.flow_name, "status": run.status}
    return "run_started", {
        "flow": run.flow_name,
        "parent_id": run.parent_id,
        "parent_job": run.parent_job,
        "scope": json.loads(run.scope),
    }
