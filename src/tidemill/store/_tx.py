"""`Tx`: the store's SQL, one method per operation, inside one transaction.

Statements are written once with `?` placeholders; on PostgreSQL they are
translated to `%s`, and row locks (`FOR UPDATE`, `SKIP LOCKED`) are added.
SQLite needs no row locks: a write transaction (`BEGIN IMMEDIATE`) holds the
whole file.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from typing import Any, Literal

from tidemill.errors import StoreError
from tidemill.store._rows import ApprovalRow, JobRow, LogRow, RunRow

__all__ = ["Ending", "Tx", "dumps"]

_RUN = RunRow.COLUMNS
_JOB = JobRow.COLUMNS
_APPROVAL = ApprovalRow.COLUMNS


def dumps(value: Any) -> str:
    """JSON text for the store: compact, UTF-8 kept as is."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


@lru_cache(maxsize=512)
def _postgres(sql: str) -> str:
    return sql.replace("?", "%s")


def _claim_sql(also: str = "") -> str:
    """PostgreSQL's claim of queued jobs (`also`: one more condition on them).

    The parameters are the worker, its lease's end, the start time, the time
    jobs must be due by, and how many to take. The inner query picks and locks
    the jobs in queue order (`FOR UPDATE SKIP LOCKED` yields only rows that are
    still queued once locked); the update then finds each by its primary key.
    """
    return (
        "UPDATE tm_jobs SET status = 'running', worker = ?, lease_until = ?, "
        "epoch = epoch + 1, started_at = ? FROM (SELECT id AS picked FROM tm_jobs "
        f"WHERE status = 'queued' AND run_at <= ?{also} ORDER BY run_at, id LIMIT ? "
        f"FOR UPDATE SKIP LOCKED) pick WHERE id = pick.picked RETURNING {_JOB}"
    )


# What a claim returns from its CTE `c`: each job, its run and the run's context.
_CLAIMED = ", ".join(
    [f"c.{name.strip()}" for name in _JOB.split(",")]
    + [f"r.{name.strip()}" for name in _RUN.split(",")]
    + ["p.body"]
)
_CLAIMED_JOINS = (
    "LEFT JOIN tm_runs r ON r.id = c.run_id "
    "LEFT JOIN tm_payloads p ON p.run_id = c.run_id AND p.key = 'context'"
)
_JOB_WIDTH = len(_JOB.split(","))

Ending = tuple[bool, bool, list[tuple[JobRow, RunRow, Any]]]
"""What `Tx.end_run_and_claim` did: recorded, ended the run, and the jobs it claimed."""


def _claimed(row: Sequence[Any]) -> tuple[JobRow, RunRow, Any]:
    """A claimed job, its run and the run's context, from the columns of `_CLAIMED`."""
    body = row[-1]
    job = JobRow.of(tuple(row[:_JOB_WIDTH]))
    run = RunRow.of(tuple(row[_JOB_WIDTH:-1]))
    return job, run, None if body is None else json.loads(body)


class _Offline:
    """The cursor of `Tx.offline`: every statement is refused."""

    def execute(self, sql: str, params: Sequence[Any] = ()) -> None:
        raise StoreError("This needs the database.", context={"sql": sql[:80]})


class Tx:
    """The operations of one transaction. Built by `Database.transact`."""

    def __init__(self, cursor: Any, dialect: Literal["sqlite", "postgres"], channel: str | None):
        self._cursor = cursor
        self.dialect = dialect
        self._channel = channel
        self._lock = " FOR UPDATE" if dialect == "postgres" else ""
        self._skip_locked = " FOR UPDATE SKIP LOCKED" if dialect == "postgres" else ""

    @classmethod
    def offline(cls, dialect: Literal["sqlite", "postgres"]) -> Tx:
        """A `Tx` with no database behind it: its first statement raises `StoreError`.

        For code that usually needs no query (reading what a claimed job needs
        from caches) to try first, and to run in a real transaction only when
        it does need one.
        """
        return cls(_Offline(), dialect, None)

    # --- plumbing -------------------------------------------------------

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        """Run one statement; return the cursor."""
        if self.dialect == "postgres":
            sql = _postgres(sql)
        self._cursor.execute(sql, params)
        return self._cursor

    def all(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Every row of a query."""
        return list(self.execute(sql, params).fetchall())

    def one(self, sql: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None:
        """The first row of a query, or None."""
        row: tuple[Any, ...] | None = self.execute(sql, params).fetchone()
        return row

    def notify(self) -> None:
        """Wake listening workers when this transaction commits (PostgreSQL only)."""
        if self._channel is not None:
            self.execute(f"NOTIFY {self._channel}")

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
            f"INSERT INTO tm_runs ({_RUN}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
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
            ),
        )

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

    def runs(
        self, *, status: str | None = None, flow: str | None = None, limit: int = 50
    ) -> list[RunRow]:
        """Top-level runs, newest first."""
        where, params = ["parent_id IS NULL"], []
        if status is not None:
            where.append("status = ?")
            params.append(status)
        if flow is not None:
            where.append("flow_name = ?")
            params.append(flow)
        rows = self.all(
            f"SELECT {_RUN} FROM tm_runs WHERE {' AND '.join(where)} "
            "ORDER BY created_at DESC, id DESC LIMIT ?",
            (*params, limit),
        )
        return [RunRow.of(row) for row in rows]

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

    # --- jobs -----------------------------------------------------------

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
        lease_until: float | None = None,
    ) -> JobRow:
        """Add a job; a job added as `running` is claimed by `worker` (epoch 1)."""
        epoch = 1 if status == "running" else 0
        started = now if status == "running" else None
        row = self.one(
            "INSERT INTO tm_jobs (run_id, step_id, attempt, status, run_at, worker, lease_until, "
            "epoch, created_at, started_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
            f"RETURNING {_JOB}",
            (
                run_id,
                step_id,
                attempt,
                status,
                now if run_at is None else run_at,
                worker,
                lease_until,
                epoch,
                now,
                started,
            ),
        )
        assert row is not None
        return JobRow.of(row)

    def claim(
        self, worker: str, limit: int, *, now: float, lease_until: float, reclaim: bool = True
    ) -> list[JobRow]:
        """Claim up to `limit` jobs: expired leases first (when `reclaim`), then queued jobs."""
        claimed: list[JobRow] = []
        if reclaim:
            claimed.extend(self._reclaim(worker, limit, now=now, lease_until=lease_until))
        if len(claimed) < limit:
            fresh = (
                _claim_sql()
                if self.dialect == "postgres"
                else "UPDATE tm_jobs SET status = 'running', worker = ?, lease_until = ?, "
                "epoch = epoch + 1, started_at = ? WHERE status = 'queued' AND id IN ("
                "SELECT id FROM tm_jobs WHERE status = 'queued' AND run_at <= ? "
                f"ORDER BY run_at, id LIMIT ?) RETURNING {_JOB}"
            )
            rows = self.all(fresh, (worker, lease_until, now, now, limit - len(claimed)))
            claimed.extend(JobRow.of(row) for row in rows)
        claimed.sort(key=lambda job: job.id)
        return claimed

    def claim_with_runs(
        self, worker: str, limit: int, *, now: float, lease_until: float, reclaim: bool = True
    ) -> list[tuple[JobRow, RunRow, Any]]:
        """`claim`, each job with its run and the run's `context` payload.

        On PostgreSQL the queued jobs come with their runs in one statement.
        """
        if self.dialect == "sqlite" or reclaim:
            out = []
            for job in self.claim(worker, limit, now=now, lease_until=lease_until, reclaim=reclaim):
                found = self.run_and_payload(job.run_id, "context")
                assert found is not None
                out.append((job, found[0], found[1]))
            return out
        rows = self.all(
            f"WITH c AS ({_claim_sql()}) SELECT {_CLAIMED} FROM c {_CLAIMED_JOINS} ORDER BY c.id",
            (worker, lease_until, now, now, limit),
        )
        return [_claimed(row) for row in rows]

    def _reclaim(self, worker: str, limit: int, *, now: float, lease_until: float) -> list[JobRow]:
        """Take over jobs whose lease ran out; each claim moves the job's epoch on."""
        reclaim = (
            "UPDATE tm_jobs SET worker = ?, lease_until = ?, epoch = epoch + 1, started_at = ? "
            "WHERE status = 'running' AND lease_until < ? AND id IN ("
            "SELECT id FROM tm_jobs WHERE status = 'running' AND lease_until < ? "
            # A worker never takes over its own job: it may still be running it
            # (its renewals failed for a while); another worker will, if it died.
            "AND worker <> ? "
            f"ORDER BY lease_until LIMIT ?{self._skip_locked}) RETURNING {_JOB}"
        )
        rows = self.all(reclaim, (worker, lease_until, now, now, now, worker, limit))
        return [JobRow.of(row) for row in rows]

    def renew(self, worker: str, held: Mapping[int, int], lease_until: float) -> set[int]:
        """Extend the leases of `held` (job id to epoch); return the ids still held."""
        if not held:
            return set()
        ids = list(held)
        marks = ", ".join("?" for _ in ids)
        rows = self.all(
            f"UPDATE tm_jobs SET lease_until = ? WHERE worker = ? AND status = 'running' "
            f"AND id IN ({marks}) RETURNING id, epoch",
            (lease_until, worker, *ids),
        )
        return {int(job_id) for job_id, epoch in rows if held.get(int(job_id)) == epoch}

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
        return bool(self.execute(sql, params).rowcount == 1)

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
            "lease_until = NULL WHERE id = ? AND status = 'running' AND epoch = ? RETURNING id) "
            "INSERT INTO tm_results (run_id, step_id, job_id, status, body, recorded_at) "
            "SELECT ?, ?, done.id, ?, ?, ? FROM done RETURNING job_id",
            (status, now, job.id, job.epoch, job.run_id, job.step_id, status, body, now),
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
            "WHERE id = ? RETURNING id) INSERT INTO tm_payloads (run_id, key, body) "
            "SELECT id, 'result', ? FROM ended "
            "ON CONFLICT (run_id, key) DO UPDATE SET body = excluded.body",
            (now, run_id, dumps(result)),
        )

    def end_run_and_claim(
        self, job: JobRow, result: Any, *, now: float, worker: str, limit: int, lease_until: float
    ) -> Ending | None:
        """Record the succeeded last step of a run, end the run, and claim the next jobs.

        For a top-level run of one step whose result is the run's result (a
        plain job queue). In order: lock the run's row, finish `job` (fenced
        by its epoch) and record `result`, end the run with that result when
        it is still `running`, then claim up to `limit` queued jobs, as
        `claim_with_runs` does. Nothing is written when the job is no longer
        held, and nothing is claimed then either.

        Returns None when the run is gone, else `(recorded, ended, claimed)`.
        On PostgreSQL it is one statement (`end_run_and_claim_statement`),
        which a worker runs with `Store.write_one`.
        """
        if self.dialect == "postgres":
            sql, params = self.end_run_and_claim_statement(
                job, result, now=now, worker=worker, limit=limit, lease_until=lease_until
            )
            return self.ending(self.all(sql, params))
        run = self.run(job.run_id, lock=True)
        if run is None:
            return None
        if not self.finish_and_record(job, status="succeeded", value=result, now=now):
            return False, False, []
        ended = run.status == "running"
        if ended:
            self.end_run(run.id, result=result, now=now)
        claimed = self.claim_with_runs(
            worker, limit, now=now, lease_until=lease_until, reclaim=False
        )
        return True, ended, claimed

    @staticmethod
    def end_run_and_claim_statement(
        job: JobRow, result: Any, *, now: float, worker: str, limit: int, lease_until: float
    ) -> tuple[str, tuple[Any, ...]]:
        """`end_run_and_claim` on PostgreSQL: one statement and its parameters.

        Being one statement, it can run as a transaction of its own: one round
        trip for everything a job queue's worker writes per job. Read its rows
        with `ending`.
        """
        body = dumps(result)
        sql = (
            # The run's row is locked first, as every change to a run does; the
            # job is finished only once the lock is held (`EXISTS (... held)`),
            # and each later part runs only when the one before it wrote.
            "WITH held AS (SELECT id, status FROM tm_runs WHERE id = ? FOR UPDATE), "
            "done AS (UPDATE tm_jobs SET status = 'succeeded', finished_at = ?, error = NULL, "
            "lease_until = NULL WHERE id = ? AND status = 'running' AND epoch = ? "
            "AND EXISTS (SELECT 1 FROM held) RETURNING id), "
            "res AS (INSERT INTO tm_results (run_id, step_id, job_id, status, body, recorded_at) "
            "SELECT ?, ?, id, 'succeeded', ?, ? FROM done RETURNING job_id), "
            "ended AS (UPDATE tm_runs SET status = 'succeeded', finished_at = ? "
            "WHERE id = (SELECT id FROM held WHERE status = 'running') "
            "AND EXISTS (SELECT 1 FROM res) RETURNING id), "
            "kept AS (INSERT INTO tm_payloads (run_id, key, body) "
            "SELECT id, 'result', ? FROM ended "
            "ON CONFLICT (run_id, key) DO UPDATE SET body = excluded.body), "
            f"c AS ({_claim_sql(' AND EXISTS (SELECT 1 FROM res)')}) "
            "SELECT (SELECT count(*) FROM held), (SELECT count(*) FROM res), "
            f"(SELECT count(*) FROM ended), {_CLAIMED} "
            f"FROM (SELECT 1) one LEFT JOIN c ON true {_CLAIMED_JOINS} ORDER BY c.id"
        )
        params = (
            *(job.run_id, now, job.id, job.epoch),
            *(job.run_id, job.step_id, body, now),
            *(now, body),
            *(worker, lease_until, now, now, limit),
        )
        return _postgres(sql), params

    @staticmethod
    def ending(rows: Sequence[Sequence[Any]]) -> Ending | None:
        """What `end_run_and_claim_statement` returned, as `end_run_and_claim` returns it."""
        found, recorded, ended = rows[0][:3]
        if not found:
            return None
        claimed = [_claimed(row[3:]) for row in rows if row[3] is not None]
        return bool(recorded), bool(ended), claimed

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

    def release_job(self, job_id: int, epoch: int) -> bool:
        """Queue a claimed job again, unrun (its worker could not start it); fenced by epoch."""
        cursor = self.execute(
            "UPDATE tm_jobs SET status = 'queued', worker = NULL, lease_until = NULL "
            "WHERE id = ? AND status = 'running' AND epoch = ?",
            (job_id, epoch),
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
        return jobs

    def counts(self) -> dict[str, int]:
        """How many jobs are in each status (for `tidemill runs` and tests)."""
        rows = self.all("SELECT status, COUNT(*) FROM tm_jobs GROUP BY status")
        return {str(status): int(count) for status, count in rows}

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
        """Store what a step printed, as (stream, text) chunks."""
        for stream, body in chunks:
            if body:
                self.execute(
                    "INSERT INTO tm_logs (run_id, job_id, stream, body, at) VALUES (?, ?, ?, ?, ?)",
                    (run_id, job_id, stream, body, now),
                )

    def logs(self, root_id: str) -> list[LogRow]:
        """Everything the steps of a run (and its child runs) printed, in order."""
        rows = self.all(
            "SELECT run_id, job_id, stream, body, at FROM tm_logs WHERE run_id IN "
            "(SELECT id FROM tm_runs WHERE root_id = ?) ORDER BY id",
            (root_id,),
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

    def usage(self, root_id: str) -> list[dict[str, Any]]:
        """Every model call recorded for a run and its child runs, oldest first."""
        columns = ("run_id", "step_id", "job_id", "attempt", *self._USAGE, "at")
        rows = self.all(
            f"SELECT {', '.join(columns)} FROM tm_usage WHERE root_id = ? ORDER BY id",
            (root_id,),
        )
        return [dict(zip(columns, row, strict=True)) for row in rows]

    # --- approvals ------------------------------------------------------

    def insert_approval(self, approval: ApprovalRow) -> None:
        """Add an approval request."""
        self.execute(
            f"INSERT INTO tm_approvals ({_APPROVAL}) VALUES "
            "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                approval.id,
                approval.run_id,
                approval.root_id,
                approval.job_id,
                approval.step_id,
                approval.message,
                dumps(approval.approvers),
                approval.on_timeout,
                approval.status,
                approval.created_at,
                approval.expires_at,
                approval.decided_at,
                approval.decided_by,
                approval.comment,
                approval.kind,
                None if approval.details is None else dumps(approval.details),
            ),
        )

    def approval(self, approval_id: str, *, lock: bool = False) -> ApprovalRow | None:
        """An approval by id."""
        suffix = self._lock if lock else ""
        row = self.one(f"SELECT {_APPROVAL} FROM tm_approvals WHERE id = ?{suffix}", (approval_id,))
        return None if row is None else ApprovalRow.of(row)

    def approvals(
        self, *, status: str | None = "pending", root_id: str | None = None
    ) -> list[ApprovalRow]:
        """Approvals, oldest first, filtered by status and run."""
        where, params = ["1 = 1"], []
        if status is not None:
            where.append("status = ?")
            params.append(status)
        if root_id is not None:
            where.append("root_id = ?")
            params.append(root_id)
        rows = self.all(
            f"SELECT {_APPROVAL} FROM tm_approvals WHERE {' AND '.join(where)} "
            "ORDER BY created_at, id",
            params,
        )
        return [ApprovalRow.of(row) for row in rows]

    def decide_approval(
        self,
        approval_id: str,
        *,
        status: str,
        by: str | None,
        comment: str | None,
        now: float,
        details: Mapping[str, Any] | None = None,
    ) -> bool:
        """Close a pending approval (replacing its `details` when given); False when not pending."""
        if details is None:
            cursor = self.execute(
                "UPDATE tm_approvals SET status = ?, decided_by = ?, comment = ?, decided_at = ? "
                "WHERE id = ? AND status = 'pending'",
                (status, by, comment, now, approval_id),
            )
        else:
            cursor = self.execute(
                "UPDATE tm_approvals SET status = ?, decided_by = ?, comment = ?, decided_at = ?, "
                "details = ? WHERE id = ? AND status = 'pending'",
                (status, by, comment, now, dumps(details), approval_id),
            )
        return bool(cursor.rowcount == 1)

    def job_approvals(self, job_id: int) -> list[ApprovalRow]:
        """Every approval a job asked for, oldest first (an agent step may ask several)."""
        rows = self.all(
            f"SELECT {_APPROVAL} FROM tm_approvals WHERE job_id = ? ORDER BY created_at, id",
            (job_id,),
        )
        return [ApprovalRow.of(row) for row in rows]

    def expired_approvals(self, now: float, limit: int = 20) -> list[ApprovalRow]:
        """Pending approvals whose time is up."""
        rows = self.all(
            f"SELECT {_APPROVAL} FROM tm_approvals WHERE status = 'pending' "
            f"AND expires_at < ? ORDER BY expires_at LIMIT ?{self._skip_locked}",
            (now, limit),
        )
        return [ApprovalRow.of(row) for row in rows]

    def cancel_approvals(self, run_id: str, now: float) -> None:
        """Close a run's pending approvals as cancelled."""
        self.execute(
            "UPDATE tm_approvals SET status = 'cancelled', decided_at = ? "
            "WHERE run_id = ? AND status = 'pending'",
            (now, run_id),
        )

    # --- agent journals -------------------------------------------------

    def journal(self, thread_id: str) -> list[tuple[int, str]]:
        """An agent thread's journal entries as `(seq, JSON text)`, oldest first.

        The journal table is the agent library's (`tidemill_journal`, kept by
        its SQLite or PostgreSQL checkpointer in the store's database); an
        `ai_agent` step creates it on first use.
        """
        rows = self.all(
            "SELECT seq, payload FROM tidemill_journal WHERE thread_id = ? ORDER BY seq",
            (thread_id,),
        )
        return [
            (int(seq), payload if isinstance(payload, str) else dumps(payload))
            for seq, payload in rows
        ]

    # --- agent memory ---------------------------------------------------

    def append_agent_memory(
        self,
        memory_id: str,
        step_key: str,
        entries: Sequence[tuple[str, str]],
        *,
        run_id: str,
        now: float,
    ) -> None:
        """Append `(role, content)` messages to the memory of `(memory_id, step_key)`.

        Each message takes the next `seq` of that memory; on PostgreSQL, writers
        of one memory are serialised by a transaction-scoped advisory lock.
        """
        if self.dialect == "postgres":
            self.execute(
                "SELECT pg_advisory_xact_lock(hashtextextended(?, 0))",
                (dumps(["tm_agent_memory", memory_id, step_key]),),
            )
        row = self.one(
            "SELECT MAX(seq) FROM tm_agent_memory WHERE memory_id = ? AND step_key = ?",
            (memory_id, step_key),
        )
        seq = 0 if row is None or row[0] is None else int(row[0])
        for role, content in entries:
            seq += 1
            self.execute(
                "INSERT INTO tm_agent_memory (memory_id, step_key, seq, role, content, run_id, at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                (memory_id, step_key, seq, role, content, run_id, now),
            )

    def agent_memory(self, memory_id: str, step_key: str, limit: int) -> list[tuple[str, str]]:
        """The newest `limit` messages of a memory as `(role, content)`, oldest first."""
        rows = self.all(
            "SELECT role, content FROM tm_agent_memory WHERE memory_id = ? AND step_key = ? "
            "ORDER BY seq DESC LIMIT ?",
            (memory_id, step_key, limit),
        )
        return [(str(role), str(content)) for role, content in reversed(rows)]

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
