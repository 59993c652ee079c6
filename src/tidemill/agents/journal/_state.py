"""`ThreadState`: a thread as the fold of its journal's events."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, assert_never

from pydantic import JsonValue

from tidemill.agents.journal._events import (
    ApprovalDecided,
    JournalEvent,
    RecalledUnit,
    ThreadSnapshot,
    ThreadStatus,
    UserInput,
)
from tidemill.types import (
    AgentResponse,
    AgentStep,
    ApprovalRecord,
    Message,
    ModelResponse,
    ToolCall,
    ToolResult,
    Usage,
)
from tidemill.types._build import validator

__all__ = ["ThreadState"]

_REJECTED = "The user rejected this call."

# What the fold builds for every turn (see `tidemill.types._build`).
_new_step = validator(AgentStep)
_new_usage = validator(Usage)


class _Tally:
    """A run's usage, summed as events arrive: O(1) per event, read as a `Usage`."""

    __slots__ = ("cost", "counts", "total")

    def __init__(self) -> None:
        self.counts = [0, 0, 0, 0, 0, 0, 0]
        self.cost = 0.0
        self.total: Usage | None = None
        """The sum as a `Usage`, once read, until the next `add`."""

    def add(self, usage: Usage) -> None:
        self.total = None
        counts = self.counts
        counts[0] += usage.requests
        counts[1] += usage.input_tokens
        counts[2] += usage.output_tokens
        counts[3] += usage.cache_read_tokens
        counts[4] += usage.cache_write_tokens
        counts[5] += usage.reasoning_tokens
        counts[6] += usage.unpriced_requests
        self.cost += usage.cost_usd

    def usage(self) -> Usage:
        if self.total is not None:  # a run's end reads it twice: its span, its response
            return self.total
        requests, inputs, outputs, cache_read, cache_write, reasoning, unpriced = self.counts
        self.total = _new_usage(
            {
                "requests": requests,
                "input_tokens": inputs,
                "output_tokens": outputs,
                "cache_read_tokens": cache_read,
                "cache_write_tokens": cache_write,
                "reasoning_tokens": reasoning,
                "cost_usd": self.cost,
                "unpriced_requests": unpriced,
            }
        )
        return self.total


@dataclass
class ThreadState:
    """A thread, as the fold of its journal.

    Examples:
        >>> state = ThreadState("t1")
        >>> state.apply(1, UserInput(messages=(Message.user("Hi"),), run_id="r1"))
        >>> state.status, state.seq, state.messages[0].content
        ('running', 1, 'Hi')
    """

    thread_id: str
    """The thread whose journal this is."""
    seq: int = 0
    """The last applied entry; the next append goes after it."""
    status: ThreadStatus = "new"
    """Where the thread stands; see `ThreadStatus`."""
    messages: list[Message] = field(default_factory=list)
    """The whole conversation, every run of the thread."""
    run_id: str | None = None
    """The current or last run."""
    steps: list[AgentStep] = field(default_factory=list)
    """The current or last run's steps."""
    run_start: int = 0
    """Index in `messages` where the current run's input begins."""
    last_user: int = 0
    """Index in `messages` of the latest user message (a prompt or feedback)."""
    iterations: int = 0
    """Model turns in the current run, corrections included."""
    tool_calls: int = 0
    """Tool calls started in the current run (a re-run after a crash not counted again)."""
    output_retries: int = 0
    """Final answers of the current run rejected by the output schema."""
    _spent: _Tally = field(default_factory=lambda: _Tally(), repr=False)
    corrections: int = 0
    """Turns of the current run with a failed tool call, plus parse corrections."""
    open_calls: dict[str, ToolCall] = field(default_factory=dict)
    """Calls of the last turn without a result yet, in the order the model made them."""
    pending: dict[str, ToolCall] = field(default_factory=dict)
    """Open calls that wait for a decision."""
    approved: dict[str, ToolCall] = field(default_factory=dict)
    """Open calls that were approved: as they must run, edits applied."""
    attempts: dict[str, int] = field(default_factory=dict)
    """Open calls that were started, and how many times."""
    summary: str | None = None
    """The latest summary of older messages, when a summarising memory wrote one."""
    summary_upto: int = 0
    """`messages[:summary_upto]` are covered by `summary`."""
    recalled: tuple[RecalledUnit, ...] = ()
    """Earlier messages recalled by meaning for the current run (`MemoryRecalled`), oldest first."""
    output: JsonValue = None
    """The current or last run's answer once it finished, as journaled (JSON)."""
    error: str | None = None
    """The current or last run's `RunFailed.message`, once it failed."""
    last_error: str | None = None
    """The last failed tool call's message, for `ToolRetriesExceeded`."""
    _step_of: dict[str, AgentStep] = field(default_factory=dict, repr=False)
    _failed_steps: set[int] = field(default_factory=set, repr=False)

    def apply(self, seq: int, event: JournalEvent) -> None:  # noqa: C901 - a branch per kind
        """Fold one event into the state."""
        # Dispatch on the tag, most frequent first: cheaper than isinstance on models.
        self.seq = seq
        if event.kind == "tool_finished":
            self._result(event.result, failed=event.result.is_error)
            if event.usage is not None:
                self._spent.add(event.usage)
            self.tool_calls += event.tool_calls
        elif event.kind == "model_response":
            self._model_turn(event.response, event.started)
        elif event.kind == "tool_started":
            self.attempts[event.call.id] = event.attempt
            if event.attempt == 1:
                self.tool_calls += 1
        elif event.kind == "user_message":
            self._start(event)
        elif event.kind == "correction":
            self.iterations += 1
            self.corrections += 1
            self.last_error = event.error
            self.last_user = len(self.messages)
            self.messages.append(Message.user(event.feedback))
            self.steps.append(AgentStep(index=len(self.steps), note=f"[recovered] {event.error}"))
        elif event.kind == "output_rejected":
            self.output_retries += 1
            self.last_error = "; ".join(event.errors)
            self.last_user = len(self.messages)
            self.messages.append(Message.user(event.feedback))
        elif event.kind == "memory_summarized":
            self.summary, self.summary_upto = event.summary, event.upto
            self.steps.append(
                AgentStep(
                    index=len(self.steps),
                    note=f"[memory] summarised {event.upto} message(s)",
                    usage=event.usage,
                )
            )
            self._spent.add(event.usage)
        elif event.kind == "memory_recalled":
            self.recalled = event.units
            self._spent.add(event.usage)
        elif event.kind == "approval_requested":
            self.status = "paused"
            for call in event.calls:
                self.pending[call.id] = call
        elif event.kind == "approval_decided":
            self._decided(event)
        elif event.kind == "finished":
            self.status, self.output = "finished", event.output
        elif event.kind == "failed":
            self.status, self.error = "failed", event.message
        elif event.kind == "graph_checkpoint" or event.kind == "graph_writes":
            pass  # LangGraph's own state, read by the graph runtime's saver
        elif event.kind == "snapshot":
            self._restore(event)
        else:
            assert_never(event)

    @property
    def usage(self) -> Usage:
        """The current or last run's usage, across resumes, what its tools spent included."""
        return self._spent.usage()

    def response(self, *, latency_ms: float = 0.0) -> AgentResponse:
        """The current or last run, as an `AgentResponse`."""
        return AgentResponse(
            schema_version=1,
            output=self.output,
            messages=list(self.messages),
            steps=list(self.steps),
            usage=self.usage,
            thread_id=self.thread_id,
            latency_ms=latency_ms,
            metadata={"run_id": self.run_id},
        )

    def snapshot(self, **extra: object) -> ThreadSnapshot:
        """The state as a `ThreadSnapshot` event: folding it gives this state back.

        Examples:
            >>> state = ThreadState("t1")
            >>> state.apply(1, UserInput(messages=(Message.user("Hi"),), run_id="r1"))
            >>> again = ThreadState("t1")
            >>> again.apply(1, state.snapshot())
            >>> again.messages == state.messages, again.status
            (True, 'running')
        """
        step_index = {id(step): step.index for step in self.steps}
        return ThreadSnapshot.model_validate(
            {
                "status": self.status,
                "messages": tuple(self.messages),
                "run_id": self.run_id,
                "steps": tuple(self.steps),
                "run_start": self.run_start,
                "last_user": self.last_user,
                "iterations": self.iterations,
                "tool_calls": self.tool_calls,
                "output_retries": self.output_retries,
                "corrections": self.corrections,
                "usage": self.usage,
                "open_calls": tuple(self.open_calls.values()),
                "pending": tuple(self.pending.values()),
                "approved": tuple(self.approved.values()),
                "attempts": dict(self.attempts),
                "summary": self.summary,
                "summary_upto": self.summary_upto,
                "recalled": self.recalled,
                "output": self.output,
                "error": self.error,
                "last_error": self.last_error,
                "step_of": {
                    call_id: step_index[id(step)]
                    for call_id, step in self._step_of.items()
                    if id(step) in step_index
                },
                "failed_steps": tuple(sorted(self._failed_steps)),
                "records": self.seq,
                **extra,
            }
        )

    def _restore(self, event: ThreadSnapshot) -> None:
        # Copies: the fold mutates its steps, and an event must never change.
        self.status, self.run_id = event.status, event.run_id
        self.messages = list(event.messages)
        self.steps = [step.model_copy(deep=True) for step in event.steps]
        self.run_start, self.last_user = event.run_start, event.last_user
        self.iterations, self.tool_calls = event.iterations, event.tool_calls
        self.output_retries, self.corrections = event.output_retries, event.corrections
        self._spent = _Tally()
        self._spent.add(event.usage)
        self.open_calls = {call.id: call for call in event.open_calls}
        self.pending = {call.id: call for call in event.pending}
        self.approved = {call.id: call for call in event.approved}
        self.attempts = dict(event.attempts)
        self.summary, self.summary_upto = event.summary, event.summary_upto
        self.recalled = event.recalled
        self.output, self.error, self.last_error = event.output, event.error, event.last_error
        self._step_of = {
            call_id: self.steps[index]
            for call_id, index in event.step_of.items()
            if 0 <= index < len(self.steps)
        }
        self._failed_steps = set(event.failed_steps)

    def _start(self, event: UserInput) -> None:
        self.status, self.run_id = "running", event.run_id
        self.run_start = len(self.messages)
        self.messages.extend(event.messages)
        users = [i for i, m in enumerate(event.messages) if m.role == "user"]
        self.last_user = self.run_start + users[-1] if users else self.run_start
        self.steps, self._spent = [], _Tally()
        self.iterations = self.corrections = self.tool_calls = self.output_retries = 0
        self.output = self.error = self.last_error = None
        self.recalled = ()
        self._step_of.clear()
        self._failed_steps.clear()

    def _model_turn(self, response: ModelResponse, started: tuple[str, ...]) -> None:
        # Fields read into locals once: a pydantic field read costs several plain ones.
        message, usage = response.message, response.usage
        calls = message.tool_calls
        step = _new_step(
            {
                "index": len(self.steps),
                "thought": message.content,
                "tool_calls": list(calls),
                "usage": usage,
                "model": response.model,
            }
        )
        self.steps.append(step)
        self.messages.append(message)
        self._spent.add(usage)
        self.iterations += 1
        self.open_calls = open_calls = {}
        self.pending, self.approved, self.attempts = {}, {}, {}
        step_of = self._step_of
        for call in calls:
            call_id = call.id
            open_calls[call_id] = call
            step_of[call_id] = step
        for call_id in started:
            if call_id in open_calls:  # a start names one of the turn's own calls
                self.attempts[call_id] = 1
                self.tool_calls += 1

    def _result(self, result: ToolResult, *, failed: bool) -> None:
        call_id = result.call_id
        if self.open_calls.pop(call_id, None) is None:
            return  # a duplicate or stray result; the first one stands
        self.approved.pop(call_id, None)
        self.attempts.pop(call_id, None)
        self.messages.append(Message.tool(result))
        step = self._step_of.get(call_id)
        if step is not None:
            step.tool_results.append(result)
            if failed and step.index not in self._failed_steps:
                self._failed_steps.add(step.index)
                self.corrections += 1
        if failed:
            self.last_error = result.content
        if not self.pending and self.status == "paused":
            self.status = "running"

    def _decided(self, event: ApprovalDecided) -> None:
        call = self.pending.pop(event.call_id, None)
        if call is None:
            return
        decision = event.decision
        edited = decision.arguments is not None and decision.arguments != call.arguments
        outcome: Literal["approved", "edited", "rejected"] = (
            "rejected" if decision.action == "reject" else "edited" if edited else "approved"
        )
        step = self._step_of.get(call.id)
        if step is not None:
            step.approvals.append(
                ApprovalRecord(
                    call_id=call.id,
                    tool=call.name,
                    outcome=outcome,
                    arguments=call.arguments,
                    edited_arguments=decision.arguments if edited else None,
                    feedback=decision.feedback,
                    actor=decision.actor,
                    decided_at=event.decided_at,
                )
            )
        if not self.pending:
            self.status = "running"
        if decision.action == "approve":
            runs_as = call.model_copy(update={"arguments": decision.arguments}) if edited else call
            self.approved[call.id] = runs_as
            return
        text = _REJECTED + (f" Feedback: {decision.feedback}" if decision.feedback else "")
        self._result(
            ToolResult(call_id=call.id, name=call.name, content=text, is_error=True), failed=False
        )
