"""`ThreadWriter`: one process's handle on a thread, appending and folding as it goes."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping

from pydantic import JsonValue

from tidemill.agents._decisions import decision_events, decisions_from_flags
from tidemill.agents.checkpoint import Checkpointer
from tidemill.agents.journal import JournalEvent, ThreadState
from tidemill.agents.tracing import Span
from tidemill.errors import ApprovalError, JournalConflict, ThreadBusy
from tidemill.tools import ToolRegistry
from tidemill.types import Decision

__all__ = [
    "ThreadWriter",
    "check_resumable",
    "check_startable",
    "load_state",
    "record_decisions",
]

# Only the effects of calls already admitted move past others' decisions; a
# decision itself must be checked again against the new state by its caller.
_REBASABLE = frozenset({"tool_started", "tool_finished"})


async def load_state(checkpointer: Checkpointer, thread_id: str) -> ThreadState:
    """Rebuild a thread's state from its journal."""
    state = ThreadState(thread_id)
    for record in await checkpointer.read(thread_id):
        state.apply(record.seq, record.event)
    return state


def check_startable(state: ThreadState) -> None:
    """Refuse a new run on a thread that waits for decisions or has an unfinished run.

    Raises:
        ApprovalError: The thread is paused for approval.
        ThreadBusy: The thread has an unfinished run.
    """
    if state.status == "paused":
        raise ApprovalError(
            f"Thread {state.thread_id!r} is waiting for approval.",
            hint="Decide the pending calls with resume() before starting a new run.",
            context={"pending": list(state.pending)},
        )
    if state.status == "running":
        raise ThreadBusy(
            f"Thread {state.thread_id!r} has an unfinished run.",
            hint="Continue it with resume(thread_id), or use another thread.",
        )


def check_resumable(
    state: ThreadState, thread_id: str, *, decided: bool, retry_in_flight: bool
) -> None:
    """Refuse to resume a thread that cannot go on, once its decisions (if `decided`) are recorded.

    Raises:
        ThreadBusy: After decisions, a call is still in flight and `retry_in_flight` is False.
        ApprovalError: Without decisions, the thread waits for some, or has no run to continue.
    """
    if decided:
        in_flight = [state.open_calls[c] for c in state.attempts if c in state.open_calls]
        if in_flight and not retry_in_flight:
            raise ThreadBusy(
                "The decisions were recorded; "
                + ", ".join(f"{c.name} ({c.id})" for c in in_flight)
                + " is still running in another process, which will carry the run on.",
                hint="Wait for that process; if it died, resume(thread_id, "
                "retry_in_flight=True) runs the unfinished call again.",
                context={"thread_id": thread_id, "calls": [c.id for c in in_flight]},
            )
    elif state.status == "paused":
        raise ApprovalError(
            f"Thread {thread_id!r} is waiting for decisions on "
            + ", ".join(f"{c.name} ({cid})" for cid, c in state.pending.items())
            + ".",
            hint="Pass decisions={call_id: Decision.approve()} or approved=True.",
            context={"pending": list(state.pending)},
        )
    elif state.status != "running":
        raise ApprovalError(
            f"Thread {thread_id!r} has nothing to resume (it is {state.status}).",
            hint="Start a new run on it with run(prompt, thread_id=...).",
            context={"status": state.status},
        )


class ThreadWriter:
    """Appends events to one thread and applies each to the state it holds.

    Every append names the last seq this writer saw; if another process
    appended in between, the append fails and the run stops with `ThreadBusy`
    before it causes any effect.
    """

    def __init__(self, checkpointer: Checkpointer, state: ThreadState) -> None:
        self.checkpointer = checkpointer
        self.state = state
        self.started = time.perf_counter()
        self.validated: dict[str, dict[str, object]] = {}
        """Validated arguments by call id, so a call is not validated twice."""
        self.span: Span | None = None
        """The run's trace span, the parent of its model and tool spans."""
        self.retry_in_flight = False
        """Whether calls started by an earlier, dead process may run again."""
        self.deps: object = None
        """The run's `deps=`, for its tools (`ToolContext.deps`); never journaled."""
        self._lock = asyncio.Lock()

    @property
    def thread_id(self) -> str:
        """The thread this writer appends to."""
        return self.state.thread_id

    async def append(self, *events: JournalEvent) -> None:
        """Append `events` in one write, then fold them into `state`.

        When a tool's start or result loses a race only to approval decisions
        (a person deciding other pending calls while this process runs some),
        those are folded in and the append is retried after them: a finished
        call's result is never dropped because somebody decided another call.

        Raises:
            ThreadBusy: When another writer did anything else to the thread.
        """
        # acquire/release rather than `async with`: two coroutines fewer per append.
        await self._lock.acquire()
        try:
            while True:
                after = self.state.seq
                try:
                    await self.checkpointer.append(self.thread_id, events, after=after)
                    break
                except JournalConflict as exc:
                    newer = await self.checkpointer.read(self.thread_id, after=after)
                    if (
                        not newer
                        or any(e.kind not in _REBASABLE for e in events)
                        or any(r.event.kind != "approval_decided" for r in newer)
                    ):
                        raise ThreadBusy(
                            f"Thread {self.thread_id!r} was changed by another process "
                            "while this one was working on it.",
                            hint="Another resume or run owns it now; "
                            "read its state() to see where it is.",
                            context={"thread_id": self.thread_id, "seq": after},
                        ) from exc
                    for record in newer:
                        self.state.apply(record.seq, record.event)
            for offset, event in enumerate(events, start=after + 1):
                self.state.apply(offset, event)
        finally:
            self._lock.release()

    def elapsed_ms(self) -> float:
        """Milliseconds since this writer was created."""
        return (time.perf_counter() - self.started) * 1000


_ATTEMPTS = 3


async def record_decisions(
    checkpointer: Checkpointer,
    tools: ToolRegistry,
    thread_id: str,
    decisions: Mapping[str, Decision] | None,
    approved: bool | None,
    *,
    feedback: str,
    edited_arguments: Mapping[str, dict[str, JsonValue]] | None,
) -> ThreadWriter:
    """Load the thread and record the decisions, if any, re-reading after a lost race.

    A retry re-checks the decisions against the new state, so a call that
    someone else decided meanwhile is refused, never decided twice.
    """
    for attempt in range(_ATTEMPTS):
        writer = ThreadWriter(checkpointer, await load_state(checkpointer, thread_id))
        if decisions is None and approved is None:
            return writer
        chosen = (
            decisions_from_flags(
                writer.state,
                approved=approved,
                feedback=feedback,
                edited_arguments=edited_arguments,
            )
            if approved is not None
            else decisions
        )
        assert chosen is not None
        try:
            await writer.append(*decision_events(writer.state, chosen, tools))
        except ThreadBusy:
            if attempt + 1 == _ATTEMPTS:
                raise
            continue
        return writer
    raise AssertionError("unreachable")  # pragma: no cover
