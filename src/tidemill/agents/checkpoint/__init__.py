"""Checkpointers: where agent threads' journals are kept.

`MemoryCheckpointer` (the default), `SQLiteCheckpointer` (a file, shared by
threads and processes) and `PostgresCheckpointer` (many machines, the
`postgres` extra) all implement the `Checkpointer` protocol and pass
`tidemill.agents.checkpoint.conformance`.
"""

from tidemill.agents.checkpoint._base import Checkpointer, decode_event, encode_event
from tidemill.agents.checkpoint._memory import MemoryCheckpointer
from tidemill.agents.checkpoint._postgres import PostgresCheckpointer
from tidemill.agents.checkpoint._resolve import resolve_checkpointer
from tidemill.agents.checkpoint._sqlite import SQLiteCheckpointer

__all__ = [
    "Checkpointer",
    "MemoryCheckpointer",
    "PostgresCheckpointer",
    "SQLiteCheckpointer",
    "decode_event",
    "encode_event",
    "resolve_checkpointer",
]
