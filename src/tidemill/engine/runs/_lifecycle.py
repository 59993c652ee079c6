"""A top-level run's life as its caller drives it: create it, cancel it, retry it.

`create` stores the flow's definition and queues the run's first steps (or
holds the run at its concurrency gate); `cancel` ends a run and everything
under it; `retry` restarts a failed run from its failed steps, keeping the
finished ones.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tidemill.engine._ids import new_id
from tidemill.engine.ai._child_runs import is_tool_child
from tidemill.engine.runs._progress import Progress
from tidemill.errors import RunNotFound, RunStateError
from tidemill.flows import Flow, compile_expression
from tidemill.store import FINISHED_RUN, JobRow, RunRow

__all__ = ["Lifecycle", "concurrency_key"]


def concurrency_key(flow: Flow, digest: str, flow_input: Mapping[str, Any]) -> str | None:
    """A new run's concurrency gate: its flow's (and `concurrency.key`'s value); None: none."""
    if flow.concurrency is None:
        return None
    key = f"flow:{flow.name or digest}"
    if flow.concurrency.key:
        value = compile_expression(flow.concurrency.key).evaluate({"flow_input": flow_input})
        key = f"{key}:{value}"
    return key


class Lifecycle(Progress):
    """Create, cancel and retry top-level runs."""

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
        run_as: str | None = None,
        source: Mapping[str, Any] | None = None,
        memory_id: str | None = None,
        start_at: float | None = None,
        run_id: str | None = None,
    ) -> RunRow:
        """Add a top-level run and queue its first steps (or wait for a concurrency slot).

        `run_as` is who its references are resolved as, `source` what it ran
        (a workspace path's `RunPlan.source`), `memory_id` its memory id as
        stored; its child runs inherit them. With `start_at` later than now,
        its first steps are due then (it takes its concurrency slot now).
        `run_id` is its id (default: a new one).
        """
        self.tx.put_definition(digest, flow.name, body, self.now)
        self.defs.add(digest, flow)
        run_id = run_id or new_id()
        run = RunRow(
            run_id, run_id, None, None, None, "[]", flow.name or "flow", digest, "running",
            concurrency_key, self.now, self.now, None, None, run_as,
            None if source is None else dict(source), memory_id,
        )  # fmt: skip
        if concurrency_key is not None and limit is not None:
            self.tx.lock_gate(concurrency_key)
            if self.tx.gate_active(concurrency_key) >= limit:
                run.status, run.started_at = "queued", None
        self.tx.insert_run(run)
        self.tx.put_payload(run_id, "context", {"flow_input": dict(flow_input)})
        if run.status == "running" and start_at is not None and start_at > self.now:
            for step in self._scope(run).ready({}):
                self.tx.insert_job(run.id, step.id, 1, now=self.now, run_at=start_at)
        elif run.status == "running":
            self._schedule(run, {})
        self.flush()
        return run

    # --- cancellation ----------------------------------------------------

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
