"""One execution of an `ai_agent` step: its thread continued from the journal, and its outcome.

Whatever attempt of the step runs (a retry, a worker that took over after a
crash, a resume after approvals) reads the step's journal first and
continues from it:

- a thread that finished (or failed at a bound) whose outcome was not
  recorded yet gives that outcome again, without asking the model;
- a thread paused for approvals resumes with the decisions stored on the
  step's approval rows, or pauses again if there are none;
- a thread whose worker died resumes: answered model turns are not asked
  again, finished tool calls are not run again, and a call that was in
  flight runs again with the same idempotency key, unless its tool is not
  idempotent: then a person first says whether it took effect (see
  `_reconcile`);
- otherwise a new agent run starts with the step's input `user_message`
  (and the images of `user_attachments`, checked then), after its history
  (recalled memory or `previous_messages`, as
  `tidemill.engine._memory.history_source` reconciles them; its notes go
  to the job log).

Bounds (`max_iterations`, `limits`) end the step with a non-retryable
`LimitExceeded` naming the bound and its value, with the partial transcript.
`limits.max_duration` is wall time from the start of the agent run (its
first journal entry), across pauses and resumes; time spent waiting for
approvals counts. The step's `timeout`, if set, bounds each attempt instead
(a retryable `Timeout`; a retry resumes from the journal).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from functools import cached_property, partial
from typing import TYPE_CHECKING, Any

from tidemill.agents import AgentRuntime
from tidemill.agents.checkpoint import Checkpointer
from tidemill.agents.journal import RunFailed
from tidemill.engine._journal import Journal
from tidemill.engine._memory import (
    History,
    MemoryWrite,
    exchange,
    history_source,
    memory_scope,
    recall_message,
    step_key,
)
from tidemill.engine._outcome import Outcome
from tidemill.engine.ai._action import provider_retryable, step_error
from tidemill.engine.ai._approvals import decisions_for
from tidemill.engine.ai._budget import BudgetReached
from tidemill.engine.ai._child_runs import ChildRequest, ChildWait
from tidemill.engine.ai._lost_usage import lost_usage
from tidemill.engine.ai._pause import AgentPause, budget_pause, pause_for, reconcile_pause
from tidemill.engine.ai._reconcile import (
    confirmed_results,
    reconcile_answers,
    unsafe_in_flight,
)
from tidemill.engine.ai._tools import ToolSite
from tidemill.engine.ai._usage import MeteredModel
from tidemill.errors import (
    AgentInterrupt,
    AgentSuspended,
    GuardrailViolation,
    JournalConflict,
    LeaseLost,
    LimitExceeded,
    OutputValidationError,
    ProviderError,
    SerializationError,
    ThreadBusy,
    TidemillError,
    ToolRetriesExceeded,
)
from tidemill.flows._ai import AttachmentError, read_attachments
from tidemill.llm import ModelSettings
from tidemill.types import AgentResponse, ImageRef, Message, ToolCall

if TYPE_CHECKING:
    from tidemill.engine._step_env import StepEnv
    from tidemill.flows import AIAgent, Step
    from tidemill.store import ApprovalRow, Tx

__all__ = ["LIMIT_NAMES", "AgentStep", "transcript_json"]

log = logging.getLogger("tidemill.worker")

LIMIT_NAMES = {
    "max_iterations": "max_iterations",
    "requests": "max_requests",
    "tool_calls": "max_tool_calls",
    "input_tokens": "max_input_tokens",
    "output_tokens": "max_output_tokens",
    "total_tokens": "max_total_tokens",
    "max_duration": "max_duration",
}
"""The agent library's limit names, and the flow's."""

_ENDED = {
    "tool_call_retries": "ToolRetriesExceeded",
    "output_validation": "OutputValidationError",
    "guardrail": "GuardrailViolation",
}
"""Why a journaled run failed (other than a limit), as an error type."""

_BUSY_ATTEMPTS = 3
"""Times the step re-reads a journal another (presumed dead) worker wrote to meanwhile."""
_JOURNAL_ATTEMPTS = 6
"""Times the step goes on from its journal after the journal's database failed (a lost
connection, a restart), waiting 0.2, 0.4, ... 3.2 s in between: about 6 s in all."""


def transcript_json(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Messages as JSON, for errors and `AsyncEngine.transcript` callers.

    Examples:
        >>> transcript_json([Message.user("Hi")])
        [{'role': 'user', 'content': 'Hi'}]
    """
    return [message.model_dump(mode="json", exclude_defaults=True) for message in messages]


def _limit_value(agent: AIAgent, name: str) -> float | int | None:
    if name == "max_iterations":
        return agent.max_iterations
    value: float | int | None = getattr(agent.limits, name, None)
    return value


@dataclass
class AgentStep:
    """One execution of an agent step: its settings, its runtime, what it spent."""

    step: Step
    agent: AIAgent
    env: StepEnv
    inputs: dict[str, Any]
    thread: str
    runtime: AgentRuntime
    metered: MeteredModel
    site: ToolSite
    schemas: dict[str, dict[str, Any]]
    settings: ModelSettings
    max_duration: float | None
    """`limits.max_duration`, as extended by people (`on_exceeded: ask`)."""

    # -- outcomes ----------------------------------------------------------------

    def _spent(self) -> dict[str, Any]:
        return {"usage": tuple(self.metered.records), "logs": tuple(self.site.logs)}

    def succeeded(self, value: Any) -> Outcome:
        memory = None
        if self.history.memory_id is not None:
            entries = exchange(self.inputs.get("user_message"), value)
            memory = MemoryWrite(self.history.memory_id, step_key(self.step.id), entries)
        return Outcome("succeeded", value, memory=memory, **self._spent())

    @cached_property
    def history(self) -> History:
        """Where this invocation's history comes from (`history_source`)."""
        run = self.env.run
        return history_source(
            self.agent.memory,
            declared=list(self.step.inputs),
            inputs=self.inputs,
            run_memory_id=run.memory_id,
            scope=memory_scope(run.source, run.flow_name),
        )

    async def _prompt(self, text: str, images: tuple[ImageRef, ...]) -> str | list[Message]:
        """The new run's prompt: its history (if any) as one user message, then `text`, `images`.

        The history's notes (ignored inputs, stateless fall-backs) go to the job log.
        """
        history = self.history
        self.site.logs.extend(("stderr", note) for note in history.notes)
        entries: list[tuple[str, str]] = list(history.messages)
        memory_id = history.memory_id
        if memory_id is not None and history.context_length > 0:
            entries.extend(
                await self.env.store.transact(
                    lambda tx: tx.agent_memory(
                        memory_id, step_key(self.step.id), history.context_length
                    )
                )
            )
        recalled = recall_message(entries)
        if recalled is None and not images:
            return text
        return [*([] if recalled is None else [recalled]), Message.user(text, images=images)]

    async def _start(self) -> str | list[Message] | Outcome:
        """A new run's prompt, from the step's inputs; a failure when they cannot start one."""
        message = self.inputs.get("user_message")
        if message is None or message == "":
            return self.failed(
                {
                    "type": "FlowInputError",
                    "message": "an ai_agent step needs the input `user_message`",
                    "hint": "Set inputs: {user_message: ...} on the step.",
                },
                retryable=False,
            )
        try:
            images = read_attachments(self.inputs.get("user_attachments"))
        except AttachmentError as exc:
            return self.failed(
                {"type": "FlowInputError", "message": f"step {self.step.id!r}: {exc}",
                 "hint": exc.hint, "input": "user_attachments", "index": exc.index},
                retryable=False,
            )  # fmt: skip
        text = message if isinstance(message, str) else json.dumps(message)
        return await self._prompt(text, images)

    def failed(self, error: dict[str, Any], *, retryable: bool) -> Outcome:
        return Outcome("failed", error=error, retryable=retryable, **self._spent())

    def crossed(
        self, name: str, value: float | int | None, run_id: str | None, messages: Sequence[Message]
    ) -> Outcome:
        """The step stopped at a bound: a distinct, non-retryable failure naming it."""
        bound = LIMIT_NAMES.get(name, name)
        return self.failed(
            {
                "type": "LimitExceeded",
                "message": f"The agent stopped at its {bound} limit of {value}.",
                "limit": bound,
                "value": value,
                "agent_run": run_id,
                "transcript": transcript_json(messages),
            },
            retryable=False,
        )

    def ended(self, exc: TidemillError, response: AgentResponse | None) -> Outcome:
        """The agent run ended without an answer (bad tool calls, bad output, a guardrail)."""
        extra: dict[str, Any] = {}
        if response is not None:
            extra["agent_run"] = response.metadata.get("run_id")
            extra["transcript"] = transcript_json(response.messages)
        return self.failed(step_error(exc, **extra), retryable=False)

    def pause(self, journal: Journal) -> AgentPause:
        return pause_for(
            journal.state,
            self.agent,
            self.schemas,
            usage=tuple(self.metered.records),
            logs=tuple(self.site.logs),
        )

    def wait_for_children(self, suspended: AgentSuspended) -> Outcome | ChildWait:
        """Tool calls wait for their child runs: park the step until they end."""
        requests = tuple(
            exc.reason for _call, exc in suspended.suspended if isinstance(exc.reason, ChildRequest)
        )
        if len(requests) != len(suspended.suspended):  # only child tools suspend here
            return self.failed(step_error(suspended), retryable=False)
        return ChildWait(requests, usage=tuple(self.metered.records), logs=tuple(self.site.logs))

    def replay(self, journal: Journal) -> Outcome:
        """The failure a journal ends with, recorded now (its worker stopped before it could)."""
        state = journal.state
        last = next(
            (r.event for r in reversed(journal.records) if isinstance(r.event, RunFailed)), None
        )
        if last is not None and last.reason == "limit" and last.limit is not None:
            return self.crossed(
                last.limit, _limit_value(self.agent, LIMIT_NAMES.get(last.limit, last.limit)),
                state.run_id, state.messages,
            )  # fmt: skip
        kind = _ENDED.get(last.reason if last is not None else "", "AgentError")
        return self.failed(
            {
                "type": kind,
                "message": state.error or "the agent run failed",
                "agent_run": state.run_id,
                "transcript": transcript_json(state.messages),
            },
            retryable=False,
        )

    # -- driving -----------------------------------------------------------------

    async def drive(self, checkpointer: Checkpointer) -> Outcome | AgentPause | ChildWait:
        """Continue the thread from wherever its journal stands.

        When the journal's database fails on the way (its connection killed,
        the server restarted), the step reads the journal again after a
        pause and goes on from there, as a worker taking it over would: turns
        answered stay answered, and a tool call whose result could not be
        journaled runs again with the same idempotency key. An entry that
        cannot be read (damaged, or written by a newer Tidemill) fails the
        step at once, naming the thread and the entry; the journal is left
        as it is.
        """
        for failures in range(_JOURNAL_ATTEMPTS):
            try:
                return await self._continue(checkpointer, first=failures == 0)
            except SerializationError as exc:
                if "seq" in exc.context:  # an entry that cannot be read: reading again won't help
                    return self.failed(step_error(exc), retryable=False)
                if failures + 1 == _JOURNAL_ATTEMPTS:
                    return self.failed(step_error(exc), retryable=True)
                log.warning("%s: the journal failed (%s); reading it again", self.thread, exc)
                await asyncio.sleep(0.2 * 2**failures)
        raise AssertionError("unreachable")  # pragma: no cover

    async def _continue(
        self, checkpointer: Checkpointer, *, first: bool
    ) -> Outcome | AgentPause | ChildWait:
        """`drive`, once; the usage of turns a dead worker left unstored is added on the first."""
        for attempt in range(_BUSY_ATTEMPTS):
            journal = await Journal.read(checkpointer, self.thread)
            state = journal.state
            if first and attempt == 0 and state.status != "new":
                await self._recover_usage(journal)
            if state.status == "finished":
                return self.succeeded(state.output)
            if state.status == "failed" and not await self._failure_recorded(state.run_id):
                return self.replay(journal)
            call: Callable[[], Coroutine[Any, Any, AgentResponse]]
            if state.status in ("new", "failed"):
                prompt = await self._start()
                if isinstance(prompt, Outcome):
                    return prompt
                started = time.time()
                call = partial(self.runtime.arun, prompt, thread_id=self.thread, **self.settings)
            else:
                started = journal.started_at() or time.time()
                decisions = None
                rows = await self.env.store.transact(lambda tx: tx.job_approvals(self.env.job.id))
                unsafe = unsafe_in_flight(state, self.agent)
                if unsafe:
                    settled = await self._reconcile(checkpointer, journal, unsafe, rows)
                    if isinstance(settled, AgentPause):
                        return settled
                    if settled is None and attempt + 1 < _BUSY_ATTEMPTS:
                        await asyncio.sleep(0.2 * (attempt + 1))
                        continue  # another process wrote meanwhile: read again
                    if settled is None:
                        busy = {"type": "ThreadBusy", "message": "the journal kept changing"}
                        return self.failed(busy, retryable=True)
                    journal, state = settled, settled.state
                if state.status == "paused":
                    decisions = decisions_for(rows, state)
                    if not decisions:
                        return self.pause(journal)
                call = partial(
                    self.runtime.aresume,
                    self.thread,
                    decisions,
                    retry_in_flight=True,
                    **self.settings,
                )
            try:
                return await self._bounded(checkpointer, call, started)
            except ThreadBusy as exc:
                if attempt + 1 == _BUSY_ATTEMPTS:
                    return self.failed(step_error(exc), retryable=True)
                await asyncio.sleep(0.2 * (attempt + 1))
        raise AssertionError("unreachable")  # pragma: no cover

    async def _reconcile(
        self,
        checkpointer: Checkpointer,
        journal: Journal,
        unsafe: list[ToolCall],
        rows: list[ApprovalRow],
    ) -> Journal | AgentPause | None:
        """Settle calls of non-idempotent tools a dead worker left unfinished.

        Without an answer for each, the step waits for a person to say whether
        it took effect. With them, the calls that happened are journaled as
        finished with the confirmed result (the others then run again); the
        journal is returned, or None when another process wrote to it first.
        """
        state = journal.state
        answers = reconcile_answers(rows, state)
        unanswered = [call for call in unsafe if call.id not in answers]
        if unanswered:
            return reconcile_pause(
                state, self.agent, unanswered,
                usage=tuple(self.metered.records), logs=tuple(self.site.logs),
            )  # fmt: skip
        events = confirmed_results(unsafe, answers)
        if not events:
            return journal
        try:
            await checkpointer.append(self.thread, events, after=state.seq)
        except JournalConflict:
            return None
        return await Journal.read(checkpointer, self.thread)

    async def _recover_usage(self, journal: Journal) -> None:
        """Add records for the journal's answered turns that a dead worker did not store."""
        env, step_id = self.env, self.step.id

        def read(tx: Tx) -> list[dict[str, Any]]:
            rows = tx.usage(env.run.root_id)
            return [r for r in rows if r["run_id"] == env.run.id and r["step_id"] == step_id]

        rows = await env.store.transact(read)
        lost = lost_usage(journal.records, rows, self.metered.inner, self.agent.metadata)
        self.metered.records[:0] = lost

    async def _failure_recorded(self, agent_run: str | None) -> bool:
        """Whether an earlier job of this step already recorded the journal's failure."""
        env, step_id = self.env, self.step.id
        jobs = await env.store.transact(lambda tx: tx.run_jobs(env.run.id))
        return any(
            job.step_id == step_id
            and job.id != env.job.id
            and (job.error or {}).get("agent_run") == agent_run
            for job in jobs
        )

    async def _bounded(  # noqa: C901 - one branch per way an agent run ends
        self,
        checkpointer: Checkpointer,
        call: Callable[[], Coroutine[Any, Any, AgentResponse]],
        started: float,
    ) -> Outcome | AgentPause | ChildWait:
        """Run the agent within `max_duration` (from `started`) and the step's `timeout`."""
        limit = self.max_duration
        deadline = None if limit is None else started + limit
        budgets = [] if self.step.timeout is None else [self.step.timeout]
        if deadline is not None:
            budgets.append(deadline - time.time())
            if deadline <= time.time():
                return await self._out_of_time(checkpointer, limit)
        timeout = asyncio.timeout(min(budgets) if budgets else None)
        try:
            async with timeout:
                response = await call()
        except AgentInterrupt:
            return self.pause(await Journal.read(checkpointer, self.thread))
        except AgentSuspended as exc:
            return self.wait_for_children(exc)
        except BudgetReached as exc:
            return budget_pause(
                exc.state, self.agent, exc.bound, exc.limit, exc.used,
                usage=tuple(self.metered.records), logs=tuple(self.site.logs),
            )  # fmt: skip
        except LimitExceeded as exc:
            partial_run = exc.response
            run_id = None if partial_run is None else partial_run.metadata.get("run_id")
            return self.crossed(
                exc.limit, exc.value, run_id if isinstance(run_id, str) else None,
                partial_run.messages if partial_run is not None else [],
            )  # fmt: skip
        except (ToolRetriesExceeded, OutputValidationError) as exc:
            return self.ended(exc, exc.response)
        except GuardrailViolation as exc:
            return self.ended(exc, getattr(exc, "response", None))
        except TimeoutError as exc:
            if not timeout.expired():
                return self.failed(step_error(exc), retryable=True)
            if deadline is not None and time.time() >= deadline - 0.001:
                return await self._out_of_time(checkpointer, limit)
            return self.failed(
                {"type": "Timeout", "message": f"the step ran longer than {self.step.timeout} s"},
                retryable=True,
            )
        except (ThreadBusy, LeaseLost):
            raise  # LeaseLost: nothing is recorded, the job's holder goes on
        except ProviderError as exc:
            return self.failed(step_error(exc), retryable=provider_retryable(exc))
        except SerializationError:
            raise  # the journal's database failed: `drive` reads it again
        except TidemillError as exc:
            return self.failed(step_error(exc), retryable=False)
        except Exception as exc:
            return self.failed(step_error(exc), retryable=True)
        return self.succeeded(response.output)

    async def _out_of_time(
        self, checkpointer: Checkpointer, limit: float | None
    ) -> Outcome | AgentPause:
        """At `max_duration`: ask for more time (`on_exceeded: ask`), or end the run and fail."""
        journal = await Journal.read(checkpointer, self.thread)
        state = journal.state
        if state.status == "finished":
            return self.succeeded(state.output)
        if self.agent.limits.on_exceeded == "ask" and state.status != "failed" and limit:
            started = journal.started_at() or time.time()
            return budget_pause(
                state, self.agent, "max_duration", limit, round(time.time() - started, 1),
                usage=tuple(self.metered.records), logs=tuple(self.site.logs),
            )  # fmt: skip
        if state.status != "failed":
            event = RunFailed(
                reason="limit", limit="max_duration", message=f"max_duration limit of {limit}"
            )
            # A conflict: a worker that outlived its lease wrote meanwhile; the bound stands.
            with contextlib.suppress(JournalConflict):
                await checkpointer.append(self.thread, [event], after=state.seq)
        return self.crossed("max_duration", limit, state.run_id, state.messages)
