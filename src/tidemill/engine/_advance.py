"""How a run moves on: every state change of runs and jobs, one transaction each.

Each public function here takes a `Tx` and runs inside one store
transaction, so recording a step's result and scheduling the steps it
unblocks (or finishing the run, or waking the parent run of a branch or
loop) happen together or not at all. Writes by a worker name the epoch of
its claim; a worker whose lease was taken over gets `LeaseLost` and changes
nothing.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from tidemill.engine._ids import new_id
from tidemill.engine._scope import Definitions, Scope, child_scope
from tidemill.engine.ai._approvals import check_decision, expired_decision
from tidemill.engine.ai._budget import check_extend
from tidemill.engine.ai._child_runs import ChildWait, is_tool_child, own_path, tool_part
from tidemill.engine.ai._question import check_answer, expired_answer
from tidemill.engine.ai._reconcile import check_reconcile
from tidemill.errors import (
    ApprovalDecisionError,
    LeaseLost,
    RunNotFound,
    RunStateError,
)
from tidemill.flows import Flow, Step, compile_expression, placeholders
from tidemill.store import FINISHED_RUN, ApprovalRow, JobRow, RunRow, Tx

if TYPE_CHECKING:
    from tidemill.engine.ai._memory import MemoryWrite
    from tidemill.engine.ai._pause import AgentPause

__all__ = [
    "Outcome",
    "SpawnPlan",
    "Take",
    "Transition",
    "context_for",
    "load_definition",
    "step_reads",
    "top_run_or_error",
]

_DONE = ("succeeded", "skipped")
_MISSING = object()


@dataclass(slots=True)
class Outcome:
    """What executing a step produced.

    Attributes:
        status: `succeeded`, `skipped` (its `skip_if` held) or `failed`.
        result: The step's JSON result.
        error: For a failure: `type`, `message`, and `traceback` for scripts.
        retryable: False for failures a retry cannot fix (a bad expression).
        stop: True when the step's `stop_after_if` held.
        logs: What the step printed, as `(stream, text)` pairs.
        usage: One record per model call the step made (see `Tx.insert_usage`).
        memory: For an `ai_agent` step with memory: the exchange to append
            to it, in the transaction that records a success (else dropped).
    """

    status: Literal["succeeded", "skipped", "failed"]
    result: Any = None
    error: dict[str, Any] | None = None
    retryable: bool = True
    stop: bool = False
    logs: tuple[tuple[str, str], ...] = ()
    usage: tuple[dict[str, Any], ...] = ()
    memory: MemoryWrite | None = None


@dataclass(slots=True)
class SpawnPlan:
    """What a container step starts: child runs, one per body instance.

    Attributes:
        parts: The body of each child to start now (`case:0`, `branch:1`,
            `body`, `flow`), in declared order. Empty means the container is
            done at once with `empty_result` (no case matched, no items).
        contexts: Each child's context: `flow_input`, and `iter` in loops.
        items: A loop's items (all of them; only the first `parts` start now).
        parallelism: How many loop iterations may run at once.
        empty_result: The result when nothing is started.
    """

    parts: list[str]
    contexts: list[dict[str, Any]]
    items: list[Any] | None = None
    parallelism: int = 1
    empty_result: Any = None


@dataclass(frozen=True, slots=True)
class Take:
    """A worker's offer to run newly scheduled jobs at once (in the same transaction)."""

    worker: str
    lease_until: float
    limit: int = 1


def load_definition(tx: Tx, defs: Definitions, digest: str) -> Flow:
    """The flow `digest`, from the cache or the store."""
    if defs.known(digest):
        return defs.flow(digest, None)
    return defs.flow(digest, tx.definition(digest))


def context_for(
    tx: Tx,
    defs: Definitions,
    run: RunRow,
    step: Step,
    payload: dict[str, Any] | None = None,
    known: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """What the step's expressions see: `flow_input`, `results`, `previous_result`, `iter`.

    Only the results the step's expressions name are read, unless one of
    them uses `results` as a whole. `payload` is the run's stored context,
    when the caller has it already; `known` holds results of this run the
    caller has in hand (recorded in the same transaction).
    """
    load_definition(tx, defs, run.digest)
    scope = defs.scope(run.digest, run.scope)
    if payload is None:
        payload = tx.payload(run.id, "context", {})
    needs = scope.needs[step.id]
    wanted = step_reads(step)
    if wanted is not None:
        wanted = set(wanted) | set(needs)
    results = _results(tx, run, scope, wanted, known or {})
    if len(needs) == 1:
        previous = results.get(needs[0])
    elif needs:
        previous = {need: results.get(need) for need in needs}
    else:
        previous = payload.get("previous_result")
    context: dict[str, Any] = {
        "flow_input": payload.get("flow_input", {}),
        "results": results,
        "previous_result": previous,
    }
    if "iter" in payload:
        context["iter"] = payload["iter"]
    return context


def step_reads(step: Step) -> set[str] | None:
    """The result ids a step's expressions name; None when they read `results` whole.

    The `{{ ... }}` placeholders of an AI step's prompts count too.
    """
    wanted: set[str] = set()
    expressions = list(step.expressions())
    for template in _templates(step):
        expressions.extend(compile_expression(text) for text in placeholders(template))
    for expression in expressions:
        used = expression.results_used
        if used is None:
            return None
        wanted |= used
    return wanted


def _templates(step: Step) -> list[str]:
    if step.ai_action is not None:
        return [step.ai_action.prompt, step.ai_action.system]
    if step.ai_agent is not None:
        return [step.ai_agent.system]
    return []


def _results(
    tx: Tx, run: RunRow, scope: Scope, wanted: set[str] | None, known: Mapping[str, Any]
) -> dict[str, Any]:
    """Results visible from `run`.

    Its own, its ancestors' (from inside branches and loops), and those of
    steps nested in finished branches (a join may read `results.<inner step>`).
    """
    results: dict[str, Any] = (
        {} if wanted is None else {key: value for key, value in known.items() if key in wanted}
    )
    current: RunRow | None = run
    inherits = scope.inherits
    while current is not None:
        missing = None if wanted is None else wanted - results.keys()
        if missing is not None and not missing:
            return results
        for key, value in tx.results(current.id, missing).items():
            results.setdefault(key, value)
        if not inherits or current.parent_id is None:
            break
        current = tx.run(current.parent_id)
        inherits = current is not None and _inherits(current)
    missing = set() if wanted is None else wanted - results.keys()
    if missing:
        results.update(_nested_results(tx, run, missing))
    return results


def _namespace(scope: str) -> list[list[str]]:
    """The path to the (sub-)flow a scope belongs to: up to its last `flow` part."""
    path: list[list[str]] = own_path(json.loads(scope))
    cut = max((i + 1 for i, (_step, part) in enumerate(path) if part == "flow"), default=0)
    return path[:cut]


def _nested_results(tx: Tx, run: RunRow, wanted: set[str]) -> dict[str, Any]:
    """Results of steps inside branches of the same (sub-)flow as `run`."""
    prefix = _namespace(run.scope)
    found: dict[str, Any] = {}
    for other in tx.tree(run.root_id):
        if other.digest != run.digest:
            continue  # a tool call's child run: another flow
        path = own_path(json.loads(other.scope))
        if path[: len(prefix)] != prefix or any(p == "flow" for _s, p in path[len(prefix) :]):
            continue
        if other.id == run.id:
            continue
        for key, value in tx.results(other.id, wanted - found.keys()).items():
            found.setdefault(key, value)
        if not wanted - found.keys():
            break
    return found


def _inherits(run: RunRow) -> bool:
    path = run.scope
    return path != "[]" and not path.endswith('"flow"]]') and not is_tool_child(path)


@dataclass
class Transition:
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
    _locked: set[str] = field(default_factory=set)
    _notify: bool = False

    # --- creating runs ---------------------------------------------------

    def create(
        self,
        flow: Flow,
        digest: str,
        body: str,
        flow_input: Mapping[str, Any],
        *,
        concurrency_key: str | None = None,
        limit: int | None = None,
    ) -> RunRow:
        """Add a top-level run and queue its first steps (or wait for a concurrency slot)."""
        self.tx.put_definition(digest, flow.name, body, self.now)
        self.defs.add(digest, flow)
        run_id = new_id()
        run = RunRow(
            run_id, run_id, None, None, None, "[]", flow.name or "flow", digest, "running",
            concurrency_key, self.now, self.now, None, None,
        )  # fmt: skip
        if concurrency_key is not None and limit is not None:
            self.tx.lock_gate(concurrency_key)
            if self.tx.gate_active(concurrency_key) >= limit:
                run.status, run.started_at = "queued", None
        self.tx.insert_run(run)
        self.tx.put_payload(run_id, "context", {"flow_input": dict(flow_input)})
        if run.status == "running":
            self._schedule(run, {})
        self.flush()
        return run

    def _spawn_child(self, parent: RunRow, job: JobRow, index: int, part: str, ctx: Any) -> None:
        run_id = new_id()
        child = RunRow(
            run_id, parent.root_id, parent.id, job.id, index,
            child_scope(parent.scope, job.step_id, part), parent.flow_name, parent.digest,
            "running", None, self.now, self.now, None, None,
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
        for step in steps:
            take = self.take
            if take is not None and len(self.taken) < take.limit:
                job = self.tx.insert_job(
                    run.id, step.id, 1, now=self.now, status="running",
                    worker=take.worker, lease_until=take.lease_until,
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

    def complete(self, job: JobRow, outcome: Outcome) -> list[JobRow]:
        """Record a claimed job's outcome; move the run on. Raises `LeaseLost` when fenced.

        The run's row is locked first, always: every change to a run (a cancel,
        a sibling's failure, a fan-in) takes the run, then its jobs, in that
        order, so they serialise without deadlocks and none is missed.
        """
        run = self._fetch_locked(job.run_id)
        if run is None:
            raise RunNotFound(f"Run {job.run_id} is gone.")
        if outcome.logs:
            self.tx.append_logs(run.id, job.id, outcome.logs, self.now)
        for usage in outcome.usage:
            self.tx.insert_usage(run, job, usage, self.now)
        if outcome.status == "failed":
            self._failed(run, job, outcome)
        else:
            status = "succeeded" if outcome.status == "succeeded" else "skipped"
            if not self.tx.finish_and_record(
                job, status=status, value=outcome.result, now=self.now
            ):
                raise _lost(job)
            if outcome.memory is not None and status == "succeeded":
                outcome.memory.apply(self.tx, run_id=run.id, now=self.now)
            self._recorded(
                run, job.step_id, job.id, status, outcome.result, outcome.stop, stored=True
            )
        self.flush()
        return self.taken

    def _finish(self, job: JobRow, status: str, error: Mapping[str, Any] | None = None) -> None:
        if not self.tx.finish_job(
            job.id, status=status, now=self.now, epoch=job.epoch, error=error
        ):
            raise _lost(job)

    def _failed(self, run: RunRow, job: JobRow, outcome: Outcome) -> None:
        error = outcome.error or {"type": "Error", "message": "the step failed"}
        self._finish(job, "failed", error)
        step = self._scope(run).by_id[job.step_id]
        retry = step.retry
        if outcome.retryable and retry is not None and job.attempt <= retry.attempts:
            delay = retry.delay(job.attempt)
            self.tx.insert_job(
                run.id, job.step_id, job.attempt + 1, now=self.now, run_at=self.now + delay
            )
            self._notify = True
            return
        self._fail_run(run, job.step_id, error)

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

    def _finish_run(self, run: RunRow, value: Any) -> None:
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

    def spawn(self, job: JobRow, plan: SpawnPlan) -> list[JobRow]:
        """Park a container job and start its children; done at once when there are none."""
        run = self._fetch_locked(job.run_id)
        if run is None:
            raise RunNotFound(f"Run {job.run_id} is gone.")
        if not self.tx.park_job(job.id, job.epoch):
            raise LeaseLost(f"Job {job.id} ({job.step_id}) is no longer held.")
        if not plan.parts:
            self._container_done(run, job, plan.empty_result)
        else:
            if plan.items is not None:
                self.tx.put_payload(run.id, f"items:{job.id}", plan.items)
            first = plan.parts if plan.items is None else plan.parts[: plan.parallelism]
            for index, part in enumerate(first):
                self._spawn_child(run, job, index, part, plan.contexts[index])
            if plan.items is not None:
                self.tx.put_payload(run.id, f"loop:{job.id}", {"parallelism": plan.parallelism})
        self.flush()
        return self.taken

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
        if step.for_each is not None or step.parallel is not None:
            self._container_done(parent, job, values)
        else:
            self._container_done(parent, job, values[0])

    def _container_done(self, run: RunRow, job: JobRow, value: Any) -> None:
        self.tx.finish_job(job.id, status="succeeded", now=self.now, epoch=None, expect="waiting")
        self._recorded(run, job.step_id, job.id, "succeeded", value, False)

    # --- tool calls' child runs ----------------------------------------------

    def park_for_children(self, job: JobRow, wait: ChildWait) -> list[JobRow]:
        """Park an agent step's job until the child runs of its tool calls end.

        Records what the step spent and printed so far, then starts each
        requested child that does not exist yet (under its derived id). A
        child an earlier job of the step started is handed to this job. When
        every child of the job has ended already, the job is queued again at
        once. Returns the children's jobs handed to the offering worker (see
        `Take`). Raises `LeaseLost` when fenced.
        """
        run = self._fetch_locked(job.run_id)
        if run is None:
            raise RunNotFound(f"Run {job.run_id} is gone.")
        if not self.tx.park_job(job.id, job.epoch):
            raise _lost(job)
        if wait.logs:
            self.tx.append_logs(run.id, job.id, wait.logs, self.now)
        for usage in wait.usage:
            self.tx.insert_usage(run, job, usage, self.now)
        for request in wait.requests:
            child = self.tx.run(request.run_id)
            if child is not None:
                if child.parent_job != job.id:
                    self.tx.set_parent_job(child.id, job.id)
                continue
            self.tx.put_definition(request.digest, request.flow.name, request.body, self.now)
            self.defs.add(request.digest, request.flow)
            scope = child_scope(run.scope, job.step_id, tool_part(request.tool, request.call_id))
            child = RunRow(
                request.run_id, run.root_id, run.id, job.id, None, scope,
                request.flow.name or request.tool, request.digest, "running", None,
                self.now, self.now, None, None,
            )  # fmt: skip
            self.tx.insert_run(child)
            self.tx.put_payload(child.id, "context", {"flow_input": request.flow_input})
            self._schedule(child, {})
        self._wake_when_children_ended(job)
        self.flush()
        return self.taken

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

    def cancel(self, run_id: str) -> RunRow:
        """Cancel a top-level run and everything under it."""
        run = self._top(run_id)
        if run.status in FINISHED_RUN:
            raise RunStateError(
                f"Run {run_id} already {run.status}; there is nothing to cancel.",
                context={"run_id": run_id, "status": run.status},
            )
        self._cancel_run(run)
        self._release_gate(run)
        self.flush()
        return run

    def _top(self, run_id: str) -> RunRow:
        run = self._fetch_locked(run_id)
        if run is None:
            raise RunNotFound(
                f"No run {run_id} in this store.", hint="List runs with `tidemill runs list`."
            )
        if run.parent_id is not None:
            raise RunStateError(
                f"Run {run_id} is part of run {run.root_id}; act on that run instead.",
                context={"run_id": run_id, "root_id": run.root_id},
            )
        return run

    # --- retry -----------------------------------------------------------

    def retry(self, run_id: str) -> RunRow:
        """Restart a failed top-level run from its failed steps; finished steps are kept."""
        run = self._top(run_id)
        if run.status != "failed":
            raise RunStateError(
                f"Run {run_id} is {run.status}; only a failed run can be retried.",
                context={"run_id": run_id, "status": run.status},
            )
        self._retry_run(run)
        self.flush()
        return run

    def _retry_run(self, run: RunRow) -> None:
        latest: dict[str, JobRow] = {}
        for job in self.tx.run_jobs(run.id):
            latest[job.step_id] = job
        for job in latest.values():
            if job.status not in ("failed", "cancelled"):
                continue
            children = self.tx.children(job.id)
            for child in children:
                if is_tool_child(child.scope) and child.status == "cancelled":
                    self._retry_run(child)  # cut short by the cancel: its call waits for it
            children = [c for c in children if not is_tool_child(c.scope)]
            if children and any(c.status in ("failed", "cancelled") for c in children):
                for child in children:
                    if child.status in ("failed", "cancelled"):
                        self._retry_run(child)
                self.tx.set_job_status(job.id, "waiting", expect=job.status)
            else:
                self.tx.insert_job(run.id, job.step_id, job.attempt + 1, now=self.now)
                self._notify = True
        self.tx.set_run(run.id, status="running", finished_at=None, error=None)
        run.status = "running"
        states = self.tx.step_states(run.id)
        self._schedule(run, states)

    # --- approvals -------------------------------------------------------

    def park_for_approval(
        self,
        job: JobRow,
        *,
        message: str,
        approvers: list[str],
        timeout: float | None,
        on_timeout: str,
    ) -> ApprovalRow:
        """Park an approval step's job until a person decides (or the timeout passes)."""
        run = self._fetch_locked(job.run_id)
        if run is None:
            raise RunNotFound(f"Run {job.run_id} is gone.")
        if not self.tx.park_job(job.id, job.epoch):
            raise LeaseLost(f"Job {job.id} ({job.step_id}) is no longer held.")
        approval = ApprovalRow(
            new_id(), run.id, run.root_id, job.id, job.step_id, message, approvers, on_timeout,
            "pending", self.now, None if timeout is None else self.now + timeout, None, None, None,
        )  # fmt: skip
        self.tx.insert_approval(approval)
        return approval

    def park_for_tool_calls(self, job: JobRow, pause: AgentPause) -> list[ApprovalRow]:
        """Park an agent step's job until its pending tool calls are decided.

        Records what the step spent and printed so far, then one approval row
        of kind `tool_call` per pending call. Raises `LeaseLost` when fenced.
        """
        run = self._fetch_locked(job.run_id)
        if run is None:
            raise RunNotFound(f"Run {job.run_id} is gone.")
        if not self.tx.park_job(job.id, job.epoch):
            raise _lost(job)
        if pause.logs:
            self.tx.append_logs(run.id, job.id, pause.logs, self.now)
        for usage in pause.usage:
            self.tx.insert_usage(run, job, usage, self.now)
        expires = None if pause.timeout is None else self.now + pause.timeout
        rows = []
        for request in pause.requests:
            approval = ApprovalRow(
                new_id(), run.id, run.root_id, job.id, job.step_id, request.message,
                request.approvers, pause.on_timeout, "pending", self.now, expires, None, None,
                None, request.kind, request.details,
            )  # fmt: skip
            self.tx.insert_approval(approval)
            rows.append(approval)
        return rows

    def decide(
        self,
        approval_id: str,
        *,
        approve: bool,
        actor: str | None,
        comment: str | None,
        edited_arguments: Mapping[str, Any] | None = None,
    ) -> ApprovalRow:
        """Record a person's decision and move the run on.

        A tool call's approval (kind `tool_call`) must still match the agent's
        journal; deciding it queues the agent step again once all its pending
        calls are decided. `edited_arguments` (approvals of tool calls only)
        replace the model's arguments.

        Raises:
            RunNotFound: No such approval.
            ApprovalDecisionError: A reconciliation (`kind`: see `reconcile`),
                already decided, expired, cancelled, `actor` is not one of its
                approvers, the agent moved on (`mismatch`), or the edited
                arguments are refused (`arguments`).
        """
        approval = self._approval(approval_id)
        other = _DECIDED_OTHERWISE.get(approval.kind)
        if other is not None:
            what, hint = other
            raise ApprovalDecisionError(
                f"Approval {approval_id} {what}, not approved or rejected.",
                reason="kind",
                hint=hint.format(id=approval_id),
            )
        self._check_pending(approval, actor)
        status = "approved" if approve else "rejected"
        if approval.kind == "tool_call":
            decision = check_decision(
                self.tx,
                approval,
                approve=approve,
                actor=actor,
                comment=comment,
                edited_arguments=edited_arguments,
            )
            self._resolve_tool_call(approval, status, actor, comment, decision)
        else:
            if edited_arguments is not None:
                raise ApprovalDecisionError(
                    f"Approval {approval_id} is an approval step's; only a tool call's "
                    "approval takes edited arguments.",
                    reason="arguments",
                )
            self._resolve(approval, status, actor, comment)
        approval.status, approval.decided_by, approval.comment = status, actor, comment
        return approval

    def _approval(self, approval_id: str) -> ApprovalRow:
        """An approval, locked; `RunNotFound` when there is none."""
        approval = self.tx.approval(approval_id, lock=True)
        if approval is None:
            raise RunNotFound(
                f"No approval {approval_id} in this store.",
                hint="List pending approvals with `tidemill approvals list`.",
            )
        return approval

    def _check_pending(self, approval: ApprovalRow, actor: str | None) -> None:
        """Refuse a decision on an approval that is not pending, expired, or not `actor`'s."""
        approval_id = approval.id
        if approval.status != "pending":
            reason = {"cancelled": "cancelled", "expired": "expired"}.get(
                approval.status, "decided"
            )
            raise ApprovalDecisionError(
                f"Approval {approval_id} is already {approval.status}"
                + (f" by {approval.decided_by}." if approval.decided_by else "."),
                reason=reason,
            )
        if approval.expires_at is not None and approval.expires_at <= self.now:
            raise ApprovalDecisionError(
                f"Approval {approval_id} expired; it is resolved by its on_timeout "
                f"({approval.on_timeout}).",
                reason="expired",
            )
        if approval.approvers and actor not in approval.approvers:
            raise ApprovalDecisionError(
                f"{actor or 'An anonymous actor'} may not decide approval {approval_id}; "
                f"its approvers are {', '.join(approval.approvers)}.",
                reason="actor",
                hint="Decide as one of the approvers (--as NAME).",
            )

    def reconcile(
        self,
        approval_id: str,
        *,
        happened: bool,
        actor: str | None,
        result: str | None = None,
    ) -> ApprovalRow:
        """Answer a reconciliation: did a tool call cut short by a crash take effect?

        The call's journal must still stand where the question left it. The
        agent step is queued again once none of its questions is pending:
        a call that happened is recorded as finished with `result` (default:
        `the call completed (confirmed by <actor>)`) and not run again; a call
        that did not happen runs again with the same idempotency key.

        Raises:
            RunNotFound: No such approval.
            ApprovalDecisionError: Not a reconciliation (`kind`), already
                decided, expired, cancelled, `actor` is not one of its
                approvers, the agent moved on (`mismatch`), or a `result` for
                a call that did not happen (`result`).
        """
        approval = self._approval(approval_id)
        if approval.kind != "reconcile":
            what = _WHAT.get(approval.kind, "an approval step")
            raise ApprovalDecisionError(
                f"Approval {approval_id} is {what}, not a reconciliation.",
                reason="kind",
                hint=f"tidemill approvals answer {approval_id} --text TEXT"
                if approval.kind == "question"
                else f"tidemill approvals approve {approval_id} (or reject)",
            )
        self._check_pending(approval, actor)
        decision = check_reconcile(self.tx, approval, happened=happened, actor=actor, result=result)
        status = "approved" if happened else "rejected"
        comment = "it took effect" if happened else "it did not take effect"
        self._resolve_tool_call(approval, status, actor, comment, decision)
        approval.status, approval.decided_by, approval.comment = status, actor, comment
        return approval

    def answer(self, approval_id: str, *, text: str, actor: str | None) -> ApprovalRow:
        """Answer an agent's question (kind `question`); the answer is its call's result.

        The agent's journal must still stand where the question left it. The
        agent step is queued again once none of its requests is pending.

        Raises:
            RunNotFound: No such approval.
            ApprovalDecisionError: Not a question (`kind`), already decided,
                expired, cancelled, `actor` is not one of its approvers, or
                the agent moved on (`mismatch`).
        """
        approval = self._approval(approval_id)
        if approval.kind != "question":
            raise ApprovalDecisionError(
                f"Approval {approval_id} is {_WHAT.get(approval.kind, 'an approval step')}, "
                "not a question; it is not answered with text.",
                reason="kind",
            )
        self._check_pending(approval, actor)
        decision = check_answer(self.tx, approval, text=text, actor=actor)
        self._resolve_tool_call(approval, "approved", actor, text, decision)
        approval.status, approval.decided_by, approval.comment = "approved", actor, text
        return approval

    def extend(self, approval_id: str, *, new_limit: int | None, actor: str | None) -> ApprovalRow:
        """Decide a budget approval: raise the bound to `new_limit`, or stop (None).

        A raised bound is stored with the decision; the agent step is queued
        again and continues from its journal. Stopping fails the step with
        `LimitExceeded`.

        Raises:
            RunNotFound: No such approval.
            ApprovalDecisionError: Not a budget (`kind`), already decided,
                expired, cancelled, `actor` is not one of its approvers, a
                limit not larger than the current one (`arguments`), or the
                agent moved on (`mismatch`).
        """
        approval = self._approval(approval_id)
        if approval.kind != "budget":
            raise ApprovalDecisionError(
                f"Approval {approval_id} is {_WHAT.get(approval.kind, 'an approval step')}, "
                "not a budget; it is not extended.",
                reason="kind",
            )
        self._check_pending(approval, actor)
        decision = check_extend(self.tx, approval, new_limit=new_limit, actor=actor)
        if new_limit is None:
            self._stop_budget(approval, "rejected", actor, "stopped")
            approval.status, approval.decided_by, approval.comment = "rejected", actor, "stopped"
            return approval
        comment = f"extended to {new_limit}"
        self._resolve_tool_call(approval, "approved", actor, comment, decision)
        approval.status, approval.decided_by, approval.comment = "approved", actor, comment
        return approval

    def _stop_budget(
        self, approval: ApprovalRow, status: str, actor: str | None, comment: str
    ) -> None:
        """Fail a budget approval's step with `LimitExceeded` (stopped or expired)."""
        run = self._fetch_locked(approval.run_id)
        details = approval.details or {}
        decision = {"action": "stop", "limit": None, "actor": actor}
        if not self.tx.decide_approval(
            approval.id, status=status, by=actor, comment=comment, now=self.now,
            details={**details, "decision": decision},
        ):  # fmt: skip
            raise ApprovalDecisionError(
                f"Approval {approval.id} was decided meanwhile.", reason="decided"
            )
        job = self.tx.job(approval.job_id)
        if run is None or job is None or job.status != "waiting":
            return
        bound, limit = details.get("bound"), details.get("limit")
        error = {
            "type": "LimitExceeded",
            "message": f"The agent stopped at its {bound} limit of {limit} ({comment}).",
            "limit": bound,
            "value": limit,
        }
        self.tx.finish_job(
            job.id, status="failed", now=self.now, epoch=None, expect="waiting", error=error
        )
        self._fail_run(run, job.step_id, error)
        self.flush()

    def expire_approvals(self, limit: int = 20) -> int:
        """Resolve pending approvals whose timeout passed, by their `on_timeout`.

        An expired tool call's approval is a rejection the agent's model is told
        about; an expired reconciliation fails the step (and its run).
        """
        expired = self.tx.expired_approvals(self.now, limit)
        for approval in expired:
            if approval.kind == "tool_call":
                self._resolve_tool_call(approval, "expired", None, "timed out", expired_decision())
                continue
            if approval.kind == "question":  # the model is told no answer came
                self._resolve_tool_call(
                    approval, "expired", None, "timed out", expired_answer(approval)
                )
                continue
            if approval.kind == "budget":  # nobody extended the bound: it was crossed
                self._stop_budget(approval, "expired", None, "nobody extended it in time")
                continue
            if approval.kind == "reconcile":  # nobody knows whether it ran: the step fails
                self._resolve(approval, "expired", None, "nobody said whether the call ran")
                continue
            status = "approved" if approval.on_timeout == "approve" else "expired"
            self._resolve(approval, status, None, "timed out")
        return len(expired)

    def _resolve_tool_call(
        self,
        approval: ApprovalRow,
        status: str,
        actor: str | None,
        comment: str | None,
        decision: dict[str, Any],
    ) -> None:
        """Store a tool call's decision; queue the agent step again once none is pending."""
        run = self._fetch_locked(approval.run_id)
        details = {**(approval.details or {}), "decision": decision}
        if not self.tx.decide_approval(
            approval.id, status=status, by=actor, comment=comment, now=self.now, details=details
        ):
            raise ApprovalDecisionError(
                f"Approval {approval.id} was decided meanwhile.", reason="decided"
            )
        approval.details = details
        job = self.tx.job(approval.job_id)
        if run is None or run.status != "running" or job is None or job.status != "waiting":
            return
        if any(row.status == "pending" for row in self.tx.job_approvals(job.id)):
            return  # the step resumes once every call of its pause is decided
        if self.tx.requeue_job(job.id, self.now):
            self._notify = True
        self.flush()

    def _resolve(
        self, approval: ApprovalRow, status: str, actor: str | None, comment: str | None
    ) -> None:
        run = self._fetch_locked(approval.run_id)
        if not self.tx.decide_approval(
            approval.id, status=status, by=actor, comment=comment, now=self.now
        ):
            raise ApprovalDecisionError(
                f"Approval {approval.id} was decided meanwhile.", reason="decided"
            )
        job = self.tx.job(approval.job_id)
        if run is None or job is None or job.status != "waiting":
            return
        if status == "approved":
            value = {"approved": True, "by": actor, "comment": comment}
            self.tx.finish_job(
                job.id, status="succeeded", now=self.now, epoch=None, expect="waiting"
            )
            self._recorded(run, job.step_id, job.id, "succeeded", value, False)
        else:
            kind = "ApprovalRejected" if status == "rejected" else "ApprovalExpired"
            who = f" by {actor}" if actor else ""
            error = {
                "type": kind,
                "message": f"{status}{who}" + (f": {comment}" if comment else ""),
            }
            self.tx.finish_job(
                job.id, status="failed", now=self.now, epoch=None, expect="waiting", error=error
            )
            self._fail_run(run, job.step_id, error)
        self.flush()

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


_DECIDED_OTHERWISE = {
    "budget": (
        "asks for more of an agent's budget; it is extended or stopped",
        "tidemill approvals extend {id} --to N (or --stop)",
    ),
    "question": (
        "is an agent's question to a person; it is answered",
        "tidemill approvals answer {id} --text TEXT",
    ),
    "reconcile": (
        "asks whether a tool call took effect; it is answered",
        "tidemill approvals reconcile {id} --happened (or --not-happened)",
    ),
}
"""Approval kinds that are not approved or rejected: what they are, and the command instead."""

_WHAT = {
    "tool_call": "a tool call's approval",
    "question": "an agent's question",
    "reconcile": "a reconciliation",
    "budget": "a budget approval",
}
"""What each approval kind is, for refusals."""


def _lost(job: JobRow) -> LeaseLost:
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


def top_run_or_error(tx: Tx, run_id: str) -> RunRow:
    """A run by id, or `RunNotFound` with a hint."""
    run = tx.run(run_id)
    if run is None:
        raise RunNotFound(
            f"No run {run_id} in this store.", hint="List runs with `tidemill runs list`."
        )
    return run
