"""Steps that wait for a time or an event: parking them, waking them, delivering events.

A `sleep` or `wait_for_event` step's job parks (`waiting`, no worker, no
lease) with a row in `tm_waits` (`park_for_time`, `park_for_event`). It
leaves that state in one transaction, once:

- a worker's sweep finds its time came (`wake_due`): a sleep succeeds; an
  event wait whose deadline passed fails with `EventTimeout` (or succeeds
  with a null result, `on_timeout: continue`);
- an event with its name and key is sent (`deliver_event`): every step
  waiting for it succeeds with the event's payload. An event nobody waits
  for is kept, and the first step to come and wait for it takes it at once.

The step's result is recorded and its run moves on as for any step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tidemill.engine._outcome import WaitPlan
from tidemill.engine.runs._progress import Progress, lease_lost
from tidemill.errors import RunNotFound
from tidemill.flows import iso_time
from tidemill.store import JobRow, RunRow, WaitRow

__all__ = ["Delivery", "Waiting"]


@dataclass(frozen=True, slots=True)
class Delivery:
    """What sending an event did."""

    event_id: int | None
    """The event's id in the store (None: a resend with a known `dedupe_id`, ignored)."""
    delivered_to: tuple[str, ...]
    """The runs whose waiting steps it woke (their top-level runs' ids)."""
    kept_until: float | None
    """When nobody waited: until when it is kept for a step to come (None: it was taken)."""
    duplicate: bool = False
    """True when an event with the same `dedupe_id` had been sent: nothing was done."""


class Waiting(Progress):
    """Park steps that wait for a time or an event; wake them when it comes."""

    def park_for_wait(self, job: JobRow, plan: WaitPlan) -> list[JobRow]:
        """Park a `sleep` or `wait_for_event` step's job; take a kept event at once if one is there.

        Returns the jobs handed to the offering worker (see `Take`) when a kept
        event ended the wait at once. Raises `LeaseLost` when fenced.
        """
        # The event's lock first, then the run's, as `deliver_event` takes them (no deadlock).
        seen = self.tx.run(job.run_id)
        if seen is None:
            raise RunNotFound(f"Run {job.run_id} is gone.")
        top = seen if seen.parent_id is None else self.tx.run(seen.root_id)
        source = (top.source if top is not None else None) or {}
        workspace, path = str(source.get("workspace") or ""), str(source.get("path") or "")
        if plan.kind == "event":
            assert plan.name is not None
            assert plan.key is not None
            # Serialised with `deliver_event` of the same event: one of them sees the other.
            self.tx.lock_event(workspace, path, plan.name, plan.key)
        run = self._fetch_locked(job.run_id)
        if run is None:
            raise RunNotFound(f"Run {job.run_id} is gone.")
        if not self.tx.park_job(job.id, job.epoch):
            raise lease_lost(job)
        wait = WaitRow(
            job.id, run.root_id, run.id, plan.kind, workspace, path, plan.name, plan.key,
            plan.due_at, self.now,
        )  # fmt: skip
        data: dict[str, Any] = {"kind": plan.kind}
        if plan.due_at is not None:
            data["until" if plan.kind == "sleep" else "deadline"] = iso_time(plan.due_at)
        if plan.kind == "event":
            assert plan.name is not None
            assert plan.key is not None
            data.update(name=plan.name, key=plan.key)
            kept = self.tx.take_signal(workspace, path, plan.name, plan.key, job.id, self.now)
            if kept is not None:  # sent before the step came to wait: taken now
                self._finish_waiting(run, job, "succeeded", kept.payload)
                self.flush()
                return self.taken
        self.tx.insert_wait(wait)
        self.tx.add_event(
            run.id, "step_waiting", data, now=self.now, root_id=run.root_id,
            job_id=job.id, step_id=job.step_id,
        )  # fmt: skip
        return []

    def wake_due(self, limit: int = 100) -> int:
        """End the waits whose time came (sleeps, event deadlines); return how many."""
        due = self.tx.due_waits(self.now, limit)
        for wait in due:
            self.tx.delete_wait(wait.job_id)
            run, job = self._waiting_job(wait)
            if run is None or job is None:
                continue
            if wait.kind == "sleep":
                value = {"until": iso_time(wait.due_at or self.now)}
                self._finish_waiting(run, job, "succeeded", value)
                continue
            step = self._scope(run).by_id.get(job.step_id)
            settings = None if step is None else step.wait_for_event
            if settings is not None and settings.on_timeout == "continue":
                self._finish_waiting(run, job, "succeeded", None)
                continue
            error = {
                "type": "EventTimeout",
                "message": f"no event {wait.name!r} with key {wait.key!r} came in time "
                f"(the wait ended at {iso_time(wait.due_at or self.now)})",
                "name": wait.name,
                "key": wait.key,
            }
            self._finish_waiting(run, job, "failed", error)
        if due:
            self.flush()
        return len(due)

    def deliver_event(
        self,
        *,
        workspace: str,
        path: str,
        name: str,
        key: str,
        payload: Any,
        dedupe_id: str | None,
        sent_by: str | None,
        keep: float,
    ) -> Delivery:
        """Send an event: wake every step waiting for it, or keep it for `keep` seconds."""
        self.tx.lock_event(workspace, path, name, key)
        signal = self.tx.insert_signal(
            workspace=workspace, path=path, name=name, key=key, payload=payload,
            dedupe_id=dedupe_id, sent_by=sent_by, now=self.now, keep_until=self.now + keep,
        )  # fmt: skip
        if signal is None:
            return Delivery(None, (), None, duplicate=True)
        woken: list[str] = []
        for wait in self.tx.event_waiters(workspace, path, name, key):
            self.tx.delete_wait(wait.job_id)
            run, job = self._waiting_job(wait)
            if run is None or job is None:
                continue
            self._finish_waiting(run, job, "succeeded", payload)
            woken.append(run.root_id)
        self.tx.prune_signals(self.now)
        if not woken:
            return Delivery(signal.id, (), signal.keep_until)
        self.tx.mark_signal_taken(signal.id, ",".join(woken))
        self.flush()
        return Delivery(signal.id, tuple(woken), None)

    def _waiting_job(self, wait: WaitRow) -> tuple[RunRow | None, JobRow | None]:
        """The run and job of a wait, when the job still waits (not cancelled meanwhile)."""
        run = self._fetch_locked(wait.run_id)
        job = self.tx.job(wait.job_id)
        if run is None or job is None or job.status != "waiting" or run.status != "running":
            return None, None
        return run, job

    def _finish_waiting(self, run: RunRow, job: JobRow, status: str, value: Any) -> None:
        """End a waiting job: record its result and move the run on, or fail the run."""
        if status == "succeeded":
            self.tx.finish_job(
                job.id, status="succeeded", now=self.now, epoch=None, expect="waiting"
            )
            self._recorded(run, job.step_id, job.id, "succeeded", value, False)
            return
        self.tx.finish_job(
            job.id, status="failed", now=self.now, epoch=None, expect="waiting", error=value
        )
        self._fail_run(run, job.step_id, value)
