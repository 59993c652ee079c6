"""Checkpointers: where agent threads' journals are kept.

`MemoryCheckpointer` (the default), `SQLiteCheckpointer` (a file, shared by
threads and processes) and `PostgresCheckpointer` (many machines, the
`postgres` extra) all implement the `Checkpointer` protocol and pass
`tidemill.agents.checkpoint.conformance`.

Each takes `max_history=`: the most records a thread keeps. A thread that
would pass it has its older records folded into one `ThreadSnapshot` record,
atomically with the append (PostgreSQL: right after it, in a transaction of
its own). Seqs never change and are never reused: the snapshot takes the seq
of the last record it covers, so the journal then reads `u, u + 1, ..., last`
and its last seq stays what appenders expect (a stale `after` is still a
`JournalConflict`). `fork_thread` starts a new thread from any stored record.
"""

from tidemill.agents.checkpoint._base import Checkpointer, decode_event, encode_event
from tidemill.agents.checkpoint._compact import MIN_HISTORY
from tidemill.agents.checkpoint._fork import HistoryUnavailable, fork_thread
from tidemill.agents.checkpoint._memory import MemoryCheckpointer
from tidemill.agents.checkpoint._postgres import PostgresCheckpointer
from tidemill.agents.checkpoint._resolve import resolve_checkpointer
from tidemill.agents.checkpoint._sqlite import SQLiteCheckpointer

__all__ = [
    "MIN_HISTORY",
    "Checkpointer",
    "HistoryUnavailable",
    "MemoryCheckpointer",
    "PostgresCheckpointer",
    "SQLiteCheckpointer",
    "decode_event",
    "encode_event",
    "fork_thread",
    "resolve_checkpointer",
]
