"""`WaitQueries`: steps waiting for a time or an event, and the events sent to runs.

A `sleep` step's job waits (status `waiting`, held by no worker) with a row in
`tm_waits` whose `due_at` is its end; a `wait_for_event` step's with the
event's workspace, path, name and key, and `due_at` its deadline (None: none).
Nothing polls a wait: a worker's sweep asks for the few rows due
(`due_waits`, one indexed range read however many wait), and sending an event
looks up its waiters by their key (`event_waiters`).

An event no step waits for is kept in `tm_signals` until `keep_until`; the
first step to wait for its name and key takes it (`take_signal`). A sender's
`dedupe_id` makes a second send of the same event a no-op.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tidemill.store._events import EventQueries
from tidemill.store._statements import dumps

__all__ = ["SignalRow", "WaitQueries", "WaitRow"]

_WAIT = "job_id, root_id, run_id, kind, workspace, path, name, key, due_at, created_at"
_SIGNAL = (
    "id, workspace, path, name, key, payload, dedupe_id, sent_by, sent_at, keep_until, taken_by"
)


@dataclass(frozen=True, slots=True)
class WaitRow:
    """A step waiting for a time (`kind` `sleep`) or an event (`event`)."""

    job_id: int
    root_id: str
    run_id: str
    kind: str
    workspace: str
    """The workspace of the run's flow ('' for a flow run from a file)."""
    path: str
    """The workspace path of the run's flow ('' for a flow run from a file)."""
    name: str | None
    """The event's name (`event` waits)."""
    key: str | None
    """The event's key (`event` waits)."""
    due_at: float | None
    """A sleep's end, or an event wait's deadline (None: it waits for ever)."""
    created_at: float

    @classmethod
    def of(cls, row: tuple[Any, ...]) -> WaitRow:
        """A wait from a row of `_WAIT`'s columns."""
        job_id, root_id, run_id, kind, workspace, path, name, key, due_at, created_at = row
        return cls(
            int(job_id), str(root_id), str(run_id), str(kind), str(workspace), str(path),
            name, key, None if due_at is None else float(due_at), float(created_at),
        )  # fmt: skip


@dataclass(frozen=True, slots=True)
class SignalRow:
    """An event sent to runs: taken (`taken_by`, a job id) or kept until `keep_until`."""

    id: int
    workspace: str
    path: str
    name: str
    key: str
    payload: Any
    dedupe_id: str | None
    sent_by: str | None
    sent_at: float
    keep_until: float
    taken_by: str | None
    """The jobs that took it, comma-separated (None: kept for the next step to wait for it)."""

    @classmethod
    def of(cls, row: tuple[Any, ...]) -> SignalRow:
        """An event from a row of `_SIGNAL`'s columns."""
        sid, ws, path, name, key, payload, dedupe, by, sent, keep, taken = row
        return cls(
            int(sid), str(ws), str(path), str(name), str(key), json.loads(payload), dedupe, by,
            float(sent), float(keep), taken,
        )  # fmt: skip


class WaitQueries(EventQueries):
    """The statements about `tm_waits` (waiting steps) and `tm_signals` (events sent)."""

    # --- waits ------------------------------------------------------------

    def insert_wait(self, wait: WaitRow) -> None:
        """Record that a (parked) job waits for a time or an event."""
        self.execute(
            f"INSERT INTO tm_waits ({_WAIT}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                wait.job_id, wait.root_id, wait.run_id, wait.kind, wait.workspace, wait.path,
                wait.name, wait.key, wait.due_at, wait.created_at,
            ),
        )  # fmt: skip

    def delete_wait(self, job_id: int) -> bool:
        """Forget a job's wait (it ended); False when there was none."""
        cursor = self.execute("DELETE FROM tm_waits WHERE job_id = ?", (job_id,))
        return bool(cursor.rowcount == 1)

    def due_waits(self, now: float, limit: int) -> list[WaitRow]:
        """Up to `limit` waits whose time came, earliest first (locked; others skip them)."""
        skip = " FOR UPDATE SKIP LOCKED" if self.dialect == "postgres" else ""
        rows = self.all(
            f"SELECT {_WAIT} FROM tm_waits WHERE due_at IS NOT NULL AND due_at <= ? "
            f"ORDER BY due_at LIMIT ?{skip}",
            (now, limit),
        )
        return [WaitRow.of(row) for row in rows]

    def next_wait_due(self) -> float | None:
        """When the earliest wait with a time ends (None: no wait has one)."""
        row = self.one("SELECT MIN(due_at) FROM tm_waits WHERE due_at IS NOT NULL")
        return None if row is None or row[0] is None else float(row[0])

    def event_waiters(self, workspace: str, path: str, name: str, key: str) -> list[WaitRow]:
        """The waits for this event, oldest first (locked)."""
        rows = self.all(
            f"SELECT {_WAIT} FROM tm_waits WHERE kind = 'event' AND workspace = ? AND path = ? "
            f"AND name = ? AND key = ? ORDER BY created_at, job_id{self._lock}",
            (workspace, path, name, key),
        )
        return [WaitRow.of(row) for row in rows]

    def tree_waits(self, root_id: str) -> list[WaitRow]:
        """The waits of a run's tree (for showing what it waits for)."""
        rows = self.all(
            f"SELECT {_WAIT} FROM tm_waits WHERE root_id = ? ORDER BY job_id", (root_id,)
        )
        return [WaitRow.of(row) for row in rows]

    def roots_waits(self, root_ids: list[str]) -> list[WaitRow]:
        """The waits of these runs' trees (a page of runs' at once), oldest first."""
        if not root_ids:
            return []
        marks = ", ".join("?" for _ in root_ids)
        rows = self.all(
            f"SELECT {_WAIT} FROM tm_waits WHERE root_id IN ({marks}) ORDER BY created_at, job_id",
            tuple(root_ids),
        )
        return [WaitRow.of(row) for row in rows]

    def count_waits(self) -> dict[str, int]:
        """How many steps wait, by kind (`sleep`, `event`)."""
        rows = self.all("SELECT kind, COUNT(*) FROM tm_waits GROUP BY kind")
        return {str(kind): int(count) for kind, count in rows}

    # --- events sent --------------------------------------------------------

    def lock_event(self, workspace: str, path: str, name: str, key: str) -> None:
        """Serialise the transactions about one event until this one ends (PostgreSQL).

        Sending an event and a step starting to wait for it each take this
        lock first, so one always sees what the other wrote. SQLite has one
        writer at a time already.
        """
        if self.dialect == "postgres":
            self.execute(
                "SELECT pg_advisory_xact_lock(hashtextextended(?, 0))",
                ("\x1f".join(("tm_signal", workspace, path, name, key)),),
            )

    def insert_signal(
        self,
        *,
        workspace: str,
        path: str,
        name: str,
        key: str,
        payload: Any,
        dedupe_id: str | None,
        sent_by: str | None,
        now: float,
        keep_until: float,
    ) -> SignalRow | None:
        """Store an event sent; None when one with the same `dedupe_id` was sent before."""
        row = self.one(
            f"INSERT INTO tm_signals ({_SIGNAL.split(', ', 1)[1]}) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, NULL) ON CONFLICT DO NOTHING "
            f"RETURNING {_SIGNAL}",
            (workspace, path, name, key, dumps(payload), dedupe_id, sent_by, now, keep_until),
        )
        return None if row is None else SignalRow.of(row)

    def signal_by_dedupe(
        self, workspace: str, path: str, name: str, dedupe_id: str
    ) -> SignalRow | None:
        """The event sent before with this `dedupe_id`."""
        row = self.one(
            f"SELECT {_SIGNAL} FROM tm_signals WHERE workspace = ? AND path = ? AND name = ? "
            "AND dedupe_id = ?",
            (workspace, path, name, dedupe_id),
        )
        return None if row is None else SignalRow.of(row)

    def mark_signal_taken(self, signal_id: int, taken_by: str) -> None:
        """Record which jobs an event was delivered to (it is kept no more)."""
        self.execute("UPDATE tm_signals SET taken_by = ? WHERE id = ?", (taken_by, signal_id))

    def take_signal(
        self, workspace: str, path: str, name: str, key: str, job_id: int, now: float
    ) -> SignalRow | None:
        """Take the oldest kept event with this name and key for `job_id` (None: none kept)."""
        skip = " FOR UPDATE SKIP LOCKED" if self.dialect == "postgres" else ""
        row = self.one(
            f"SELECT {_SIGNAL} FROM tm_signals WHERE taken_by IS NULL AND workspace = ? "
            f"AND path = ? AND name = ? AND key = ? AND keep_until > ? ORDER BY id LIMIT 1{skip}",
            (workspace, path, name, key, now),
        )
        if row is None:
            return None
        signal = SignalRow.of(row)
        self.mark_signal_taken(signal.id, str(job_id))
        return signal

    def kept_signals(
        self,
        *,
        name: str | None = None,
        limit: int = 100,
        after: int = 0,
        now: float | None = None,
        workspaces: Sequence[str] | None = None,
    ) -> list[SignalRow]:
        """Events kept for a step to come and wait for them, oldest first.

        `after` is an event id (those after it), `now` leaves out events whose
        keep ran out before it, `workspaces` keeps to those addressed to these
        workspaces (`""`: the events for runs of no path).
        """
        where = "taken_by IS NULL AND id > ?"
        params: list[object] = [after]
        if name is not None:
            where, params = f"{where} AND name = ?", [*params, name]
        if now is not None:
            where, params = f"{where} AND keep_until > ?", [*params, now]
        if workspaces is not None:
            if not workspaces:
                return []
            marks = ", ".join("?" * len(workspaces))
            where, params = f"{where} AND workspace IN ({marks})", [*params, *workspaces]
        rows = self.all(
            f"SELECT {_SIGNAL} FROM tm_signals WHERE {where} ORDER BY id LIMIT ?",
            (*params, limit),
        )
        return [SignalRow.of(row) for row in rows]

    def prune_signals(self, now: float, limit: int = 500) -> int:
        """Delete up to `limit` events whose keep ran out (taken or not); return how many.

        A taken event stays as long as a kept one would, so a resend with its
        `dedupe_id` is still recognised within that time.
        """
        cursor = self.execute(
            "DELETE FROM tm_signals WHERE id IN (SELECT id FROM tm_signals "
            "WHERE keep_until <= ? ORDER BY keep_until LIMIT ?)",
            (now, limit),
        )
        return int(cursor.rowcount)
