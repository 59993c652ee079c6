"""`JobQueries`: a job's life from insertion to its end (claiming it is in `_claims`)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from tidemill.store._results import ResultQueries
from tidemill.store._rows import JobRow
from tidemill.store._runs import RunQueries
from tidemill.store._statements import dumps, lease_end

__all__ = ["RUN_SUCCEEDED", "JobQueries", "shown_key"]

_MASKED, _MASKED_END = "masked:", "masked;"
"""The payload keys of steps' masked results: `masked:<step id>` (`;` sorts after `:`)."""

RUN_SUCCEEDED = dumps({"status": "succeeded"})
"""The data of a succeeded run's `run_finished` event, as JSON text."""

_JOB = JobRow.COLUMNS


def shown_key(job_id: int) -> str:
    """The run payload that holds what the API shows of a job (see `JobQueries.record_shown`).

    Examples:
        >>> shown_key(7)
        'shown:7'
    """
    return f"shown:{job_id}"


class JobQueries(RunQueries, ResultQueries):
    """The statements that add, finish, park, requeue, list and cancel jobs."""

    def insert_job(
        self,
        run_id: str,
        step_id: str,
        attempt: int,
        *,
        now: float,
        run_at: float | None = None,
        status: str = "queued",
        worker: str | None = None,
        lease: float | None = None,
        lease_until: float | None = None,
    ) -> JobRow:
        """Add a job; a job added as `running` is claimed by `worker` (epoch 1).

        Its lease ends `lease` seconds after the database's clock, or (`lease`
        None) at `lease_until`, on the caller's clock.
        """
        epoch = 1 if status == "running" else 0
        started = now if status == "running" else None
        row = self.one(
            "INSERT INTO tm_jobs (run_id, step_id, attempt, status, run_at, worker, lease_until, "
            f"epoch, created_at, started_at) VALUES (?, ?, ?, ?, ?, ?, {lease_end(self.dialect)}, "
            "?, ?, ?) "
            f"RETURNING {_JOB}",
            (
                run_id,
                step_id,
                attempt,
                status,
                now if run_at is None else run_at,
                worker,
                lease,
                lease_until,
                epoch,
                now,
                started,
            ),
        )
        assert row is not None
        return JobRow.of(row)

    def job(self, job_id: int, *, lock: bool = False) -> JobRow | None:
        """A job by id."""
        suffix = self._lock if lock else ""
        row = self.one(f"SELECT {_JOB} FROM tm_jobs WHERE id = ?{suffix}", (job_id,))
        return None if row is None else JobRow.of(row)

    def finish_job(
        self,
        job_id: int,
        *,
        status: str,
        now: float,
        epoch: int | None,
        expect: str = "running",
        error: Mapping[str, Any] | None = None,
    ) -> bool:
        """Move a job out of `expect`; False when it was not there (or not at `epoch`)."""
        sql = (
            "UPDATE tm_jobs SET status = ?, finished_at = ?, error = ?, lease_until = NULL "
            "WHERE id = ? AND status = ?"
        )
        params: list[Any] = [status, now, None if error is None else dumps(error), job_id, expect]
        if epoch is not None:
            sql += " AND epoch = ?"
            params.append(epoch)
        row = self.one(sql + " RETURNING run_id, step_id, attempt", params)
        if row is None:
            return False
        run_id, step_id, attempt = row
        data = _finished(status, int(attempt), error)
        self.add_event(run_id, "step_finished", data, now=now, job_id=job_id, step_id=step_id)
        return True

    def record_shown(self, job: JobRow, shown: Any) -> None:
        """Keep what the API shows of a job: its inputs and result, its secrets masked."""
        self.put_payload(job.run_id, shown_key(job.id), shown)

    def shown(self, run_id: str, job_id: int) -> Any:
        """What the API shows of a job of `run_id` (`record_shown`); None: nothing was kept."""
        return self.payload(run_id, shown_key(job_id))

    def record_masked(self, run_id: str, step_id: str, shown_result: Any) -> None:
        """A step of the run returned a secret: keep its masked result and mark the run.

        The run's result is then shown from the masked results of its steps
        (`put_shown_result`, when it ends), while the steps after it read the
        real one.
        """
        self.put_payload(run_id, f"{_MASKED}{step_id}", shown_result)
        self.execute("UPDATE tm_runs SET masked = 1 WHERE id = ?", (run_id,))

    def masked_results(self, run_id: str) -> dict[str, Any]:
        """The masked result of each step of the run that returned a secret, by step id."""
        rows = self.all(
            "SELECT key, body FROM tm_payloads WHERE run_id = ? AND key >= ? AND key < ?",
            (run_id, _MASKED, _MASKED_END),
        )
        return {str(key)[len(_MASKED) :]: json.loads(body) for key, body in rows}

    def put_shown_result(self, run_id: str, shown_result: Any) -> None:
        """A masked run's result as the API shows it, its steps' secrets masked."""
        self.put_payload(run_id, "shown_result", shown_result)

    def shown_result(self, run_id: str, default: Any = None) -> Any:
        """A masked run's result as shown (`put_shown_result`), or `default`."""
        return self.payload(run_id, "shown_result", default)

    def finish_and_record(self, job: JobRow, *, status: str, value: Any, now: float) -> bool:
        """Finish a claimed job (fenced by its epoch) and record its step's result.

        One statement on PostgreSQL; False, with nothing written, when the
        job is no longer held at that epoch.
        """
        body = dumps(value)
        if self.dialect == "sqlite":
            if not self.finish_job(job.id, status=status, now=now, epoch=job.epoch):
                return False
            self.insert_result(job.run_id, job.step_id, job.id, status, value, now)
            return True
        row = self.one(
            "WITH done AS (UPDATE tm_jobs SET status = ?, finished_at = ?, error = NULL, "
            "lease_until = NULL WHERE id = ? AND status = 'running' AND epoch = ? RETURNING id), "
            "res AS (INSERT INTO tm_results (run_id, step_id, job_id, status, body, recorded_at) "
            "SELECT ?, ?, done.id, ?, ?, ? FROM done RETURNING job_id), "
            "ev AS (INSERT INTO tm_events (root_id, run_id, job_id, step_id, kind, data, at) "
            "SELECT r.root_id, r.id, res.job_id, ?, 'step_finished', ?, ? FROM res "
            "JOIN tm_runs r ON r.id = ?) SELECT job_id FROM res",
            (
                *(status, now, job.id, job.epoch, job.run_id, job.step_id, status, body, now),
                *(job.step_id, dumps(_finished(status, job.attempt, None)), now, job.run_id),
            ),
        )
        return row is not None

    def end_run(self, run_id: str, *, result: Any, now: float) -> None:
        """Mark a run succeeded and store its result (one statement on PostgreSQL)."""
        if self.dialect == "sqlite":
            self.put_payload(run_id, "result", result)
            self.set_run(run_id, status="succeeded", finished_at=now)
            return
        self.execute(
            "WITH ended AS (UPDATE tm_runs SET status = 'succeeded', finished_at = ? "
            "WHERE id = ? RETURNING id, root_id), "
            "ev AS (INSERT INTO tm_events (root_id, run_id, kind, data, at) "
            "SELECT root_id, id, 'run_finished', ?, ? FROM ended) "
            "INSERT INTO tm_payloads (run_id, key, body) "
            "SELECT id, 'result', ? FROM ended "
            "ON CONFLICT (run_id, key) DO UPDATE SET body = excluded.body",
            (now, run_id, RUN_SUCCEEDED, now, dumps(result)),
        )

    def park_job(self, job_id: int, epoch: int) -> bool:
        """Move a running job to `waiting` (for a person or for child runs); fenced by epoch."""
        cursor = self.execute(
            "UPDATE tm_jobs SET status = 'waiting', lease_until = NULL "
            "WHERE id = ? AND status = 'running' AND epoch = ?",
            (job_id, epoch),
        )
        return bool(cursor.rowcount == 1)

    def set_job_status(self, job_id: int, status: str, *, expect: str) -> bool:
        """Move a job from `expect` to `status`."""
        cursor = self.execute(
            "UPDATE tm_jobs SET status = ?, finished_at = NULL, error = NULL "
            "WHERE id = ? AND status = ?",
            (status, job_id, expect),
        )
        return bool(cursor.rowcount == 1)

    def release_job(self, job_id: int, epoch: int, run_at: float | None = None) -> bool:
        """Queue a claimed job again (its worker could not start or record it); fenced by epoch.

        With `run_at`, it is due then; else at once.
        """
        cursor = self.execute(
            "UPDATE tm_jobs SET status = 'queued', worker = NULL, lease_until = NULL, "
            "run_at = COALESCE(?, run_at) WHERE id = ? AND status = 'running' AND epoch = ?",
            (run_at, job_id, epoch),
        )
        return bool(cursor.rowcount == 1)

    def requeue_job(self, job_id: int, now: float) -> bool:
        """Queue a waiting job again (an agent step whose approvals were decided)."""
        cursor = self.execute(
            "UPDATE tm_jobs SET status = 'queued', run_at = ?, worker = NULL, lease_until = NULL "
            "WHERE id = ? AND status = 'waiting'",
            (now, job_id),
        )
        return bool(cursor.rowcount == 1)

    def run_jobs(self, run_id: str) -> list[JobRow]:
        """Every job of a run, oldest first."""
        rows = self.all(f"SELECT {_JOB} FROM tm_jobs WHERE run_id = ? ORDER BY id", (run_id,))
        return [JobRow.of(row) for row in rows]

    def step_states(self, run_id: str) -> dict[str, str]:
        """Each step's latest job status in a run."""
        rows = self.all(
            "SELECT step_id, status FROM tm_jobs WHERE run_id = ? ORDER BY id", (run_id,)
        )
        return {step: status for step, status in rows}

    def tree_jobs(self, root_id: str) -> list[JobRow]:
        """Every job of a run and its child runs, oldest first."""
        rows = self.all(
            f"SELECT {_JOB} FROM tm_jobs WHERE run_id IN "
            "(SELECT id FROM tm_runs WHERE root_id = ?) ORDER BY id",
            (root_id,),
        )
        return [JobRow.of(row) for row in rows]

    def cancel_jobs(self, run_id: str, now: float) -> list[JobRow]:
        """Cancel a run's unfinished jobs; return them as they were."""
        rows = self.all(
            f"SELECT {_JOB} FROM tm_jobs WHERE run_id = ? "
            f"AND status IN ('queued', 'running', 'waiting'){self._lock}",
            (run_id,),
        )
        jobs = [JobRow.of(row) for row in rows]
        if jobs:
            self.execute(
                "UPDATE tm_jobs SET status = 'cancelled', finished_at = ?, lease_until = NULL "
                "WHERE run_id = ? AND status IN ('queued', 'running', 'waiting')",
                (now, run_id),
            )
            root = self.one("SELECT root_id FROM tm_runs WHERE id = ?", (run_id,))
            for job in jobs:
                self.add_event(
                    run_id, "step_finished", _finished("cancelled", job.attempt, None),
                    now=now, root_id=None if root is None else str(root[0]),
                    job_id=job.id, step_id=job.step_id,
                )  # fmt: skip
        return jobs

    def counts(self) -> dict[str, int]:
        """How many jobs are in each status (for `tidemill runs` and tests)."""
        rows = self.all("SELECT status, COUNT(*) FROM tm_jobs GROUP BY status")
        return {str(status): int(count) for status, count in rows}


def _finished(status: str, attempt: int, error: Mapping[str, Any] | None) -> dict[str, Any]:
    """The data of a `step_finished` event."""
    data: dict[str, Any] = {"status": status, "attempt": attempt}
    if error is not None:
        data["error"] = dict(error)
    return data
