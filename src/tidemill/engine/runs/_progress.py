"""How a run moves on once something in it ends, inside one transaction.

`Progress` holds a transaction's run changes and their machinery: queueing
the steps whose needs are done (or handing them to the worker that offered
to `Take` them), recording a step's result and scheduling its dependents,
finishing a run and waking its parent (a container's job, or the agent step
whose tool call started it), failing a run and cancelling what is left of
it, and letting the next run through a concurrency gate. The public changes
are its subclasses' (see `Transition`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tidemill.engine._ids import new_id
from tidemill.engine._step_env import MASK
from tidemill.engine.ai._child_runs import is_tool_child
from tidemill.engine.runs._context import load_definition
from tidemill.engine.runs._scope import Definitions, Scope, child_scope
from tidemill.errors import ExpressionError, LeaseLost, RunNotFound
from tidemill.flows import Step
from tidemill.store import FINISHED_RUN, JobRow, RunRow, Tx

__all__ = ["Progress", "Take", "lease_lost"]

_MISSING = object()


@dataclass(frozen=True, slots=True)
class Take:
    """A worker's offer to run newly scheduled jobs at once (in the same transaction)."""

    worker: str
    lease_until: float | None
    """When the taken jobs' leases end, on the worker's clock (with no `lease`)."""
    limit: int = 1
    root_id: str | None = None
    """Take only jobs of this run's tree (a worker started for one run); None: any."""
    lease: float | None = None
    """Seconds the taken jobs' leases last, on the database's clock; else `lease_until`."""


@dataclass
class Progress:
    """One transaction's worth of run changes.

    Args:
        tx: The open transaction.
        defs: The flows this process knows.
        now: The transaction's clock (seconds since the epoch).
        take: A worker's offer to start newly scheduled jobs at once.
    """

    tx: Tx
    defs: Definitions
    now: float
    take: Take | None = None
    taken: list[JobRow] = field(default_factory=list)
    recorded: dict[tuple[str, str], Any] = field(default_factory=dict)
    """Results recorded in this transaction, by (run id, step id)."""
    ended: list[str] = field(default_factory=list)
    """Top-level runs that ended in this transaction."""
    queued: bool = False
    """True when this transaction queued jobs (workers should claim)."""
    masked: set[str] = field(default_factory=set)
    """Runs seen masked in this transaction (a step returned a secret; `RunRow.masked`)."""
    _locked: set[str] = field(default_factory=set)
    _notify: bool = False

    # --- child runs ------------------------------------------------------

    def _spawn_child(self, parent: RunRow, job: JobRow, index: int, part: str, ctx: Any) -> None:
        run_id = new_id()
        child = RunRow(
            run_id, parent.root_id, parent.id, job.id, index,
            child_scope(parent.scope, job.step_id, part), parent.flow_name, parent.digest,
            "running", None, self.now, self.now, None, None, parent.run_as, parent.source,
            parent.memory_id,
        )  # fmt: skip
        self.tx.insert_run(child)
        self.tx.put_payload(run_id, "context", ctx)
        self._schedule(child, {})

    # --- scheduling ------------------------------------------------------

    def _scope(self, run: RunRow) -> Scope:
        load_definition(self.tx, self.defs, run.digest)
        return self.defs.scope(run.digest, run.scope)

    def _schedule(self, run: RunRow, states: dict[str, str]) -> None:
        """Queue the steps whose needs are done (handing some to the worker that offered)."""
        self._start_steps(run, self._scope(run).ready(states))

    def _start_steps(self, run: RunRow, steps: list[Step]) -> None:
        take = self.take
        if take is not None and take.root_id not in (None, run.root_id):
            take = None  # another run's steps (a gate let it through): for any worker
        for step in steps:
            if take is not None and len(self.taken) < take.limit:
                job = self.tx.insert_job(
                    run.id, step.id, 1, now=self.now, status="running",
                    worker=take.worker, lease=take.lease, lease_until=take.lease_until,
                )  # fmt: skip
                self.tx.add_event(
                    run.id, "step_started", {"attempt": 1, "worker": take.worker}, now=self.now,
                    root_id=run.root_id, job_id=job.id, step_id=step.id,
                )  # fmt: skip
                self.taken.append(job)
            else:
                self.tx.insert_job(run.id, step.id, 1, now=self.now)
                self._notify = True

    def flush(self) -> None:
        """Wake workers if this transaction queued jobs."""
        if self._notify:
            self.tx.notify()
            self._notify = False
            self.queued = True

    # --- a step finished -------------------------------------------------

    def _recorded(
        self,
        run: RunRow,
        step_id: str,
        job_id: int,
        status: str,
        value: Any,
        stop: bool,
        *,
        stored: bool = False,
    ) -> None:
        """A step of `run` is done: store its result (unless `stored`), then move on."""
        if not stored:
            self.tx.insert_result(run.id, step_id, job_id, status, value, self.now)
        if run.status != "running":
            return  # the run was cancelled or failed meanwhile; keep the result only
        if stop:
            self._cancel_rest(run)
            self._finish_run(run, value)
            return
        self.recorded[(run.id, step_id)] = value
        scope = self._scope(run)
        dependents = scope.dependents[step_id]
        if dependents and all(scope.needs[d] == (step_id,) for d in dependents):
            # The common case (a chain, a fan-out): no other step's state matters.
            self._start_steps(run, [scope.by_id[d] for d in dependents])
            return
        run = self._lock(run)
        if not dependents and len(scope.steps) == 1:
            self._finish_run(run, self._body_result(run, scope))
            return
        states = self.tx.step_states(run.id)
        if dependents:
            self._schedule(run, states)
        elif scope.complete(states):
            self._finish_run(run, self._body_result(run, scope))

    def _lock(self, run: RunRow) -> RunRow:
        """The run's row, locked until the transaction ends (read afresh once)."""
        if run.id in self._locked:
            return run
        locked = self._fetch_locked(run.id)
        if locked is None:
            raise RunNotFound(f"Run {run.id} is gone.")
        return locked

    def _fetch_locked(self, run_id: str) -> RunRow | None:
        run = self.tx.run(run_id, lock=True)
        if run is not None:
            self._locked.add(run_id)
            if run.masked:
                self.masked.add(run_id)
        return run

    def _body_result(self, run: RunRow, scope: Scope) -> Any:
        if scope.result is None:
            known = self.recorded.get((run.id, scope.last), _MISSING)
            if known is not _MISSING:
                return known
            return self.tx.results(run.id, [scope.last]).get(scope.last)
        step_results = self.tx.results(run.id)
        payload = self.tx.payload(run.id, "context", {})
        context = {"flow_input": payload.get("flow_input", {}), "results": step_results}
        return scope.result.evaluate(context)

    def _shown_result(self, run: RunRow, value: Any) -> Any:
        """A masked run's result as shown: from its steps' masked results where they have one.

        An expression that cannot be evaluated on the masked values (they are
        strings where the real ones are) shows `***` for the whole result.
        """
        scope = self._scope(run)
        masked = self.tx.masked_results(run.id)
        if scope.result is None:
            return masked.get(scope.last, value)
        results = {**self.tx.results(run.id), **masked}
        payload = self.tx.payload(run.id, "context", {})
        context = {"flow_input": payload.get("flow_input", {}), "results": results}
        try:
            return scope.result.evaluate(context)
        except ExpressionError:
            return MASK

    def _finish_run(self, run: RunRow, value: Any) -> None:
        if run.masked:
            self.tx.put_shown_result(run.id, self._shown_result(run, value))
        self.tx.end_run(run.id, result=value, now=self.now)
        run.status = "succeeded"
        if run.parent_job is not None and is_tool_child(run.scope):
            self._tool_child_done(run)
        elif run.parent_job is not None:
            self._child_done(run)
        else:
            self.ended.append(run.id)
            self._release_gate(run)

    # --- containers ------------------------------------------------------

    def _child_done(self, child: RunRow) -> None:
        assert child.parent_id is not None
        assert child.parent_job is not None
        parent = self._fetch_locked(child.parent_id)
        job = self.tx.job(child.parent_job)
        if parent is None or job is None or job.status != "waiting":
            return
        children = self.tx.children(job.id)
        step = self._scope(parent).by_id[job.step_id]
        if step.for_each is not None:
            items = self.tx.payload(parent.id, f"items:{job.id}", [])
            if len(children) < len(items):
                index = len(children)
                ctx = self.tx.payload(child.id, "context", {})
                ctx = {**ctx, "iter": {"value": items[index], "index": index}}
                self._spawn_child(parent, job, index, "body", ctx)
                return
        if any(c.status != "succeeded" for c in children):
            return
        values = [self.tx.payload(c.id, "result") for c in children]
        many = step.for_each is not None or step.parallel is not None
        if any(c.masked for c in children):  # the container's result is shown masked too
            shown = [self.tx.shown_result(c.id, v) if c.masked else v for c, v in
                     zip(children, values, strict=True)]  # fmt: skip
            self.tx.record_masked(parent.id, job.step_id, shown if many else shown[0])
            parent.masked = True
            self.masked.add(parent.id)
        self._container_done(parent, job, values if many else values[0])

    def _container_done(self, run: RunRow, job: JobRow, value: Any) -> None:
        self.tx.finish_job(job.id, status="succeeded", now=self.now, epoch=None, expect="waiting")
        self._recorded(run, job.step_id, job.id, "succeeded", value, False)

    # --- tool calls' child runs ----------------------------------------------

    def _tool_child_done(self, child: RunRow) -> None:
        """A tool call's child run ended: queue its agent step once none of its children runs."""
        assert child.parent_id is not None
        assert child.parent_job is not None
        parent = self._fetch_locked(child.parent_id)
        job = self.tx.job(child.parent_job)
        if parent is None or parent.status != "running" or job is None:
            return
        if job.status == "waiting":
            self._wake_when_children_ended(job)

    def _wake_when_children_ended(self, job: JobRow) -> None:
        if any(c.status not in FINISHED_RUN for c in self.tx.children(job.id)):
            return
        if self.tx.requeue_job(job.id, self.now):
            self._notify = True

    # --- failure, cancellation -------------------------------------------

    def _fail_run(self, run: RunRow, step_id: str, error: Mapping[str, Any]) -> None:
        label = "" if run.parent_id is None else _label(self.tx, run)
        where = f"{label}/{step_id}" if label else step_id
        error = {**error, "step": error.get("step", where)}
        self._cancel_rest(run)
        self.tx.set_run(run.id, status="failed", finished_at=self.now, error=error)
        run.status = "failed"
        if run.parent_job is not None and is_tool_child(run.scope):
            self._tool_child_done(run)  # the agent's model is told; its run goes on
        elif run.parent_job is not None and run.parent_id is not None:
            parent = self._fetch_locked(run.parent_id)
            job = self.tx.job(run.parent_job)
            if parent is None or job is None or job.status != "waiting":
                return
            self.tx.finish_job(
                job.id, status="failed", now=self.now, epoch=None, expect="waiting", error=error
            )
            if parent.status == "running":
                self._fail_run(parent, job.step_id, error)
        else:
            self.ended.append(run.id)
            self._release_gate(run)

    def _cancel_rest(self, run: RunRow) -> None:
        """Cancel a run's unfinished jobs, their child runs and approvals."""
        for job in self.tx.cancel_jobs(run.id, self.now):
            if job.status in ("waiting", "running"):  # containers; agents' tool calls
                for child in self.tx.children(job.id):
                    if child.status not in FINISHED_RUN:
                        self._cancel_run(child)
        self.tx.cancel_approvals(run.id, self.now)

    def _cancel_run(self, run: RunRow) -> None:
        self._cancel_rest(run)
        self.tx.set_run(run.id, status="cancelled", finished_at=self.now)
        run.status = "cancelled"

    # --- concurrency -----------------------------------------------------

    def _release_gate(self, run: RunRow) -> None:
        key = run.concurrency_key
        if key is None:
            return
        self.tx.lock_gate(key)
        limit = self._gate_limit(run)
        while limit is not None and self.tx.gate_active(key) < limit:
            waiting = self.tx.gate_next(key)
            if waiting is None:
                return
            self.tx.set_run(waiting.id, status="running", started_at=self.now)
            waiting.status = "running"
            self._schedule(waiting, {})

    def _gate_limit(self, run: RunRow) -> int | None:
        flow = load_definition(self.tx, self.defs, run.digest)
        return None if flow.concurrency is None else flow.concurrency.limit


def lease_lost(job: JobRow) -> LeaseLost:
    """The error for a write by a worker that no longer holds `job` at its epoch."""
    return LeaseLost(
        f"Job {job.id} ({job.step_id}) is no longer held at epoch {job.epoch}.",
        context={"job": job.id, "epoch": job.epoch},
    )


def _label(tx: Tx, run: RunRow) -> str:
    """Where a child run sits, from the top, for messages: `each[2]/inner[0]`, `pick`, `sub`.

    Loop iterations and parallel branches carry their index; a branch case
    and a sub-flow do not (there is only one). Within a tool call's child
    run, the path starts at that child's flow.
    """
    segments: list[str] = []
    current: RunRow | None = run
    while current is not None and current.parent_id is not None:
        if is_tool_child(current.scope):
            break  # a tool call's child run: its steps are named within its own flow
        step, part = json.loads(current.scope)[-1]
        indexed = part == "body" or part.startswith("branch:")
        segments.append(f"{step}[{current.child_index}]" if indexed else step)
        current = tx.run(current.parent_id)
    return "/".join(reversed(segments))
