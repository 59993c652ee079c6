"""The journal: a thread's append-only list of events, and the fold that reads it.

A thread's state is never stored whole. Each event records one thing that
happened (a user message, a model answer, a tool starting or finishing, an
approval asked for or decided, the run ending) and `ThreadState.apply` folds
them, in order, into the conversation, the steps and what is still open. The
runtime applies the same events as it appends them, so the state it works
from is always the state another process would rebuild from the journal.
"""

# Who owns what: `_events` holds the event models and `JournalEvent`, their
# union, as a checkpointer stores them; `_record` the stored form,
# `JournalRecord`; `_state` the fold, `ThreadState`.

from tidemill.agents.journal._events import (
    JOURNAL_EVENT,
    SCHEMA_VERSION,
    ApprovalDecided,
    ApprovalRequested,
    Correction,
    GraphCheckpoint,
    GraphWrite,
    GraphWrites,
    JournalEvent,
    MemoryRecalled,
    MemorySummarized,
    ModelTurn,
    OutputRejected,
    RecalledUnit,
    RunFailed,
    RunFinished,
    ThreadSnapshot,
    ThreadStatus,
    ToolFinished,
    ToolStarted,
    UserInput,
)
from tidemill.agents.journal._record import JournalRecord
from tidemill.agents.journal._state import ThreadState

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
    "JournalRecord",
    "MemoryRecalled",
    "MemorySummarized",
    "ModelTurn",
    "OutputRejected",
    "RecalledUnit",
    "RunFailed",
    "RunFinished",
    "ThreadSnapshot",
    "ThreadState",
    "ThreadStatus",
    "ToolFinished",
    "ToolStarted",
    "UserInput",
]
