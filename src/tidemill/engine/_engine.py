"""`AsyncEngine`: submit flows as durable runs and watch them (decisions: `_deciding`).

An engine by itself runs nothing: `submit` only enqueues. Workers execute,
in other processes (`tidemill worker`) or in this one (`engine.worker()`).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Mapping, Sequence
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any

from tidemill.engine._deciding import Deciding
from tidemill.engine._events import RunEvent, RunEvents
from tidemill.engine._ids import new_id
from tidemill.engine._memory import memory_scope, memory_uuid
from tidemill.engine._pruning import Pruning
from tidemill.engine._run_info import RunInfo, run_info
from tidemill.engine._signalling import Signalling
from tidemill.engine._step_journal import JournalEntry, journal_entries, read_step_journal
from tidemill.engine.runs._lifecycle import concurrency_key
from tidemill.engine.runs._transition import Transition
from tidemill.engine.runs._waits import Wait, read_waits
from tidemill.engine.workers._linked import recorded_agents
from tidemill.errors import (
    ConfigurationError,
    InvalidOption,
    RunFailed,
    RunNotFound,
    RunStateError,
    RunTimeout,
)
from tidemill.flows import Flow
from tidemill.store import (
    FINISHED_RUN,
    JobRow,
    LogRow,
    MemoryRow,
    Tx,
)
from tidemill.types import Message
from tidemill.workspace import AsyncWorkspace

__all__ = ["AsyncEngine", "RunEvent", "RunInfo"]


def _status(tx: Tx, *, run_id: str) -> str:
    run = tx.run(run_id)
    if run is None:
        raise RunNotFound(
            f"No run {run_id} in this store.", hint="List runs with `tidemill runs list`."
        )
    return run.status


def _load(flow: Flow | str | Path | Mapping[str, Any]) -> Flow:
    if isinstance(flow, Flow):
        flow.check()  # a flow built with `Flow.model_validate` was not checked for use yet
        return flow
    if isinstance(flow, Mapping):
        return Flow.from_dict(flow)
    if not isinstance(flow, str | Path):
        raise InvalidOption(
            f"A flow is a Flow, a mapping or the path of a flow file, not {type(flow).__name__}.",
            hint="Pass Flow.parse(text), a dict of the flow, or the path of its .yaml file.",
        )
    return Flow.load(flow)


class AsyncEngine(Deciding, Signalling, Pruning, RunEvents):
    """Durable runs of flows in a store (and their events: `events`, `follow`).

    Args:
        url: `sqlite:///path.db` (the default is `sqlite:///.tidemill/tidemill.db`)
            or `postgresql://...` (add `?schema=name` to use a schema of its own).
        migrate: Bring the schema up to date on first use. The default does
            so for SQLite; PostgreSQL stores are upgraded with
            `tidemill db upgrade` (or `migrate=True`).
        max_connections: PostgreSQL connections this engine may open.
    """

    async def submit(
        self,
        flow: Flow | str | Path | Mapping[str, Any],
        inputs: Mapping[str, Any] | None = None,
        *,
        run_as: str | None = None,
        source: Mapping[str, Any] | None = None,
        memory_id: str | None = None,
        start_at: float | datetime | None = None,
    ) -> str:
        """Validate the input and enqueue a run; return its id.

        Args:
            flow: The flow, its document as a mapping, or the path of a flow file.
            inputs: The flow's input.
            run_as: The workspace user the run's `$var:` and `$res:`
                references are resolved as, when its jobs run (None: no one;
                a step with references then fails). `submit_path` sets it
                to the workspace's principal.
            source: What the run ran, recorded with it (`RunInfo.source`).
            memory_id: The run's memory id: the memory its window-memory agent
                steps recall and extend when a step names none. A UUID is
                kept as is; another string is hashed to a v5 UUID scoped to
                the workspace and the flow the run starts from (`source`'s, or
                the flow's name), so one key in two flows names two memories.
            start_at: Run later: its first steps are due at this time (epoch
                seconds, or an aware `datetime`); until then the run is
                `queued` and holds no worker. A time past starts it now.

        Raises:
            FlowValidationError: The flow (file) is malformed, or `Flow.check` finds a
                mistake in it (a model spec, a placeholder, a script's inputs).
            FlowInputError: `inputs` does not fit the flow's input schema.
        """
        (run_id,) = await self.submit_many(
            flow,
            [inputs or {}],
            run_as=run_as,
            source=source,
            memory_id=memory_id,
            start_at=start_at,
        )
        return run_id

    async def submit_many(
        self,
        flow: Flow | str | Path | Mapping[str, Any],
        inputs: Sequence[Mapping[str, Any]],
        *,
        run_as: str | None = None,
        source: Mapping[str, Any] | None = None,
        memory_id: str | None = None,
        start_at: float | datetime | None = None,
    ) -> list[str]:
        """Enqueue one run per input, in one transaction; return their ids in order.

        Every input is validated first: one bad input enqueues nothing.
        `run_as`, `source`, `memory_id` and `start_at` are `submit`'s, for every run.
        """
        created = await self._create(
            flow, inputs, run_as=run_as, source=source, memory_id=memory_id, start_at=start_at
        )
        return [run_id for run_id, _ in created]

    async def _create(
        self,
        flow: Flow | str | Path | Mapping[str, Any],
        inputs: Sequence[Mapping[str, Any]],
        *,
        run_as: str | None,
        source: Mapping[str, Any] | None,
        memory_id: str | None,
        start_at: float | datetime | None,
        once: tuple[str, str, str] | None = None,
    ) -> list[tuple[str, bool]]:
        """Validate and enqueue runs: `(id, created)` each (`created` False: `once`'s replay).

        `once` is a webhook's `(workspace, path, idempotency key)`: the key and
        its run are stored in the transaction that creates the run, and a key
        stored before names the run returned instead (one input only).
        """
        flow = _load(flow)
        stored_memory = (
            None
            if not memory_id
            else memory_uuid(memory_id, scope=memory_scope(source, flow.name or "flow"))
        )
        checked = [flow.validate_input(each) for each in inputs]
        digest, body = flow.digest(), flow.model_dump_json()
        limit = None if flow.concurrency is None else flow.concurrency.limit
        keys = [concurrency_key(flow, digest, each) for each in checked]
        now = time.time()
        due = start_at.timestamp() if isinstance(start_at, datetime) else start_at

        def create(tx: Tx) -> list[tuple[str, bool]]:
            change = Transition(tx, self.defs, now)
            made: list[tuple[str, bool]] = []
            for each, key in zip(checked, keys, strict=True):
                run_id = new_id()
                if once is not None:
                    first = tx.put_hook_key(*once, run_id, now)
                    if first != run_id:
                        made.append((first, False))
                        continue
                change.create(
                    flow, digest, body, each, concurrency_key=key, limit=limit,
                    run_as=run_as, source=source, memory_id=stored_memory,
                    start_at=due, run_id=run_id,
                )  # fmt: skip
                made.append((run_id, True))
            return made

        created: list[tuple[str, bool]] = await self._transact(create)
        self._wake_workers()
        return created

    async def submit_path(
        self,
        workspace: AsyncWorkspace,
        path: str,
        inputs: Mapping[str, Any] | None = None,
        *,
        draft: bool = False,
        memory_id: str | None = None,
        start_at: float | datetime | None = None,
        idempotency_key: str | None = None,
    ) -> str:
        """Run the workspace flow at `path`, as the workspace's principal; return the run's id.

        The flow is what is deployed there (or, with `draft`, the principal's
        draft of it), with the workspace scripts and sub-flows it names read
        as the principal; the run records who it runs as (`RunInfo.run_as`)
        and the versions it ran (`RunInfo.source`), and the workspace audits
        its start. `memory_id` is `submit`'s (scoped to the workspace and `path`),
        `start_at` too. With `idempotency_key` (a webhook's `Idempotency-Key`),
        a key already used at `path` in the last 24 hours returns that call's
        run and starts nothing (two racing calls start one run).
        The workspace must be in this engine's database.

        Raises:
            ItemNotFound: No flow (or draft) at `path` the principal may run.
            FlowValidationError: The flow, with what it includes, is not valid.
            FlowInputError: `inputs` does not fit the flow's input schema.
            ConfigurationError: The workspace is in another database.
        """
        run_id, _created = await self.start_path(
            workspace, path, inputs, draft=draft, memory_id=memory_id, start_at=start_at,
            idempotency_key=idempotency_key,
        )  # fmt: skip
        return run_id

    async def start_path(
        self,
        workspace: AsyncWorkspace,
        path: str,
        inputs: Mapping[str, Any] | None = None,
        *,
        draft: bool = False,
        memory_id: str | None = None,
        start_at: float | datetime | None = None,
        idempotency_key: str | None = None,
    ) -> tuple[str, bool]:
        """`submit_path`, answering `(run id, created)`.

        `created` is False when `idempotency_key` named a run an earlier call
        started (the run returned is that one, and nothing started): a
        webhook answers such a replay with `Idempotent-Replayed: true`, even
        when the two calls raced.
        """
        if workspace.store is not self.store and str(workspace.store.url) != str(self.url):
            raise ConfigurationError(
                f"The workspace is in {workspace.store.url}, the engine in {self.url}: "
                "a run's references are resolved in the engine's database.",
                hint="Open the workspace on the engine's store: AsyncWorkspace(engine.store, ...).",
                context={"workspace_store": str(workspace.store.url), "engine": str(self.url)},
            )
        plan = await workspace.run_plan(path, draft=draft)
        once = None
        if idempotency_key is not None:
            once = (workspace.name, str(plan.source.get("path", path)), idempotency_key)
        ((run_id, created),) = await self._create(
            plan.flow, [inputs or {}], run_as=plan.run_as, source=plan.source,
            memory_id=memory_id, start_at=start_at, once=once,
        )  # fmt: skip
        if created:
            await workspace.record_run(run_id, plan)
        return run_id, created

    async def get(self, run_id: str) -> RunInfo:
        """The run as it stands now."""

        def read(tx: Tx) -> RunInfo:
            run = tx.run(run_id)
            if run is None:
                raise RunNotFound(
                    f"No run {run_id} in this store.",
                    hint="List runs with `tidemill runs list`.",
                )
            return run_info(tx, run)

        info: RunInfo = await self._transact(read)
        return info

    async def wait(self, run_id: str, timeout: float | None = None) -> Any:  # noqa: ASYNC109
        """Wait for the run to end; return its result.

        Raises:
            RunFailed: The run failed (carries the step and its error).
            RunStateError: The run was cancelled.
            RunTimeout: `timeout` seconds passed first; the run goes on.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        delay = 0.01
        while True:
            self._progress.clear()
            status = await self._transact(partial(_status, run_id=run_id))
            if status in FINISHED_RUN:
                return _outcome(await self.get(run_id))
            if deadline is not None and time.monotonic() >= deadline:
                info = await self.get(run_id)
                raise RunTimeout(
                    f"Run {run_id} is still {info.status} after {timeout} s.",
                    hint="Wait again, or watch it with `tidemill runs show`.",
                    context={"run_id": run_id, "status": info.status},
                )
            pause = delay if deadline is None else min(delay, max(0.0, deadline - time.monotonic()))
            # A worker in this process says when it ends a run; others are polled.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._progress.wait(), pause)
            delay = min(delay * 1.5, 0.5)

    async def cancel(self, run_id: str) -> RunInfo:
        """Cancel a run: queued steps never start, running ones are stopped."""
        now = time.time()
        await self._transact(lambda tx: Transition(tx, self.defs, now).cancel(run_id))
        return await self.get(run_id)

    async def retry(self, run_id: str) -> RunInfo:
        """Run a failed run again from its failed steps (finished steps are kept)."""
        now = time.time()
        await self._transact(lambda tx: Transition(tx, self.defs, now).retry(run_id))
        self._wake_workers()
        return await self.get(run_id)

    async def runs(
        self,
        *,
        status: str | None = None,
        flow: str | None = None,
        limit: int = 50,
        before: tuple[float, str] | None = None,
    ) -> list[RunInfo]:
        """Top-level runs, newest first, older than `before` (a `(created_at, id)`) if given."""

        def read(tx: Tx) -> list[RunInfo]:
            runs = tx.runs(status=status, flow=flow, limit=limit, before=before)
            return [run_info(tx, run, shown) for run, shown in runs]

        infos: list[RunInfo] = await self._transact(read)
        return infos

    async def jobs(self, run_id: str) -> list[JobRow]:
        """Every job (step attempt) of a run and of its branches and loops, oldest first."""
        run = await self.get(run_id)
        jobs: list[JobRow] = await self._transact(lambda tx: tx.tree_jobs(run.id))
        return jobs

    async def logs(self, run_id: str, *, after: int = 0) -> list[LogRow]:
        """What the run's steps printed, in order; a running step's so far.

        `after` is the `id` of the last `LogRow` already read: only later ones
        come (to follow a run's output while it runs).
        """
        run = await self.get(run_id)
        logs: list[LogRow] = await self._transact(lambda tx: tx.logs(run.id, after=after))
        return logs

    async def usage(self, run_id: str) -> list[dict[str, Any]]:
        """Every model call of a run's AI steps (and its branches, loops, sub-flows), oldest first.

        Each record has `run_id`, `step_id`, `job_id`, `attempt`, `model`,
        `provider`, `input_tokens`, `output_tokens`, `cost_usd` (None when
        unpriced), `latency_ms`, `error` (None when the call succeeded),
        `experiment_id`, `exposure_id` and `at`.
        """
        run = await self.get(run_id)
        rows: list[dict[str, Any]] = await self._transact(lambda tx: tx.usage(run.id))
        return rows

    async def memories(self, memory_id: str | None = None, *, limit: int = 100) -> list[MemoryRow]:
        """Stored agent memories, per (memory id, step id), most recently written first.

        `memory_id` is a memory id as stored (a UUID, as `RunInfo.memory_id`
        shows it, or `memory_uuid(key, scope=...)`): only its memories.
        Nothing expires a memory; `delete_memory` removes one.
        """
        rows: list[MemoryRow] = await self._transact(
            lambda tx: tx.agent_memories(memory_id, limit=limit)
        )
        return rows

    async def delete_memory(self, memory_id: str, *, step: str | None = None) -> int:
        """Delete a stored memory (of every step, or of `step`); return the messages removed."""
        removed: int = await self._transact(lambda tx: tx.delete_agent_memory(memory_id, step))
        return removed

    async def linked_agents(self, run_id: str) -> list[dict[str, Any]]:
        """The agents a run's linked steps ran, one record per job (see `recorded_agents`)."""
        run = await self.get(run_id)
        rows: list[dict[str, Any]] = await self._transact(partial(recorded_agents, root_id=run.id))
        return rows

    async def waits(self, run_id: str) -> list[Wait]:
        """What each unfinished step of a run waits for; empty once the run is finished.

        A person's decision (with the commands that give it), child runs (and
        what they wait for, in `Wait.children`), a worker to claim the step,
        a retry's time, the worker running it, or a concurrency slot. See
        `Wait` and `tidemill runs why RUN`.

        Raises:
            RunNotFound: No such run.
        """
        now = time.time()
        waits: list[Wait] = await self._transact(lambda tx: read_waits(tx, self.defs, run_id, now))
        return waits

    async def transcript(self, run_id: str, step_id: str) -> list[Message]:
        """The conversation of an `ai_agent` step, read from its journal (empty before it starts).

        `run_id` is the top-level run; a step inside a branch or a loop is
        found in it (the latest one to run, in a loop).

        Raises:
            RunNotFound: No such run.
        """
        found = await read_step_journal(await self._open(), (await self.get(run_id)).id, step_id)
        return [] if found is None else list(found[1].state.messages)

    async def journal(self, run_id: str, step_id: str) -> list[JournalEntry]:
        """An `ai_agent` step's journal entries, oldest first, each marked replayed or live.

        An entry is replayed when an earlier execution of the step (before a
        pause, a crash, a takeover) wrote it; see `tidemill.engine._step_journal`.
        Found as `transcript` finds the step; empty before it starts.

        Raises:
            RunNotFound: No such run.
        """
        found = await read_step_journal(await self._open(), (await self.get(run_id)).id, step_id)
        return [] if found is None else journal_entries(*found)

    async def __aenter__(self) -> AsyncEngine:
        await self._open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def _outcome(info: RunInfo) -> Any:
    if info.status == "succeeded":
        return info.result
    if info.status == "failed":
        error = info.error or {}
        raise RunFailed(info.id, error.get("step"), error)
    raise RunStateError(
        f"Run {info.id} was cancelled.", context={"run_id": info.id, "status": info.status}
    )
