"""`ScheduleFireQueries`: a schedule's fires, one row per (schedule, fire time).

A fire is inserted with `ON CONFLICT DO NOTHING` in the transaction that
starts its run (or records it skipped or failed): whoever inserts it first
fires it, and every other scheduler learns so from the answer. When the run
ends, its `outcome` is set once (`WHERE outcome IS NULL`), in the transaction
that starts the schedule's failure or recovery handler.
"""

from __future__ import annotations

import json
from typing import Any

from tidemill.store._statements import Statements

__all__ = ["FIRE_COLUMNS", "ScheduleFireQueries"]

FIRE_COLUMNS = "path, fire_at, status, run_id, version, outcome, handler_id, error, created_at"
"""The columns `fires` answers, in order."""

_ENDED = "('succeeded', 'failed', 'cancelled')"


class ScheduleFireQueries(Statements):
    """The statements about `tm_schedule_fires` (and the schedule items they fire)."""

    def schedule_workspaces(self) -> list[str]:
        """The workspaces that hold at least one live schedule item, by name."""
        rows = self.all(
            "SELECT w.name FROM tm_ws_workspaces w WHERE EXISTS (SELECT 1 FROM tm_ws_items i "
            "WHERE i.workspace = w.name AND i.kind = 'schedule' AND i.deleted_at IS NULL) "
            "ORDER BY w.name"
        )
        return [str(name) for (name,) in rows]

    def schedule_items(self, workspace: str) -> list[tuple[str, int, str, float, str]]:
        """(path, version, updated_by, updated_at, body) of each live schedule item, by path."""
        rows = self.all(
            "SELECT path, version, updated_by, updated_at, body FROM tm_ws_items "
            "WHERE workspace = ? AND kind = 'schedule' AND deleted_at IS NULL ORDER BY path",
            (workspace,),
        )
        return [(str(p), int(v), str(by), float(at), str(body)) for p, v, by, at, body in rows]

    def last_fires(self, workspace: str) -> dict[str, float]:
        """Each schedule's latest recorded fire time (any status), by path."""
        rows = self.all(
            "SELECT path, MAX(fire_at) FROM tm_schedule_fires WHERE workspace = ? GROUP BY path",
            (workspace,),
        )
        return {str(path): float(at) for path, at in rows}

    def insert_fire(
        self,
        workspace: str,
        path: str,
        fire_at: float,
        *,
        status: str,
        version: int,
        now: float,
        run_id: str | None = None,
        error: str | None = None,
    ) -> bool:
        """Record a fire; False when it was already recorded (another scheduler fired it)."""
        row = self.one(
            "INSERT INTO tm_schedule_fires "
            "(workspace, path, fire_at, status, run_id, version, error, created_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (workspace, path, fire_at) DO NOTHING "
            "RETURNING fire_at",
            (workspace, path, fire_at, status, run_id, version, error, now),
        )
        return row is not None

    def set_fire_run(self, workspace: str, path: str, fire_at: float, run_id: str) -> None:
        """The run a recorded fire started."""
        self.execute(
            "UPDATE tm_schedule_fires SET run_id = ? WHERE workspace = ? AND path = ? "
            "AND fire_at = ?",
            (run_id, workspace, path, fire_at),
        )

    def fires(self, workspace: str, path: str, *, limit: int) -> list[tuple[Any, ...]]:
        """A schedule's fires, newest first (`FIRE_COLUMNS`)."""
        return self.all(
            f"SELECT {FIRE_COLUMNS} FROM tm_schedule_fires WHERE workspace = ? AND path = ? "
            "ORDER BY fire_at DESC LIMIT ?",
            (workspace, path, limit),
        )

    def ended_fires(
        self, workspace: str, *, limit: int = 100
    ) -> list[tuple[str, float, str, str, dict[str, Any] | None]]:
        """(path, fire_at, run_id, run status, run error) of fires whose run ended, oldest first.

        Only those whose `outcome` is not set yet: the partial index on
        `run_id WHERE outcome IS NULL` keeps this cheap.
        """
        rows = self.all(
            "SELECT f.path, f.fire_at, f.run_id, r.status, r.error FROM tm_schedule_fires f "
            "JOIN tm_runs r ON r.id = f.run_id "
            f"WHERE f.outcome IS NULL AND f.run_id IS NOT NULL AND f.workspace = ? "
            f"AND r.status IN {_ENDED} ORDER BY f.fire_at, f.path LIMIT ?",
            (workspace, limit),
        )
        return [
            (
                str(path),
                float(at),
                str(run_id),
                str(status),
                None if error is None else json.loads(error),
            )
            for path, at, run_id, status, error in rows
        ]

    def set_fire_outcome(self, workspace: str, path: str, fire_at: float, outcome: str) -> bool:
        """Set how a fire's run ended; False when it was set already (by another scheduler)."""
        row = self.one(
            "UPDATE tm_schedule_fires SET outcome = ? WHERE workspace = ? AND path = ? "
            "AND fire_at = ? AND outcome IS NULL RETURNING fire_at",
            (outcome, workspace, path, fire_at),
        )
        return row is not None

    def set_fire_handler(
        self,
        workspace: str,
        path: str,
        fire_at: float,
        *,
        handler_id: str | None,
        error: str | None = None,
    ) -> None:
        """The handler run a fire's outcome started, or why none could start."""
        self.execute(
            "UPDATE tm_schedule_fires SET handler_id = ?, error = COALESCE(?, error) "
            "WHERE workspace = ? AND path = ? AND fire_at = ?",
            (handler_id, error, workspace, path, fire_at),
        )

    def previous_outcome(self, workspace: str, path: str, fire_at: float) -> str | None:
        """The outcome of the schedule's last started fire before `fire_at` (None: none yet)."""
        row = self.one(
            "SELECT outcome FROM tm_schedule_fires WHERE workspace = ? AND path = ? "
            "AND fire_at < ? AND status = 'started' ORDER BY fire_at DESC LIMIT 1",
            (workspace, path, fire_at),
        )
        return None if row is None or row[0] is None else str(row[0])
