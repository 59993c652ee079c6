"""`Engine` and `Run`: the blocking front of `AsyncEngine`, for scripts and the CLI."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from tidemill._sync import LoopThread
from tidemill.engine._engine import AsyncEngine, RunEvent, RunInfo
from tidemill.engine._signalling import EVENT_KEEP
from tidemill.engine._step_journal import JournalEntry
from tidemill.engine.runs._waiting import Delivery
from tidemill.engine.runs._waits import Wait
from tidemill.engine.workers._retention import RETENTION_BATCH, Pruned
from tidemill.engine.workers._worker import Worker
from tidemill.errors import RunStateError
from tidemill.flows import Flow
from tidemill.store import ApprovalRow, JobRow, LogRow, MemoryRow, SignalRow
from tidemill.types import Message
from tidemill.workspace import AsyncWorkspace, Workspace

__all__ = ["Engine", "Run"]


class Run:
    """A handle on one run. Every property reads the store afresh.

    Examples:
        >>> import tempfile
        >>> from tidemill import Engine, Flow
        >>> step = {"id": "hi", "identity": {}, "inputs": {"n": 1}}
        >>> flow = Flow.model_validate({"steps": [step]})
        >>> engine = Engine(f"sqlite:///{tempfile.mkdtemp()}/t.db")
        >>> run = engine.submit(flow)
        >>> run.status  # no worker has taken it yet
        'queued'
        >>> with engine.worker():
        ...     run.wait(timeout=30)
        {'n': 1}
        >>> run.status, run.result
        ('succeeded', {'n': 1})
        >>> engine.close()
    """

    def __init__(self, engine: Engine, run_id: str) -> None:
        self._engine = engine
        self.id = run_id
        """The run's id."""

    def __repr__(self) -> str:
        return f"Run({self.id!r})"

    def info(self) -> RunInfo:
        """The run as it stands now."""
        info: RunInfo = self._engine._call(self._engine.core.get(self.id))
        return info

    @property
    def status(self) -> str:
        """`queued`, `running`, `waiting`, `succeeded`, `failed` or `cancelled`."""
        return self.info().status

    @property
    def result(self) -> Any:
        """The result of a succeeded run.

        Raises:
            RunFailed: The run failed.
            RunStateError: The run has not finished, or was cancelled.
        """
        info = self.info()
        if not info.done:
            raise RunStateError(
                f"Run {self.id} is {info.status}; it has no result yet.",
                hint="Call run.wait() to wait for it.",
            )
        return self._engine._call(self._engine.core.wait(self.id, 0))

    def wait(self, timeout: float | None = None) -> Any:
        """Wait until the run ends; return its result (see `AsyncEngine.wait`)."""
        return self._engine._call(self._engine.core.wait(self.id, timeout))

    def cancel(self) -> None:
        """Cancel the run and everything running in it."""
        self._engine._call(self._engine.core.cancel(self.id))

    def retry(self) -> None:
        """Run a failed run again from its failed steps."""
        self._engine._call(self._engine.core.retry(self.id))

    def waits(self) -> list[Wait]:
        """What each unfinished step of the run waits for (see `AsyncEngine.waits`)."""
        return self._engine.waits(self.id)


class Engine:
    """Durable runs of flows, from blocking code. See `AsyncEngine` for the arguments.

    `submit` only enqueues; start a worker here with `engine.worker()` or in
    other processes with `tidemill worker --db URL`.
    """

    def __init__(
        self, url: str | None = None, *, migrate: bool | None = None, max_connections: int = 4
    ) -> None:
        self.core = AsyncEngine(url, migrate=migrate, max_connections=max_connections)
        self._loop = LoopThread("tidemill-engine")

    def _call(self, coroutine: Any) -> Any:
        return self._loop.run(coroutine)

    @property
    def url(self) -> str:
        """The store's URL."""
        return str(self.core.url)

    def submit(
        self,
        flow: Flow | str | Path | Mapping[str, Any],
        inputs: Mapping[str, Any] | None = None,
        *,
        run_as: str | None = None,
        source: Mapping[str, Any] | None = None,
        memory_id: str | None = None,
        start_at: float | datetime | None = None,
    ) -> Run:
        """Validate the input and enqueue a run (see `AsyncEngine.submit`)."""
        submitted = self.core.submit(
            flow, inputs, run_as=run_as, source=source, memory_id=memory_id, start_at=start_at
        )
        return Run(self, self._call(submitted))

    def submit_path(
        self,
        workspace: Workspace | AsyncWorkspace,
        path: str,
        inputs: Mapping[str, Any] | None = None,
        *,
        draft: bool = False,
        memory_id: str | None = None,
        start_at: float | datetime | None = None,
        idempotency_key: str | None = None,
    ) -> Run:
        """Run the workspace flow at `path` as its principal (see `AsyncEngine.submit_path`).

        Examples:
            >>> import tempfile
            >>> from tidemill import Engine
            >>> from tidemill.workspace import Workspace
            >>> url = f"sqlite:///{tempfile.mkdtemp()}/t.db"
            >>> with Engine(url) as engine, Workspace(url, user="ada") as ws, engine.worker():
            ...     _ = ws.add_folder("demo")
            ...     _ = ws.write("f/demo/echo", "flow", {"steps": [{"id": "a", "identity": {},
            ...         "inputs": {"who": "$var:f/demo/who"}}]})
            ...     _ = ws.write("f/demo/who", "variable", "the team")
            ...     run = engine.submit_path(ws, "f/demo/echo")
            ...     print(run.wait(timeout=60), run.info().run_as, run.info().source["version"])
            {'who': 'the team'} ada 1
        """
        core = workspace.core if isinstance(workspace, Workspace) else workspace
        submitted = self.core.submit_path(
            core, path, inputs, draft=draft, memory_id=memory_id, start_at=start_at,
            idempotency_key=idempotency_key,
        )  # fmt: skip
        return Run(self, self._call(submitted))

    def run(self, run_id: str) -> Run:
        """A handle on an existing run (checked to exist)."""
        self._call(self.core.get(run_id))
        return Run(self, run_id)

    def runs(
        self, *, status: str | None = None, flow: str | None = None, limit: int = 50
    ) -> list[RunInfo]:
        """Top-level runs, newest first."""
        result: list[RunInfo] = self._call(self.core.runs(status=status, flow=flow, limit=limit))
        return result

    def jobs(self, run_id: str) -> list[JobRow]:
        """Every step attempt of a run, oldest first."""
        result: list[JobRow] = self._call(self.core.jobs(run_id))
        return result

    def memories(self, memory_id: str | None = None, *, limit: int = 100) -> list[MemoryRow]:
        """Stored agent memories (see `AsyncEngine.memories`)."""
        rows: list[MemoryRow] = self._call(self.core.memories(memory_id, limit=limit))
        return rows

    def delete_memory(self, memory_id: str, *, step: str | None = None) -> int:
        """Delete a stored memory (see `AsyncEngine.delete_memory`)."""
        removed: int = self._call(self.core.delete_memory(memory_id, step=step))
        return removed

    def logs(self, run_id: str, *, after: int = 0) -> list[LogRow]:
        """What the run's steps printed (see `AsyncEngine.logs`)."""
        result: list[LogRow] = self._call(self.core.logs(run_id, after=after))
        return result

    def events(self, run_id: str, *, after: int = 0, limit: int = 500) -> list[RunEvent]:
        """A run's events after the event `after`, in order (see `AsyncEngine.events`)."""
        result: list[RunEvent] = self._call(self.core.events(run_id, after=after, limit=limit))
        return result

    def usage(self, run_id: str) -> list[dict[str, Any]]:
        """Every model call of a run's AI steps, oldest first (see `AsyncEngine.usage`)."""
        result: list[dict[str, Any]] = self._call(self.core.usage(run_id))
        return result

    def linked_agents(self, run_id: str) -> list[dict[str, Any]]:
        """The agents a run's linked steps ran (see `AsyncEngine.linked_agents`)."""
        result: list[dict[str, Any]] = self._call(self.core.linked_agents(run_id))
        return result

    def approvals(
        self, run_id: str | None = None, *, status: str | None = "pending"
    ) -> list[ApprovalRow]:
        """Approval requests, pending ones by default."""
        result: list[ApprovalRow] = self._call(self.core.approvals(run_id, status=status))
        return result

    def approve(
        self,
        approval_id: str,
        *,
        actor: str | None = None,
        comment: str | None = None,
        edited_arguments: Mapping[str, Any] | None = None,
    ) -> ApprovalRow:
        """Approve a pending approval (a tool call's with `edited_arguments`, if given)."""
        result: ApprovalRow = self._call(
            self.core.approve(
                approval_id, actor=actor, comment=comment, edited_arguments=edited_arguments
            )
        )
        return result

    def reconcile(
        self,
        approval_id: str,
        happened: bool,
        *,
        actor: str | None = None,
        result: str | None = None,
    ) -> ApprovalRow:
        """Say whether a call cut short by a crash took effect (see `AsyncEngine.reconcile`)."""
        row: ApprovalRow = self._call(
            self.core.reconcile(approval_id, happened, actor=actor, result=result)
        )
        return row

    def answer(self, approval_id: str, text: str, *, actor: str | None = None) -> ApprovalRow:
        """Answer an agent's question (see `AsyncEngine.answer`)."""
        row: ApprovalRow = self._call(self.core.answer(approval_id, text, actor=actor))
        return row

    def extend(
        self, approval_id: str, new_limit: int | None, *, actor: str | None = None
    ) -> ApprovalRow:
        """Extend (or stop, None) an agent's budget (see `AsyncEngine.extend`)."""
        row: ApprovalRow = self._call(self.core.extend(approval_id, new_limit, actor=actor))
        return row

    def waits(self, run_id: str) -> list[Wait]:
        """What each unfinished step of a run waits for (see `AsyncEngine.waits`).

        Examples:
            >>> import tempfile
            >>> from tidemill import Engine, Flow
            >>> flow = Flow.model_validate({"steps": [{"id": "hi", "identity": {}}]})
            >>> with Engine(f"sqlite:///{tempfile.mkdtemp()}/t.db") as engine:
            ...     run = engine.submit(flow)       # no worker runs here
            ...     [(w.step, w.kind, w.commands) for w in engine.waits(run.id)]
            [('hi', 'queued', ('tidemill worker',))]
        """
        result: list[Wait] = self._call(self.core.waits(run_id))
        return result

    def transcript(self, run_id: str, step_id: str) -> list[Message]:
        """The conversation of an `ai_agent` step (see `AsyncEngine.transcript`)."""
        result: list[Message] = self._call(self.core.transcript(run_id, step_id))
        return result

    def journal(self, run_id: str, step_id: str) -> list[JournalEntry]:
        """An `ai_agent` step's journal entries, replayed or live (see `AsyncEngine.journal`)."""
        entries: list[JournalEntry] = self._call(self.core.journal(run_id, step_id))
        return entries

    def reject(
        self, approval_id: str, *, actor: str | None = None, comment: str | None = None
    ) -> ApprovalRow:
        """Reject a pending approval: an approval step fails its run; a tool call is refused.

        A refused tool call goes back to the agent's model as an error with
        `comment` as the feedback; the agent goes on.
        """
        result: ApprovalRow = self._call(
            self.core.reject(approval_id, actor=actor, comment=comment)
        )
        return result

    def send_event(
        self,
        name: str,
        key: str = "",
        payload: Any = None,
        *,
        workspace: str = "",
        path: str = "",
        dedupe_id: str | None = None,
        sent_by: str | None = None,
        keep: float = EVENT_KEEP,
    ) -> Delivery:
        """Send an event to the steps waiting for it (see `AsyncEngine.send_event`).

        Examples:
            >>> import tempfile
            >>> from tidemill import Engine, Flow
            >>> flow = Flow.model_validate({"steps": [
            ...     {"id": "paid", "wait_for_event": {"name": "paid", "key": "flow_input.order"}}]})
            >>> with Engine(f"sqlite:///{tempfile.mkdtemp()}/t.db") as engine, engine.worker():
            ...     early = engine.send_event("paid", "7", {"amount": 12})  # kept for the run
            ...     run = engine.submit(flow, {"order": 7})
            ...     print(early.kept_until is not None, run.wait(timeout=60))
            True {'amount': 12}
        """
        delivery: Delivery = self._call(
            self.core.send_event(
                name,
                key,
                payload,
                workspace=workspace,
                path=path,
                dedupe_id=dedupe_id,
                sent_by=sent_by,
                keep=keep,
            )
        )
        return delivery

    def kept_events(
        self, *, name: str | None = None, limit: int = 100, after: int = 0
    ) -> list[SignalRow]:
        """Events no step has taken yet (see `AsyncEngine.kept_events`)."""
        rows: list[SignalRow] = self._call(
            self.core.kept_events(name=name, limit=limit, after=after)
        )
        return rows

    def prune_runs(
        self,
        older_than: float | timedelta,
        *,
        workspace: str | None = None,
        batch: int = RETENTION_BATCH,
        dry_run: bool = False,
        on_batch: Callable[[Pruned], None] | None = None,
    ) -> Pruned:
        """Delete the runs that ended more than `older_than` ago (see `AsyncEngine.prune_runs`)."""
        pruned: Pruned = self._call(
            self.core.prune_runs(
                older_than, workspace=workspace, batch=batch, dry_run=dry_run, on_batch=on_batch
            )
        )
        return pruned

    @contextlib.contextmanager
    def worker(self, concurrency: int = 4, **options: Any) -> Iterator[Worker]:
        """Run a worker in this process (on the engine's thread) for the block."""
        manager = self.core.worker(concurrency, **options)
        worker: Worker = self._call(manager.__aenter__())
        try:
            yield worker
        finally:
            self._call(manager.__aexit__(None, None, None))

    def close(self) -> None:
        """Close the store and the engine's thread."""
        self._call(self.core.close())
        self._loop.close()

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
