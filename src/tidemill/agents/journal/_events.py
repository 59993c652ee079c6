"""The journal's events: one model per thing that happens to a thread, and their union."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, TypeAdapter

from tidemill.types import (
    AgentStep,
    Decision,
    Message,
    ModelResponse,
    ToolCall,
    ToolResult,
    Usage,
)

__all__ = [
    "JOURNAL_EVENT",
    "SCHEMA_VERSION",
    "ApprovalDecided",
    "ApprovalRequested",
    "Correction",
    "GraphCheckpoint",
    "GraphWrite",
    "GraphWrites",
    "JournalEvent",
    "MemoryRecalled",
    "MemorySummarized",
    "ModelTurn",
    "OutputRejected",
    "RecalledUnit",
    "RunFailed",
    "RunFinished",
    "ThreadSnapshot",
    "ThreadStatus",
    "ToolFinished",
    "ToolStarted",
    "UserInput",
]

SCHEMA_VERSION = 4
"""The journal format this version writes; it reads every format up to this one.

Format 4 adds `MemoryRecalled` records (what a vector memory recalled for a
run, and what embedding cost). Format 3 adds `ThreadSnapshot` records (a
compacted or forked thread's start). Format 2 records the calls a model turn
starts with the turn itself (`ModelTurn.started`); format 1 wrote a
`ToolStarted` entry for each.
"""


ThreadStatus = Literal["new", "running", "paused", "finished", "failed"]
"""Where a thread stands: `running` also covers a run whose process died."""


class _Event(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: int = SCHEMA_VERSION
    """The journal format the event was written in (see `SCHEMA_VERSION`)."""


class UserInput(_Event):
    """A run began with these messages (usually one user message)."""

    kind: Literal["user_message"] = "user_message"
    """The event's tag in `JournalEvent`: always `"user_message"`."""
    messages: tuple[Message, ...]
    """The run's input, in order."""
    run_id: str
    """The id of the run these messages begin."""


class ModelTurn(_Event):
    """The model answered; its tool calls, if any, are now open.

    Calls that start running straight away (a first attempt each) are named
    in `started`: one entry records the turn and, before they run, their start.
    """

    kind: Literal["model_response"] = "model_response"
    """The event's tag in `JournalEvent`: always `"model_response"`."""
    response: ModelResponse
    """The model's answer: its message (tool calls included), usage and model."""
    started: tuple[str, ...] = ()
    """Ids of this turn's calls that start with it, as if each had a `ToolStarted` (attempt 1)."""


class Correction(_Event):
    """The provider could not parse the model's tool call; the model is told why."""

    kind: Literal["correction"] = "correction"
    """The event's tag in `JournalEvent`: always `"correction"`."""
    error: str
    """Why the tool call could not be parsed."""
    feedback: str
    """What the model is told, as a user message."""


class ToolStarted(_Event):
    """A tool call is about to run. Journaled before the call, never after.

    A call that starts with its turn is recorded in `ModelTurn.started`
    instead; this event marks the others: a call run after its approval, a
    later attempt, a call of a serial batch after the first.
    """

    kind: Literal["tool_started"] = "tool_started"
    """The event's tag in `JournalEvent`: always `"tool_started"`."""
    call: ToolCall
    """The call as it runs: with the approver's arguments when they were edited."""
    attempt: int = 1
    """Which execution of the call this is: 1, then 2, ... when a run re-runs it."""


class ToolFinished(_Event):
    """A tool call produced its result (possibly an error the model will see)."""

    kind: Literal["tool_finished"] = "tool_finished"
    """The event's tag in `JournalEvent`: always `"tool_finished"`."""
    result: ToolResult
    """The result the model sees: an error result when the call failed or was refused."""
    duration_ms: float = 0.0
    """How long the call ran, in milliseconds, when recorded; the runtimes leave it 0."""
    usage: Usage | None = None
    """What the tool spent, when it reported it (a delegated agent, say)."""
    tool_calls: int = 0
    """Tool calls made on its behalf (a delegation's tasks); they count as the run's."""


class ApprovalRequested(_Event):
    """These calls wait for a human decision before they may run."""

    kind: Literal["approval_requested"] = "approval_requested"
    """The event's tag in `JournalEvent`: always `"approval_requested"`."""
    calls: tuple[ToolCall, ...]
    """The calls that wait, in the order the model made them."""


class ApprovalDecided(_Event):
    """A human decided one pending call."""

    kind: Literal["approval_decided"] = "approval_decided"
    """The event's tag in `JournalEvent`: always `"approval_decided"`."""
    call_id: str
    """The id of the pending call that was decided."""
    decision: Decision
    """The decision, as given: its action, edited arguments, feedback and actor."""
    decided_at: datetime
    """When the decision was recorded."""


class OutputRejected(_Event):
    """The model's final answer failed the output schema; the model is told why."""

    kind: Literal["output_rejected"] = "output_rejected"
    """The event's tag in `JournalEvent`: always `"output_rejected"`."""
    errors: tuple[str, ...]
    """What is wrong with the answer, one message per validation error."""
    feedback: str
    """What the model is told, as a user message, to answer again."""


class MemorySummarized(_Event):
    """Older messages of the thread were condensed into a summary by the model."""

    kind: Literal["memory_summarized"] = "memory_summarized"
    """The event's tag in `JournalEvent`: always `"memory_summarized"`."""
    summary: str
    """The model's summary of `messages[:upto]` (and of any earlier summary)."""
    upto: int
    """The summary covers `messages[:upto]`; later messages are sent verbatim."""
    usage: Usage = Field(default_factory=Usage)
    """What writing the summary cost."""


class RecalledUnit(BaseModel):
    """One recalled part of the thread: messages `start` to `end` (exclusive), as text."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    start: int
    """Index in `ThreadState.messages` of the unit's first message."""
    end: int
    """Index in `ThreadState.messages` just after the unit's last message."""
    text: str
    """The messages as transcript lines, as the model is shown them."""


class MemoryRecalled(_Event):
    """Earlier messages of the thread were recalled by meaning for the run that just started.

    Journaled by a vector memory (or a composite one) when the run starts, so
    every model call of the run, in this process or in one that resumes it,
    is shown the same messages, and what embedding cost counts in the run's usage.
    """

    kind: Literal["memory_recalled"] = "memory_recalled"
    """The event's tag in `JournalEvent`: always `"memory_recalled"`."""
    units: tuple[RecalledUnit, ...] = ()
    """The recalled units, oldest first; empty when nothing was close enough."""
    usage: Usage = Field(default_factory=Usage)
    """What embedding the thread's new messages and the request cost."""


class RunFinished(_Event):
    """The model answered without tool calls; the run is over."""

    kind: Literal["finished"] = "finished"
    """The event's tag in `JournalEvent`: always `"finished"`."""
    output: JsonValue
    """The answer: the model's text, or the JSON value the output schema accepted."""


class RunFailed(_Event):
    """The run stopped at a bound; the thread can take a new run."""

    kind: Literal["failed"] = "failed"
    """The event's tag in `JournalEvent`: always `"failed"`."""
    reason: Literal["limit", "tool_call_retries", "output_validation", "guardrail"]
    """What stopped the run: a limit, failed tool calls, rejected answers, or a guardrail."""
    message: str
    """What stopped it, in words: the limit crossed, or the last error."""
    limit: str | None = None
    """For a crossed limit: which one (`max_iterations`, `requests`, `tool_calls`, ...)."""


class GraphCheckpoint(_Event):
    """A LangGraph checkpoint of a thread run by the graph runtime (`tidemill.agents.graph`).

    The fold ignores it: it is LangGraph's own state, stored as JSON so a
    graph thread lives in the same journal, on the same backend, as any other.
    """

    kind: Literal["graph_checkpoint"] = "graph_checkpoint"
    """The event's tag in `JournalEvent`: always `"graph_checkpoint"`."""
    checkpoint_ns: str = ""
    """The graph's namespace: empty for the top graph, set for a subgraph."""
    checkpoint_id: str
    """LangGraph's id of the checkpoint."""
    parent_id: str | None = None
    """The checkpoint this one follows, if any."""
    checkpoint: JsonValue
    """The checkpoint; its `channel_values` hold only the channels it changed."""
    metadata: JsonValue = None
    """LangGraph's metadata of the checkpoint, encoded as JSON."""


class GraphWrite(BaseModel):
    """One pending write of a LangGraph task: a value for a channel."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    channel: str
    """The channel written to."""
    idx: int
    """The write's position in its task, or LangGraph's negative index for a special write."""
    value: JsonValue
    """The value written, encoded as JSON."""


class GraphWrites(_Event):
    """Writes a LangGraph task made after a checkpoint; the fold ignores them."""

    kind: Literal["graph_writes"] = "graph_writes"
    """The event's tag in `JournalEvent`: always `"graph_writes"`."""
    checkpoint_ns: str = ""
    """The graph's namespace: empty for the top graph, set for a subgraph."""
    checkpoint_id: str
    """The checkpoint the writes follow."""
    task_id: str
    """LangGraph's id of the task that wrote."""
    task_path: str = ""
    """LangGraph's path of the task, when it gave one."""
    writes: tuple[GraphWrite, ...]
    """The task's writes, in order."""


GraphEvent = Annotated[GraphCheckpoint | GraphWrites, Field(discriminator="kind")]
"""A LangGraph event, as a snapshot keeps it."""


class ThreadSnapshot(_Event):
    """The fold of a thread's journal up to and including this record.

    Written in place of a thread's older records when a checkpointer with
    `max_history` compacts it, and as the first record of a forked thread.
    Folding it replaces the whole state, so the records before it are not
    needed: a thread reads as this snapshot, then the records after it.
    LangGraph events of the records it replaced are kept in `graph`, since
    the graph runtime rebuilds its checkpoints from them.
    """

    kind: Literal["snapshot"] = "snapshot"
    """The event's tag in `JournalEvent`: always `"snapshot"`."""
    status: ThreadStatus
    """`ThreadState.status` at this point."""
    messages: tuple[Message, ...] = ()
    """The whole conversation so far."""
    run_id: str | None = None
    """The current or last run."""
    steps: tuple[AgentStep, ...] = ()
    """The current or last run's steps, their results and approvals included."""
    run_start: int = 0
    """See `ThreadState.run_start`."""
    last_user: int = 0
    """See `ThreadState.last_user`."""
    iterations: int = 0
    """See `ThreadState.iterations`."""
    tool_calls: int = 0
    """See `ThreadState.tool_calls`."""
    output_retries: int = 0
    """See `ThreadState.output_retries`."""
    corrections: int = 0
    """See `ThreadState.corrections`."""
    usage: Usage = Field(default_factory=Usage)
    """The current or last run's usage so far."""
    open_calls: tuple[ToolCall, ...] = ()
    """Calls of the last turn without a result, in the order the model made them."""
    pending: tuple[ToolCall, ...] = ()
    """Open calls that wait for a decision."""
    approved: tuple[ToolCall, ...] = ()
    """Open calls that were approved, as they must run."""
    attempts: dict[str, int] = Field(default_factory=dict)
    """Open calls that were started, and how many times."""
    summary: str | None = None
    """See `ThreadState.summary`."""
    summary_upto: int = 0
    """See `ThreadState.summary_upto`."""
    recalled: tuple[RecalledUnit, ...] = ()
    """See `ThreadState.recalled`."""
    output: JsonValue = None
    """See `ThreadState.output`."""
    error: str | None = None
    """See `ThreadState.error`."""
    last_error: str | None = None
    """See `ThreadState.last_error`."""
    step_of: dict[str, int] = Field(default_factory=dict)
    """The index in `steps` of the turn that made each call of the current run."""
    failed_steps: tuple[int, ...] = ()
    """Steps of the current run that had a failed tool call (counted in `corrections`)."""
    graph: tuple[GraphEvent, ...] = ()
    """The LangGraph events of the records this snapshot replaced, in order."""
    records: int = 0
    """How many records of its thread the snapshot stands for, itself included."""
    forked_from: str | None = None
    """For a fork's first record: the thread it was forked from."""
    forked_at: int | None = None
    """For a fork's first record: the seq of `forked_from` whose state it holds."""


JournalEvent = Annotated[
    UserInput
    | ModelTurn
    | Correction
    | ToolStarted
    | ToolFinished
    | ApprovalRequested
    | ApprovalDecided
    | OutputRejected
    | MemorySummarized
    | MemoryRecalled
    | RunFinished
    | RunFailed
    | GraphCheckpoint
    | GraphWrites
    | ThreadSnapshot,
    Field(discriminator="kind"),
]
"""Any journal event."""

JOURNAL_EVENT: TypeAdapter[JournalEvent] = TypeAdapter(JournalEvent)
"""Validates and serialises journal events: `JOURNAL_EVENT.validate_json(text)`."""
