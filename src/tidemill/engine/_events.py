"""A run's events: reading them in order, following a live run, and an agent step's turns.

The store writes a run's events (`tm_events`) in the transaction of each
change they describe: runs queued, started and finished, steps started and
finished, log chunks, model usage, waits and their decisions. What an
`ai_agent` step's journal gains (its model turns, its tool calls and their
results) is journaled by the agent library's checkpointer on a connection
of its own, so `journal_events` records it right after each append, in one
store transaction per append. Child runs' events carry their top-level
run's id: whoever follows a run sees its sub-flows and tool flows too.

While an agent step's model writes, its text comes as `text_delta` events
(`turn`, `offset`, `text`, and `agent`/`task` for a specialist's), at most
one store write per 250 ms per step execution, the rest of a turn's text
before its `model_turn` (`tidemill.engine.ai._deltas`). They are live
progress only, best-effort and not journaled: a resumed step has none for
the turns it reads back, and the turn's text is its `model_turn`'s.

`RunEvents` is the engine's side: `events` reads a page after an event id,
`follow` yields events as they are written until the run ends.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from tidemill.agents.journal import JournalEvent, ModelTurn, ToolFinished, ToolStarted, UserInput
from tidemill.errors import RunNotFound
from tidemill.store import FINISHED_RUN, EventRow, JobRow, RunRow, Store, Tx

__all__ = [
    "FOLLOW_POLL",
    "JournalSink",
    "RunEvent",
    "RunEvents",
    "follow_events",
    "journal_events",
    "read_events",
]

FOLLOW_POLL = 0.05
"""Seconds `follow` waits before it looks for new events again, while they come."""

FOLLOW_IDLE = 0.5
"""The longest `follow` waits between looks, once a run has been quiet for a while."""

JournalSink = Callable[[str, Sequence[JournalEvent], int], Awaitable[None]]
"""Told of each append to an agent step's journal: the thread, the events, the new last seq."""


@dataclass(frozen=True, slots=True)
class RunEvent:
    """One event of a run: what happened, in order, for a live view (server-sent events).

    Use `AsyncEngine.events` to read them after an id (`Last-Event-ID`), and
    `AsyncEngine.follow` to wait for new ones. The kinds and their `data`
    are listed in the engine's docs ("A run's events").
    """

    id: int
    """Its place among the store's events: resume after it with `after=id`."""
    run_id: str
    """The run it is about: the run followed, or one of its child runs."""
    step_id: str | None
    """The step it is about, if any."""
    kind: str
    """What happened: `run_started`, `step_finished`, `log`, `model_turn`, ..."""
    data: dict[str, Any]
    """The kind's details, as JSON."""
    at: float
    """When it was recorded (seconds since the epoch)."""
    job_id: int | None = None
    """The job (step attempt) it is about, if any."""

    @classmethod
    def of(cls, row: EventRow) -> RunEvent:
        """The event of a stored row."""
        return cls(row.id, row.run_id, row.step_id, row.kind, row.data, row.at, row.job_id)


def _page(tx: Tx, *, run_id: str, after: int, limit: int) -> tuple[RunRow, list[EventRow]]:
    """The run, then its events after `after` (a child run's: only its own)."""
    run = tx.run(run_id)
    if run is None:
        raise RunNotFound(
            f"No run {run_id} in this store.", hint="List runs with `tidemill runs list`."
        )
    own = None if run.parent_id is None else run.id
    return run, tx.events(run.root_id, after=after, limit=limit, run_id=own)


async def read_events(
    store: Store, run_id: str, *, after: int = 0, limit: int = 500
) -> list[RunEvent]:
    """Up to `limit` events of a run (and its child runs) after the event `after`, in order.

    Raises:
        RunNotFound: There is no such run.
    """
    _, rows = await store.transact(lambda tx: _page(tx, run_id=run_id, after=after, limit=limit))
    return [RunEvent.of(row) for row in rows]


async def follow_events(
    store: Store, run_id: str, *, after: int = 0, poll: float = FOLLOW_POLL, limit: int = 500
) -> AsyncIterator[RunEvent]:
    """Yield a run's events after `after` as they are written, until the run ends.

    The last event yielded is the run's `run_finished`; a run that had ended
    before `after` yields nothing more. It looks again every `poll` seconds
    while events come, less often (up to `FOLLOW_IDLE`) while the run is
    quiet: one indexed query a look, nothing held in between.

    Raises:
        RunNotFound: There is no such run.
    """
    wait = poll
    while True:
        page = partial(_page, run_id=run_id, after=after, limit=limit)
        run, rows = await store.transact(page)
        for row in rows:
            yield RunEvent.of(row)
            after = row.id
            if row.kind == "run_finished" and row.run_id == run.id:
                return
        if len(rows) == limit:
            continue
        if rows:
            wait = poll
        elif run.status in FINISHED_RUN:
            return  # it ended before `after` (or before it had events)
        await asyncio.sleep(wait)
        if not rows:
            wait = min(max(wait, poll) * 1.5, max(FOLLOW_IDLE, poll))


class RunEvents:
    """`AsyncEngine`'s reads of a run's events (see `RunEvent`)."""

    async def _open(self) -> Store:
        raise NotImplementedError

    async def events(self, run_id: str, *, after: int = 0, limit: int = 500) -> list[RunEvent]:
        """Up to `limit` events of a run and its child runs after the event `after`, in order.

        Pass the `id` of the last event seen as `after` (an SSE client's
        `Last-Event-ID`) to resume with nothing missed or repeated. For a
        child run, only its own events.

        Raises:
            RunNotFound: There is no such run.
        """
        return await read_events(await self._open(), run_id, after=after, limit=limit)

    async def follow(
        self, run_id: str, *, after: int = 0, poll: float = FOLLOW_POLL
    ) -> AsyncIterator[RunEvent]:
        """Yield a run's events after `after` as they are written; stop once it ends.

        The last event is the run's `run_finished` (see `follow_events`).

        Raises:
            RunNotFound: There is no such run.
        """
        store = await self._open()
        async for event in follow_events(store, run_id, after=after, poll=poll):
            yield event


# --- an agent step's journal ------------------------------------------------------------


def _journal_event(event: JournalEvent) -> tuple[str, dict[str, Any]] | None:
    """The run event of a journal event, or None for those shown otherwise (or not at all)."""
    if isinstance(event, ModelTurn):
        return "model_turn", {
            "response": event.response.model_dump(mode="json"),
            "started": list(event.started),
        }
    if isinstance(event, ToolStarted):
        return "tool_started", {
            "call": event.call.model_dump(mode="json"),
            "attempt": event.attempt,
        }
    if isinstance(event, ToolFinished):
        return "tool_result", {
            "result": event.result.model_dump(mode="json"),
            "duration_ms": event.duration_ms,
        }
    if isinstance(event, UserInput):
        return "agent_input", {"messages": [m.model_dump(mode="json") for m in event.messages]}
    return None  # approvals are waits; the step's end is `step_finished`


def journal_events(
    store: Store,
    run: RunRow,
    job: JobRow,
    step_thread: str,
    mask: Callable[[Any], Any] = lambda value: value,
) -> JournalSink:
    """What records an agent step's journal appends as run events (`StepJournal.on_append`).

    Each event's data carries its journal `seq`, and `thread` when it is not
    the step's own (a delegated specialist's). `mask` hides the job's
    secrets.
    """

    async def record(thread: str, events: Sequence[JournalEvent], seq: int) -> None:
        first = seq - len(events) + 1
        rows: list[tuple[str, Any]] = []
        for offset, event in enumerate(events):
            found = _journal_event(event)
            if found is None:
                continue
            kind, data = found
            data["seq"] = first + offset
            if thread != step_thread:
                data["thread"] = thread
            rows.append((kind, mask(data)))
        if not rows:
            return
        now = time.time()
        full = [(run.root_id, run.id, job.id, job.step_id, kind, data, now) for kind, data in rows]
        if store.dialect == "postgres":  # one statement on the event loop: no thread hop
            await store.write_one(*Tx.events_statement(full))
            return

        def add(tx: Tx) -> None:
            for root_id, run_id, job_id, step_id, kind, data, at in full:
                tx.add_event(
                    run_id, kind, data, now=at, root_id=root_id, job_id=job_id, step_id=step_id
                )

        await store.transact(add)

    return record
