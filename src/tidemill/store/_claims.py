"""`ClaimQueries`: workers claiming jobs under a lease, and the job queue's fast path.

Queued jobs are claimed in queue order; jobs whose lease ran out are taken
over. A top-level run of one step (a plain job queue) is ended and the next
jobs claimed in one transaction, on PostgreSQL in one statement.

Every claim takes an optional `root_id`: then only jobs of that top-level
run and of its child runs (branches, loops, sub-flows, tool calls' runs,
which all share its `root_id`) are claimed, as a worker started for one run
(`tidemill run`) must.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from tidemill.store._events import started_events_sql
from tidemill.store._jobs import RUN_SUCCEEDED, JobQueries, shown_key
from tidemill.store._rows import JobRow, RunRow
from tidemill.store._statements import due_by, dumps, lease_clock, lease_end, postgres_sql

__all__ = ["ClaimQueries", "Ending"]

_RUN = RunRow.COLUMNS
_JOB = JobRow.COLUMNS

_IN_TREE = " AND run_id IN (SELECT id FROM tm_runs WHERE root_id = ?)"
"""The condition that keeps a claim to one run's tree; its parameter is the `root_id`."""


def _tree(root_id: str | None) -> tuple[str, tuple[str, ...]]:
    """The condition (and its parameter) limiting a claim to the tree of `root_id`, if given."""
    return ("", ()) if root_id is None else (_IN_TREE, (root_id,))


_PG_LEASE_END = lease_end("postgres")
_PG_STARTED = started_events_sql("postgres", "c j")
_PG_STARTED_DATA = "json_build_object('attempt', c.attempt, 'worker', c.worker)::text"
_PG_DUE_BY = due_by("postgres")


def _claim_sql(also: str = "") -> str:
    """PostgreSQL's claim of queued jobs (`also`: more conditions on them).

    The parameters are the worker, its lease and its lease's end (see
    `lease_end`), the start time, the lease and the time jobs must be due by
    twice (see `due_by`), those of `also`, and how many to take. The inner query
    picks and locks the jobs in queue order (`FOR UPDATE SKIP LOCKED` yields
    only rows that are still queued once locked); the update then finds each by
    its primary key.
    """
    return (
        f"UPDATE tm_jobs SET status = 'running', worker = ?, lease_until = {_PG_LEASE_END}, "
        "epoch = epoch + 1, started_at = ? FROM (SELECT id AS picked FROM tm_jobs "
        f"WHERE status = 'queued' AND run_at <= {_PG_DUE_BY}{also} ORDER BY run_at, id LIMIT ? "
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


class ClaimQueries(JobQueries):
    """The statements that claim jobs, renew their leases, and end a job queue's runs."""

    def claim(
        self,
        worker: str,
        limit: int,
        *,
        now: float,
        lease: float | None = None,
        lease_until: float | None = None,
        reclaim: bool = True,
        root_id: str | None = None,
    ) -> list[JobRow]:
        """Claim up to `limit` jobs: expired leases first (when `reclaim`), then queued jobs.

        With `root_id`, only jobs of that run and of its child runs.

        Args:
            worker: The claiming worker.
            limit: How many jobs to take at most.
            now: The claiming worker's clock: the jobs' start, and the time
                queued jobs must be due by (with `lease`, the database's clock
                when it is later).
            lease: Seconds the claims last, on the database's clock (what
                workers pass).
            lease_until: When `lease` is None, the claims' end on the
                caller's clock (tests and tools that set the time).
            reclaim: Also take over jobs whose lease ran out: on the
                database's clock when `lease` is given (so a worker whose clock
                runs ahead takes nothing over early), else by `now`.
            root_id: Only jobs of this run's tree.
        """
        claimed: list[JobRow] = []
        if reclaim:
            claimed.extend(
                self._reclaim(
                    worker, limit, now=now, lease=lease, lease_until=lease_until, root_id=root_id
                )
            )
            self.add_started_events([job.id for job in claimed], now=now, reclaimed=True)
        if len(claimed) < limit:
            tree, tree_params = _tree(root_id)
            fresh = (
                _claim_sql(tree)
                if self.dialect == "postgres"
                else "UPDATE tm_jobs SET status = 'running', worker = ?, "
                f"lease_until = {lease_end('sqlite')}, "
                "epoch = epoch + 1, started_at = ? WHERE status = 'queued' AND id IN ("
                "SELECT id FROM tm_jobs WHERE status = 'queued' "
                f"AND run_at <= {due_by('sqlite')}{tree} "
                f"ORDER BY run_at, id LIMIT ?) RETURNING {_JOB}"
            )
            params = (
                *(worker, lease, lease_until, now, lease, now, now),
                *(*tree_params, limit - len(claimed)),
            )
            taken = [JobRow.of(row) for row in self.all(fresh, params)]
            self.add_started_events([job.id for job in taken], now=now, reclaimed=False)
            claimed.extend(taken)
        claimed.sort(key=lambda job: job.id)
        return claimed

    def claim_with_runs(
        self,
        worker: str,
        limit: int,
        *,
        now: float,
        lease: float | None = None,
        lease_until: float | None = None,
        reclaim: bool = True,
        root_id: str | None = None,
    ) -> list[tuple[JobRow, RunRow, Any]]:
        """`claim`, each job with its run and the run's `context` payload.

        On PostgreSQL the queued jobs come with their runs in one statement.
        """
        if self.dialect == "sqlite" or reclaim:
            out = []
            jobs = self.claim(
                worker,
                limit,
                now=now,
                lease=lease,
                lease_until=lease_until,
                reclaim=reclaim,
                root_id=root_id,
            )
            for job in jobs:
                found = self.run_and_payload(job.run_id, "context")
                assert found is not None
                out.append((job, found[0], found[1]))
            return out
        tree, tree_params = _tree(root_id)
        rows = self.all(
            f"WITH c AS ({_claim_sql(tree)}), ev AS ({_PG_STARTED}) "
            f"SELECT {_CLAIMED} FROM c {_CLAIMED_JOINS} ORDER BY c.id",
            (worker, lease, lease_until, now, lease, now, now, *tree_params, limit, now),
        )
        return [_claimed(row) for row in rows]

    def _reclaim(
        self,
        worker: str,
        limit: int,
        *,
        now: float,
        lease: float | None,
        lease_until: float | None,
        root_id: str | None,
    ) -> list[JobRow]:
        """Take over jobs whose lease ran out; each claim moves the job's epoch on.

        With `lease`, a lease ran out by the database's clock; else by `now`.
        """
        tree, tree_params = _tree(root_id)
        clock = lease_clock(self.dialect)
        reclaim = (
            f"UPDATE tm_jobs SET worker = ?, lease_until = {lease_end(self.dialect)}, "
            "epoch = epoch + 1, started_at = ? "
            f"WHERE status = 'running' AND lease_until < {clock} AND id IN ("
            f"SELECT id FROM tm_jobs WHERE status = 'running' AND lease_until < {clock} "
            # A worker never takes over its own job: it may still be running it
            # (its renewals failed for a while); another worker will, if it died.
            f"AND worker <> ?{tree} "
            f"ORDER BY lease_until LIMIT ?{self._skip_locked}) RETURNING {_JOB}"
        )
        params = (
            *(worker, lease, lease_until, now),
            *(lease, now, lease, now),
            *(worker, *tree_params, limit),
        )
        return [JobRow.of(row) for row in self.all(reclaim, params)]

    def renew(
        self,
        worker: str,
        held: Mapping[int, int],
        lease_until: float | None = None,
        *,
        lease: float | None = None,
    ) -> set[int]:
        """Extend the leases of `held` (job id to epoch); return the ids still held.

        Each lease then ends `lease` seconds after the database's clock, or
        (`lease` None) at `lease_until`, on the caller's clock.
        """
        if not held:
            return set()
        ids = list(held)
        marks = ", ".join("?" for _ in ids)
        rows = self.all(
            f"UPDATE tm_jobs SET lease_until = {lease_end(self.dialect)} "
            "WHERE worker = ? AND status = 'running' "
            f"AND id IN ({marks}) RETURNING id, epoch",
            (lease, lease_until, worker, *ids),
        )
        return {int(job_id) for job_id, epoch in rows if held.get(int(job_id)) == epoch}

    def end_run_and_claim(
        self,
        job: JobRow,
        result: Any,
        *,
        now: float,
        worker: str,
        limit: int,
        lease: float | None = None,
        lease_until: float | None = None,
        root_id: str | None = None,
        shown: Any = None,
    ) -> Ending | None:
        """Record the succeeded last step of a run, end the run, and claim the next jobs.

        For a top-level run of one step whose result is the run's result (a
        plain job queue). In order: lock the run's row, finish `job` (fenced
        by its epoch) and record `result`, end the run with that result when
        it is still `running`, then claim up to `limit` queued jobs, as
        `claim_with_runs` does (of the tree of `root_id` only, when given).
        Nothing is written when the job is no longer held, and nothing is
        claimed then either. `shown` (not None) is what the API shows of the
        job, kept with it (`record_shown`).

        Returns None when the run is gone, else `(recorded, ended, claimed)`.
        On PostgreSQL it is one statement (`end_run_and_claim_statement`),
        which a worker runs with `Store.write_one`.
        """
        if self.dialect == "postgres":
            sql, params = self.end_run_and_claim_statement(
                job,
                result,
                now=now,
                worker=worker,
                limit=limit,
                lease=lease,
                lease_until=lease_until,
                root_id=root_id,
                shown=shown,
            )
            return self.ending(self.all(sql, params))
        run = self.run(job.run_id, lock=True)
        if run is None:
            return None
        if not self.finish_and_record(job, status="succeeded", value=result, now=now):
            return False, False, []
        if shown is not None:
            self.record_shown(job, shown)
        ended = run.status == "running"
        if ended:
            self.end_run(run.id, result=result, now=now)
        claimed = self.claim_with_runs(
            worker,
            limit,
            now=now,
            lease=lease,
            lease_until=lease_until,
            reclaim=False,
            root_id=root_id,
        )
        return True, ended, claimed

    @staticmethod
    def end_run_and_claim_statement(
        job: JobRow,
        result: Any,
        *,
        now: float,
        worker: str,
        limit: int,
        lease: float | None = None,
        lease_until: float | None = None,
        root_id: str | None = None,
        shown: Any = None,
    ) -> tuple[str, tuple[Any, ...]]:
        """`end_run_and_claim` on PostgreSQL: one statement and its parameters.

        Being one statement, it can run as a transaction of its own: one round
        trip for everything a job queue's worker writes per job. Read its rows
        with `ending`.
        """
        body = dumps(result)
        tree, tree_params = _tree(root_id)
        keep_shown = ""
        shown_params: tuple[str, ...] = ()
        if shown is not None:
            keep_shown = (
                "sh AS (INSERT INTO tm_payloads (run_id, key, body) SELECT ?, ?, ? FROM res "
                "ON CONFLICT (run_id, key) DO UPDATE SET body = excluded.body), "
            )
            shown_params = (job.run_id, shown_key(job.id), dumps(shown))  # after `res`'s
        sql = (
            # The run's row is locked first, as every change to a run does; the
            # job is finished only once the lock is held (`EXISTS (... held)`),
            # and each later part runs only when the one before it wrote.
            "WITH held AS (SELECT id, root_id, status FROM tm_runs WHERE id = ? FOR UPDATE), "
            "done AS (UPDATE tm_jobs SET status = 'succeeded', finished_at = ?, error = NULL, "
            "lease_until = NULL WHERE id = ? AND status = 'running' AND epoch = ? "
            "AND EXISTS (SELECT 1 FROM held) RETURNING id), "
            "res AS (INSERT INTO tm_results (run_id, step_id, job_id, status, body, recorded_at) "
            "SELECT ?, ?, id, 'succeeded', ?, ? FROM done RETURNING job_id), "
            f"{keep_shown}"
            "ended AS (UPDATE tm_runs SET status = 'succeeded', finished_at = ? "
            "WHERE id = (SELECT id FROM held WHERE status = 'running') "
            "AND EXISTS (SELECT 1 FROM res) RETURNING id), "
            "kept AS (INSERT INTO tm_payloads (run_id, key, body) "
            "SELECT id, 'result', ? FROM ended "
            "ON CONFLICT (run_id, key) DO UPDATE SET body = excluded.body), "
            f"c AS ({_claim_sql(' AND EXISTS (SELECT 1 FROM res)' + tree)}), "
            # The events, in order: the step finished, the run ended, the jobs claimed.
            "ev AS (INSERT INTO tm_events (root_id, run_id, job_id, step_id, kind, data, at) "
            "SELECT root_id, run_id, job_id, step_id, kind, data, ? FROM ("
            "SELECT 0 AS o, h.root_id, ?::text AS run_id, res.job_id, ?::text AS step_id, "
            "'step_finished' AS kind, ?::text AS data FROM res, held h UNION ALL "
            "SELECT 0 AS o, h.root_id, ended.id, NULL, NULL, 'run_finished', ? "
            "FROM ended, held h UNION ALL "
            "SELECT c.id AS o, r.root_id, c.run_id, c.id, c.step_id, 'step_started', "
            f"{_PG_STARTED_DATA} FROM c JOIN tm_runs r ON r.id = c.run_id) e "
            "ORDER BY o, kind DESC) "
            "SELECT (SELECT count(*) FROM held), (SELECT count(*) FROM res), "
            f"(SELECT count(*) FROM ended), {_CLAIMED} "
            f"FROM (SELECT 1) one LEFT JOIN c ON true {_CLAIMED_JOINS} ORDER BY c.id"
        )
        params = (
            *(job.run_id, now, job.id, job.epoch),
            *(job.run_id, job.step_id, body, now),
            *shown_params,
            *(now, body),
            *(worker, lease, lease_until, now, lease, now, now, *tree_params, limit),
            *(now, job.run_id, job.step_id, _succeeded(job), RUN_SUCCEEDED),
        )
        return postgres_sql(sql), params

    @staticmethod
    def ending(rows: Sequence[Sequence[Any]]) -> Ending | None:
        """What `end_run_and_claim_statement` returned, as `end_run_and_claim` returns it."""
        found, recorded, ended = rows[0][:3]
        if not found:
            return None
        claimed = [_claimed(row[3:]) for row in rows if row[3] is not None]
        return bool(recorded), bool(ended), claimed


def _succeeded(job: JobRow) -> str:
    """The data of a succeeded job's `step_finished` event, as JSON text."""
    return dumps({"status": "succeeded", "attempt": job.attempt})
