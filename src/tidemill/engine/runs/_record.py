"""Recording what executing a claimed job produced: one method per kind of result.

A leaf step's `Outcome` (`complete`), a container's `SpawnPlan` (`spawn`),
an agent step's wait for the child runs of its tool calls
(`park_for_children`). Each fences the worker's write by its claim's epoch:
a worker whose lease was taken over gets `LeaseLost` and changes nothing.
Parking for approvals is in `Decisions` (`_decisions`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tidemill.engine._outcome import Outcome, SpawnPlan
from tidemill.engine.ai._child_runs import ChildWait, tool_part
from tidemill.engine.runs._progress import Progress, lease_lost
from tidemill.engine.runs._scope import child_scope
from tidemill.errors import LeaseLost, RunNotFound
from tidemill.store import JobRow, RunRow

__all__ = ["Recording"]


class Recording(Progress):
    """Record a claimed job's result and move its run on."""

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
        if outcome.shown is not None:
            self.tx.record_shown(job, outcome.shown)
            if outcome.masked_result:
                # It returned a secret it resolved: the run's result is shown masked.
                self.tx.record_masked(run.id, job.step_id, outcome.shown["result"])
                run.masked = True
                self.masked.add(run.id)
        if outcome.status == "failed":
            self._failed(run, job, outcome)
        else:
            status = "succeeded" if outcome.status == "succeeded" else "skipped"
            if not self.tx.finish_and_record(
                job, status=status, value=outcome.result, now=self.now
            ):
                raise lease_lost(job)
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
            raise lease_lost(job)

    def _failed(self, run: RunRow, job: JobRow, outcome: Outcome) -> None:
        error = outcome.error or {"type": "Error", "message": "the step failed"}
        self._finish(job, "failed", error)
        step = self._scope(run).by_id[job.step_id]
        retry = step.retry
        if outcome.retryable and retry is not None and job.attempt <= retry.attempts:
            delay = retry.delay(job.attempt)
            again = self.tx.insert_job(
                run.id, job.step_id, job.attempt + 1, now=self.now, run_at=self.now + delay
            )
            self.tx.add_event(
                run.id, "step_retrying", {"attempt": again.attempt, "run_at": again.run_at},
                now=self.now, root_id=run.root_id, job_id=again.id, step_id=job.step_id,
            )  # fmt: skip
            self._notify = True
            return
        self._fail_run(run, job.step_id, error)

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
            raise lease_lost(job)
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
                self.now, self.now, None, None, run.run_as, run.source,
                run.memory_id,
            )  # fmt: skip
            self.tx.insert_run(child)
            self.tx.put_payload(child.id, "context", {"flow_input": request.flow_input})
            self._schedule(child, {})
        self._wake_when_children_ended(job)
        self.flush()
        return self.taken
