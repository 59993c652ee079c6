"""`Worker`: claims jobs from the store, executes them, records what happened.

A worker holds every job it runs under a lease it renews while working
(`Leases`). When its lease is lost (the worker stalled and another took the
job over, or the run was cancelled) it stops that job and its late write is
refused; and before it starts a step, a tool call or a model call it checks
that it still holds the lease (`Lease.hold`), so a worker that wakes from a
stall does not run again what its successor ran. A
worker keeps nothing that another needs: kill it anywhere and another worker
takes its jobs when their leases run out.

A worker that builds its own models (no `models=`) is the composition root
of their HTTP: it makes one `httpx` client (`new_http_client`) on its first
AI step, hands it to every model it builds, whatever the provider, and
closes it after them when `run` ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

import httpx

from tidemill.engine._ids import new_id
from tidemill.engine._journal import Journals
from tidemill.engine._lease import Lease
from tidemill.engine._models import (
    ModelCache,
    ModelChoice,
    ModelResolver,
    default_models,
    sends_requests,
)
from tidemill.engine._outcome import Outcome, SpawnPlan, WaitPlan
from tidemill.engine._step_env import ApprovalPlan, Secrets, StepEnv
from tidemill.engine.ai._child_runs import ChildWait
from tidemill.engine.ai._pause import AgentPause
from tidemill.engine.runs._progress import Take
from tidemill.engine.runs._scope import Definitions
from tidemill.engine.runs._transition import Transition
from tidemill.engine.scripts._pool import ScriptPool
from tidemill.engine.triggers import WorkspaceSchedulers
from tidemill.engine.workers._execute import execute, stop_requested
from tidemill.engine.workers._leases import Leases
from tidemill.engine.workers._listen import listen_forever
from tidemill.engine.workers._logs import LiveLogs
from tidemill.engine.workers._masking import mask_action, shown_copy
from tidemill.engine.workers._prepare import Prepared, Preparer, known_results
from tidemill.engine.workers._references import References
from tidemill.engine.workers._retention import Retention
from tidemill.engine.workers._sweeper import Sweeper
from tidemill.errors import LeaseLost, RunNotFound, StoreError
from tidemill.flows import Step
from tidemill.llm import Model
from tidemill.llm.http._client import new_http_client
from tidemill.store import ApprovalRow, JobRow, RunRow, Store, Tx

if TYPE_CHECKING:
    from tidemill.engine._metrics import Metrics

__all__ = ["Worker"]

log = logging.getLogger("tidemill.worker")


class Worker:
    """Executes the jobs of a store, up to `concurrency` at once.

    Args:
        store: The store to take jobs from.
        concurrency: Jobs run at once.
        defs: Flow definitions already parsed (shared with an engine).
        lease: Seconds a claim lasts without renewal; renewed every third of it.
        poll: Seconds between claims when nothing wakes the worker (PostgreSQL
            `NOTIFY` and work queued in this process wake it early). The
            default is 0.25 on SQLite, which has no `NOTIFY`, and 1 on PostgreSQL.
        pool_size: Script processes to keep ready (default: `concurrency`).
        worker_id: A name for the worker in the store (default: host and pid).
        on_event: Called with `(kind, job)` when a job starts (`claimed`) or
            ends (`finished`); for progress displays.
        on_run_ended: Called when this worker has ended a run (after the commit).
        models: Builds the model of each AI step (default: from its spec, with
            the provider layer, once per spec for the worker's life; pass a
            resolver of scripted models offline).
        http_client: The `httpx` client the models the worker builds itself
            (no `models=`) send their requests with; it stays the caller's
            to close. By default the worker makes one on its first AI step
            and closes it when `run` ends. Either way every such model, of
            every provider, shares it (one connection pool per worker; each
            model keeps its own timeout and retries). The client belongs to
            the event loop `run` runs on (all the worker's steps run there):
            give a worker a client no other loop uses.
        max_claims: A job claimed more often than this (each worker holding it
            died or hung past its lease) fails with `WorkerLost` instead of
            being run again.
        metrics: Where AI steps count their model calls, tokens, tool calls and
            bound crossings, and the worker its schedule fires, woken waits and
            pruned runs (`tidemill.engine.Metrics`); None records nothing.
        run_id: Execute only this top-level run and the runs it spawns (its
            branches, loops, sub-flows and the child runs of its agents' tool
            calls): the claims take no other job. None (the default) takes
            every job of the store. `tidemill run` starts its worker so.
        log_flush: Seconds between writes of what running script steps print
            (one transaction for all of them); what a step prints is in the
            store within about this long, and the rest when it ends.
        engine: The engine the worker works for (`engine.worker()` passes
            itself): given to in-process agent tools (`ToolRun.engine`).
        schedules: Fire every workspace's schedules too (`WorkspaceSchedulers`),
            unless the worker executes only `run_id`. Any number of workers
            and servers may: each fire starts once.
        keep_runs: Seconds an ended run is kept: every minute the worker
            prunes older ones (`Retention`). None (the default) prunes nothing.

    Examples:
        >>> import asyncio
        >>> from tidemill.engine import AsyncEngine, ModelChoice
        >>> from tidemill.llm import new_http_client
        >>> async def main() -> None:
        ...     client = new_http_client()  # one for the process, closed by whoever made it
        ...     async with AsyncEngine("sqlite:///:memory:", migrate=True) as engine:
        ...         async with engine.worker(http_client=client) as worker:
        ...             fast = worker.models(ModelChoice("ollama:llama3"))
        ...             smart = worker.models(ModelChoice("ollama:qwen3"))
        ...             print(fast.http.owns_client, smart.http.owns_client)
        ...         print(client.is_closed)  # the worker stopped; the client is still ours
        ...     await client.aclose()
        >>> asyncio.run(main())
        False False
        False
    """

    def __init__(
        self,
        store: Store,
        *,
        concurrency: int = 4,
        defs: Definitions | None = None,
        lease: float = 30.0,
        poll: float | None = None,
        pool_size: int | None = None,
        worker_id: str | None = None,
        on_event: Callable[[str, JobRow], None] | None = None,
        on_run_ended: Callable[[], None] | None = None,
        models: ModelResolver | None = None,
        max_claims: int = 10,
        metrics: Metrics | None = None,
        http_client: httpx.AsyncClient | None = None,
        run_id: str | None = None,
        log_flush: float = 1.0,
        engine: object = None,
        schedules: bool = True,
        keep_runs: float | None = None,
    ) -> None:
        self.store = store
        self.engine = engine
        self.run_id = run_id
        self.schedules = schedules
        self.concurrency = max(1, concurrency)
        self.defs = defs or Definitions()
        self.lease = lease
        self.poll = poll if poll is not None else (0.25 if store.dialect == "sqlite" else 1.0)
        self.pool_size = pool_size or self.concurrency
        self.id = worker_id or f"{socket.gethostname()}:{os.getpid()}:{new_id()[-8:]}"
        self.on_event = on_event
        self.on_run_ended = on_run_ended
        self._given_http = http_client
        self._http: httpx.AsyncClient | None = None
        self._own_models = ModelCache(self._build_model) if models is None else None
        self.models: ModelResolver = models or self._own_models or default_models
        self.max_claims = max_claims
        self.metrics = metrics
        self._pool: ScriptPool | None = None
        self._journals = Journals()
        self._logs = LiveLogs(store, interval=log_flush)
        self._leases = Leases(store, self.id, lease)
        self._slots: set[asyncio.Task[None]] = set()
        self._wake = asyncio.Event()
        self._preparer = Preparer(self.defs)
        self._references = References(store)
        self._sweeper = Sweeper(store, self.defs, poll=self.poll, metrics=metrics)
        self.retention = None if keep_runs is None else Retention(store, keep_runs, metrics=metrics)
        self.reclaim_every = min(1.0, lease / 4)
        self._last_reclaim = 0.0
        self.processed = 0
        self._stopping = False

    def wake(self) -> None:
        """Claim again now (new jobs were queued in this process)."""
        self._wake.set()

    def _build_model(self, choice: ModelChoice) -> Model:
        """The default resolver: a model from its spec, on the worker's one client."""
        client = self._http_client() if sends_requests(choice.spec) else None
        return default_models(choice, http_client=client)

    def _http_client(self) -> httpx.AsyncClient:
        """The `httpx` client the worker's own models share (made on first use)."""
        if self._given_http is not None:
            return self._given_http
        if self._http is None or self._http.is_closed:
            self._http = new_http_client()
        return self._http

    async def _close_models(self) -> None:
        """Close the models built here, then the client they shared (if the worker's)."""
        try:
            if self._own_models is not None:
                await self._own_models.aclose()
        finally:
            client, self._http = self._http, None
            if client is not None:
                await client.aclose()

    def _script_pool(self) -> ScriptPool:
        if self._pool is None:
            self._pool = ScriptPool(size=self.pool_size)
        return self._pool

    async def run(self, stop: asyncio.Event | None = None) -> None:
        """Work until `stop` is set (or forever); then finish the jobs in hand."""
        stop = stop or asyncio.Event()
        # Renewals go on until the last step in hand ends: they are how a cancel reaches it.
        renewing = asyncio.create_task(self._leases.renew_forever())
        helpers: list[asyncio.Task[None]] = []
        writing = asyncio.create_task(self._logs.run())  # until the slots are done
        channel = self.store.listen_dsn()
        if channel is not None:
            helpers.append(asyncio.create_task(listen_forever(self.store, self._wake)))
        if self.schedules and self.run_id is None:
            schedulers = WorkspaceSchedulers(
                self.store, self.defs, on_fired=self.wake, metrics=self.metrics
            )
            helpers.append(asyncio.create_task(schedulers.run(stop)))
        if self.retention is not None and self.run_id is None:
            helpers.append(asyncio.create_task(self.retention.run(stop)))
        try:
            while not stop.is_set():
                self._wake.clear()
                free = self.concurrency - len(self._slots)
                claimed = await self._claim(free) if free > 0 else []
                for prepared in claimed:
                    self._start(prepared)
                if self._sweeper.due() and await self._sweeper.sweep():
                    continue  # runs moved on: their next steps may be queued
                if claimed and len(claimed) == free:
                    continue  # there may be more: claim again once a slot frees
                await self._idle(stop)
        finally:
            self._stopping = True
            for helper in helpers:
                helper.cancel()
            await asyncio.gather(*helpers, return_exceptions=True)
            try:
                if self._slots:
                    await asyncio.gather(*self._slots, return_exceptions=True)
            finally:
                renewing.cancel()
                await asyncio.gather(renewing, return_exceptions=True)
                writing.cancel()
                await asyncio.gather(writing, return_exceptions=True)
                try:
                    await self._logs.flush()
                    if self._pool is not None:
                        await self._pool.close()
                        self._pool = None
                finally:
                    try:
                        await self._journals.aclose()
                    finally:
                        await self._close_models()

    async def _idle(self, stop: asyncio.Event) -> None:
        """Sleep until woken, a slot frees, `stop` is set, the next sweep, or the poll interval."""
        waits = [asyncio.ensure_future(self._wake.wait()), asyncio.ensure_future(stop.wait())]
        timeout = min(self.poll, self._sweeper.seconds_left())
        await asyncio.wait(
            [*waits, *self._slots], timeout=timeout, return_when=asyncio.FIRST_COMPLETED
        )
        for future in waits:
            future.cancel()

    async def _claim(self, limit: int) -> list[Prepared]:
        """Claim jobs and read what they need, in one transaction.

        Expired leases are looked for once every `reclaim_every` seconds
        (they are rare; the queued jobs are looked for on every claim).
        """
        sent, now = time.monotonic(), time.time()
        reclaim = sent - self._last_reclaim >= self.reclaim_every
        if reclaim:
            self._last_reclaim = sent

        def claim(tx: Tx) -> list[Prepared]:
            jobs = tx.claim(
                self.id, limit, now=now, lease=self.lease, reclaim=reclaim, root_id=self.run_id
            )
            return [self._prepare(tx, job=job) for job in jobs]

        try:
            claimed = await self.store.transact(claim)
        except StoreError as exc:
            log.warning("claim failed, will retry: %s", exc)
            return []
        for prepared in claimed:
            prepared.sent = sent
        return claimed

    def _start(self, prepared: Prepared) -> None:
        task = asyncio.create_task(self._slot(prepared))
        self._slots.add(task)
        task.add_done_callback(self._slots.discard)

    async def _slot(self, first: Prepared) -> None:
        """Run a job, then any job its completion handed straight to this worker."""
        prepared: Prepared | None = first
        job: JobRow | None = first.job
        while job is not None:
            lease = self._leases.take(job, first.sent if prepared is None else prepared.sent)
            if self.on_event is not None:
                self.on_event("claimed", job)
            try:
                if prepared is None:
                    prepared = await self.store.transact(partial(self._prepare, job=job))
                taken = await self._execute(prepared, lease)
            except asyncio.CancelledError:
                current = asyncio.current_task()
                if current is not None and current.cancelling():
                    # The worker is stopping and abandons the step: queue it again at
                    # once, for another worker, rather than leave it to its lease.
                    with contextlib.suppress(asyncio.CancelledError):
                        await asyncio.shield(self._leases.abandon(job, retry_in=0.0))
                    raise
                log.info("job %s stopped: its lease was lost or its run cancelled", job.id)
                taken = []
            except LeaseLost as exc:
                log.info("%s", exc)
                # Also when the store could not say (locked, unreachable): queue the job
                # again, fenced by its epoch, or no worker takes it (none takes its own).
                await self._leases.abandon(job, retry_in=0.0)
                taken = []
            except Exception:
                log.exception("job %s: could not record it; it will run again", job.id)
                await self._leases.abandon(job, retry_in=min(self.lease, 5.0))
                taken = []
            finally:
                self._leases.release(lease)
                self.processed += 1
                if self.on_event is not None:
                    self.on_event("finished", job)
            prepared = None
            job = None
            if taken:
                job, prepared = taken[0]

    def _prepare(
        self,
        tx: Tx,
        *,
        job: JobRow,
        known: dict[str, Any] | None = None,
        run: tuple[RunRow, Any] | None = None,
    ) -> Prepared:
        """Read what executing `job` needs (see `Preparer`), and resolve its references."""
        prepared = self._preparer(tx, job=job, known=known, run=run)
        self._references.prefetch(tx, prepared.run, job, prepared.step, prepared.context)
        return prepared

    async def _execute(self, prepared: Prepared, lease: Lease) -> list[tuple[JobRow, Prepared]]:
        """Run the job's step, then record what it did and claim what comes next.

        Losing the lease cancels the step (a task of its own), never the recording.
        """
        job, run, step, context = prepared.job, prepared.run, prepared.step, prepared.context
        secrets = Secrets()  # what the step resolves: masked in all the job records
        env = StepEnv(
            job, run, self._script_pool, self.models, self.store, journals=self._journals,
            metrics=self.metrics, on_output=self._logs.open(job, secrets), lease=lease,
            secrets=secrets, engine=self.engine,
        )  # fmt: skip
        running = asyncio.create_task(self._run_step(job, step, context, env))
        with self._leases.step(lease, running):
            action = await running
        if isinstance(action, Outcome) and self._ends_run_alone(run, step, action):
            return await self._end_run(job, action.result, action.shown)
        # A stopping worker starts nothing more, not even the next step of this run.
        take = None if self._stopping else Take(self.id, None, 1, self.run_id, lease=self.lease)

        def record(tx: Tx) -> tuple[list[tuple[JobRow, Prepared]], bool, bool]:
            change = Transition(tx, self.defs, time.time(), take)
            taken = self._apply(change, job, step, context, action)
            prepared = [
                (t, self._prepare(tx, job=t, known=known_results(change.recorded, t.run_id)))
                for t in taken
            ]
            for t, ready in prepared:  # the run, as locked here, may be newly masked
                ready.run.masked = ready.run.masked or t.run_id in change.masked
            if not taken and not self._stopping:
                # This slot frees up: take the next queued job in the same transaction.
                for job_, run_, ctx in tx.claim_with_runs(
                    self.id, 1, now=change.now, lease=self.lease, reclaim=False, root_id=self.run_id
                ):
                    prepared.append((job_, self._prepare(tx, job=job_, run=(run_, ctx))))
            return prepared, bool(change.ended), change.queued

        sent = time.monotonic()
        try:
            taken, ended, queued = await self.store.transact(record)
        except LeaseLost:
            if isinstance(action, Outcome) and action.logs:
                await self._logs.keep(job, list(action.logs))  # what this attempt printed
            raise
        _claimed_at(taken, sent)
        if queued:
            self.wake()  # this worker may have free slots for them
        if ended and self.on_run_ended is not None:
            self.on_run_ended()  # after the commit, so a waiter reads the end
        return taken

    def _apply(
        self,
        change: Transition,
        job: JobRow,
        step: Step,
        context: dict[str, Any],
        action: Outcome | SpawnPlan | ApprovalPlan | ChildWait | WaitPlan,
    ) -> list[JobRow]:
        """Record what the step did, by kind; return the jobs handed to this worker."""
        if isinstance(action, Outcome):
            if action.status == "succeeded" and step.stop_after_if is not None:
                try:
                    action.stop = stop_requested(step, context, action.result)
                except Exception as exc:
                    action.status = "failed"
                    action.error = {"type": type(exc).__name__, "message": str(exc)}
                    action.retryable = False
            taken = change.complete(job, action)
        elif isinstance(action, SpawnPlan):
            taken = change.spawn(job, action)
        elif isinstance(action, AgentPause):
            change.park_for_tool_calls(job, action)
            taken = []
        elif isinstance(action, ChildWait):
            taken = change.park_for_children(job, action)
        elif isinstance(action, WaitPlan):
            taken = change.park_for_wait(job, action)
            self._sweeper.expect(action.due_at)
        else:
            assert isinstance(action, ApprovalPlan)
            change.park_for_approval(
                job,
                message=action.message,
                approvers=action.approvers,
                timeout=action.timeout,
                on_timeout=action.on_timeout,
                allow_self_approval=action.allow_self_approval,
            )
            taken = []
        return taken

    async def _run_step(
        self, job: JobRow, step: Step, context: dict[str, Any], env: StepEnv
    ) -> Outcome | SpawnPlan | ApprovalPlan | ChildWait | WaitPlan:
        """Execute the step; what it printed and is not stored yet joins its outcome.

        A step stopped on the way (its run cancelled, its lease lost, the
        worker abandoning it) has its output stored before it stops.
        """
        if job.epoch > self.max_claims and await self._claims(job, step) > self.max_claims:
            # Every worker that took this job died with it: stop handing it out.
            await self._logs.close(job)
            return Outcome(
                "failed",
                error={
                    "type": "WorkerLost",
                    "message": f"the step was claimed {job.epoch} times and each worker "
                    "stopped before recording it (a crash or kill in the step?)",
                },
                retryable=False,
            )
        try:
            await env.hold()  # a stall since the claim may have outlived the lease
            action = await execute(step, context, env, self._references)
        except BaseException:
            await asyncio.shield(self._logs.keep(job))
            raise
        if isinstance(action, Outcome):
            self._references.forget(job)  # the job ends here: nothing reuses what it resolved
            action.shown = shown_copy(action, env.secrets)  # what the API shows of it, masked
        rest = await self._logs.close(job)
        if env.secrets:
            action = mask_action(action, env.secrets)
        if rest and isinstance(action, Outcome):
            action.logs = (*rest, *action.logs)
        elif rest:
            await self._logs.keep(job, rest)
        return action

    def _ends_run_alone(self, run: RunRow, step: Step, outcome: Outcome) -> bool:
        """True when recording `outcome` only ends the run: a job queue's common case.

        That is a plain success (nothing printed, no model usage, no memory, no
        `stop_after_if`) of the only step of a top-level run outside any
        concurrency gate, whose result is the run's result. `Transition.complete`
        would then lock the run, record the result and end the run, and
        nothing else; `_end_run` does the same in one statement.
        """
        if outcome.status != "succeeded" or outcome.logs or outcome.usage or outcome.stop:
            return False
        if outcome.memory is not None or step.stop_after_if is not None:
            return False
        if outcome.masked_result:
            return False  # it returned a secret: its run's result is shown masked
        if run.parent_job is not None or run.concurrency_key is not None:
            return False
        scope = self.defs.scope(run.digest, run.scope)
        return len(scope.steps) == 1 and scope.result is None

    async def _end_run(self, job: JobRow, result: Any, shown: Any) -> list[tuple[JobRow, Prepared]]:
        """Record the job, end its run and claim the next job, in one statement.

        On PostgreSQL that statement is its own transaction, run on the event
        loop (`Store.write_one`): one round trip and no store-thread hop per
        job. What the next job needs comes from caches when it can.
        """
        sent, now = time.monotonic(), time.time()
        options: dict[str, Any] = {
            "now": now, "worker": self.id, "limit": 0 if self._stopping else 1,
            "lease": self.lease, "root_id": self.run_id, "shown": shown,
        }  # fmt: skip
        if self.store.dialect == "postgres":
            sql, params = Tx.end_run_and_claim_statement(job, result, **options)
            ending = Tx.ending(await self.store.write_one(sql, params))
        else:
            ending = await self.store.transact(
                lambda tx: tx.end_run_and_claim(job, result, **options)
            )
        if ending is None:
            raise RunNotFound(f"Run {job.run_id} is gone.")
        recorded, ended, claimed = ending
        if not recorded:
            raise LeaseLost(
                f"Job {job.id} ({job.step_id}) is no longer held at epoch {job.epoch}.",
                context={"job": job.id, "epoch": job.epoch},
            )
        if ended and self.on_run_ended is not None:
            self.on_run_ended()
        taken = []
        for next_job, run, context in claimed:
            prepare = partial(self._prepare, job=next_job, run=(run, context))
            try:
                try:
                    ready = prepare(Tx.offline(self.store.dialect))
                except StoreError:  # it needs to read the store
                    ready = await self.store.transact(prepare)
            except Exception:  # the claim is committed: give the job back
                log.exception("job %s: could not prepare it; queueing it again", next_job.id)
                await self._release(next_job)
                continue
            ready.sent = sent
            taken.append((next_job, ready))
        return taken

    async def _release(self, job: JobRow) -> None:
        """Queue a job this worker claimed but could not start; else its lease runs out."""
        try:
            await self.store.transact(lambda tx: tx.release_job(job.id, job.epoch))
        except StoreError as exc:
            log.warning("job %s: could not queue it again (%s); its lease will expire", job.id, exc)

    async def _claims(self, job: JobRow, step: Step) -> int:
        """How often workers took `job` and stopped without recording anything.

        An agent step's job is claimed once more after each of its pauses for
        approval (it is queued again when they are decided); those claims are
        not lost ones.
        """
        if step.kind != "ai_agent":
            return job.epoch

        def read(tx: Tx) -> tuple[list[ApprovalRow], list[RunRow]]:
            return tx.job_approvals(job.id), tx.children(job.id)

        rows, children = await self.store.transact(read)
        pauses = {row.created_at for row in rows if row.kind == "tool_call"}
        # Each wait for tool calls' child runs ends in one more claim, at most one per child.
        return job.epoch - len(pauses) - len(children)


def _claimed_at(taken: list[tuple[JobRow, Prepared]], sent: float) -> None:
    """Stamp jobs claimed by a transaction sent at `sent`: when their leases start."""
    for _, prepared in taken:
        prepared.sent = sent
