"""`ResultQueries`: what the steps of a run leave behind: results, logs and model usage."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from tidemill.store._events import EventQueries
from tidemill.store._rows import JobRow, LogRow, RunRow
from tidemill.store._statements import dumps

__all__ = ["LOG_EVENT_TEXT", "ResultQueries"]

LOG_EVENT_TEXT = 65_536
"""The most of a log chunk's text its `log` event carries (characters)."""


class ResultQueries(EventQueries):
    """The statements about step results, the logs steps print, and model calls' usage."""

    # --- results --------------------------------------------------------

    def insert_result(
        self, run_id: str, step_id: str, job_id: int, status: str, value: Any, now: float
    ) -> None:
        """Record a step's result; a second record of the same step fails."""
        self.execute(
            "INSERT INTO tm_results (run_id, step_id, job_id, status, body, recorded_at) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (run_id, step_id, job_id, status, dumps(value), now),
        )

    def results(self, run_id: str, step_ids: Iterable[str] | None = None) -> dict[str, Any]:
        """Recorded results of a run's steps (all, or just `step_ids`)."""
        if step_ids is None:
            rows = self.all("SELECT step_id, body FROM tm_results WHERE run_id = ?", (run_id,))
        else:
            wanted = list(step_ids)
            if not wanted:
                return {}
            marks = ", ".join("?" for _ in wanted)
            rows = self.all(
                f"SELECT step_id, body FROM tm_results WHERE run_id = ? AND step_id IN ({marks})",
                (run_id, *wanted),
            )
        return {str(step): json.loads(body) for step, body in rows}

    def result_count(self, run_id: str, step_id: str) -> int:
        """How many results are recorded for a step (0 or 1; for tests)."""
        row = self.one(
            "SELECT COUNT(*) FROM tm_results WHERE run_id = ? AND step_id = ?", (run_id, step_id)
        )
        return 0 if row is None else int(row[0])

    def delete_result(self, run_id: str, step_id: str) -> None:
        """Forget a step's result (a retried container records it again)."""
        self.execute("DELETE FROM tm_results WHERE run_id = ? AND step_id = ?", (run_id, step_id))

    # --- logs -----------------------------------------------------------

    def append_logs(
        self, run_id: str, job_id: int, chunks: Iterable[tuple[str, str]], now: float
    ) -> None:
        """Store what a step printed, as (stream, text) chunks, one row each.

        Each chunk is also a `log` event: `{"stream", "text", "log_id"}`; the
        text of a chunk longer than `LOG_EVENT_TEXT` is cut there, and the
        event says its whole `size` and `truncated: true` (the row has it all).
        """
        where: tuple[Any, ...] | None = None
        for stream, body in chunks:
            if not body:
                continue
            row = self.one(
                "INSERT INTO tm_logs (run_id, job_id, stream, body, at) VALUES (?, ?, ?, ?, ?) "
                "RETURNING id",
                (run_id, job_id, stream, body, now),
            )
            assert row is not None
            if where is None:
                where = self.one(
                    "SELECT r.root_id, j.step_id FROM tm_runs r LEFT JOIN tm_jobs j "
                    "ON j.id = ? WHERE r.id = ?",
                    (job_id, run_id),
                ) or (run_id, None)
            data: dict[str, Any] = {"stream": stream, "text": body, "log_id": int(row[0])}
            if len(body) > LOG_EVENT_TEXT:
                data.update(text=body[:LOG_EVENT_TEXT], size=len(body), truncated=True)
            self.add_event(
                run_id, "log", data, now=now, root_id=where[0], job_id=job_id, step_id=where[1]
            )

    def logs(self, root_id: str, *, after: int = 0) -> list[LogRow]:
        """Everything the steps of a run (and its child runs) printed, in order.

        `after` is the `id` of the last chunk already read: only later ones come.
        """
        rows = self.all(
            "SELECT run_id, job_id, stream, body, at, id FROM tm_logs WHERE run_id IN "
            "(SELECT id FROM tm_runs WHERE root_id = ?) AND id > ? ORDER BY id",
            (root_id, after),
        )
        return [LogRow(*row) for row in rows]

    # --- usage ----------------------------------------------------------

    _USAGE = (
        "model",
        "provider",
        "input_tokens",
        "output_tokens",
        "cost_usd",
        "latency_ms",
        "error",
        "experiment_id",
        "exposure_id",
    )

    def insert_usage(self, run: RunRow, job: JobRow, usage: Mapping[str, Any], now: float) -> None:
        """Record one model call of a step: model, provider, tokens, cost, latency, error.

        `usage` holds the keys of `_USAGE`; missing ones are null (tokens 0).
        """
        values = [usage.get(key) for key in self._USAGE]
        values[2] = int(values[2] or 0)
        values[3] = int(values[3] or 0)
        values[5] = float(values[5] or 0.0)
        self.execute(
            "INSERT INTO tm_usage (run_id, root_id, step_id, job_id, attempt, "
            f"{', '.join(self._USAGE)}, at) VALUES ({', '.join('?' for _ in range(15))})",
            (run.id, run.root_id, job.step_id, job.id, job.attempt, *values, now),
        )
        data = {key: value for key, value in zip(self._USAGE, values, strict=True)}
        self.add_event(
            run.id, "usage", data, now=now, root_id=run.root_id, job_id=job.id, step_id=job.step_id
        )

    def usage(self, root_id: str) -> list[dict[str, Any]]:
        """Every model call recorded for a run and its child runs, oldest first."""
        columns = ("run_id", "step_id", "job_id", "attempt", *self._USAGE, "at")
        rows = self.all(
            f"SELECT {', '.join(columns)} FROM tm_usage WHERE root_id = ? ORDER BY id",
            (root_id,),
        )
        return [dict(zip(columns, row, strict=True)) for row in rows]
