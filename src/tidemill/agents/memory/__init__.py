"""Memory: which part of a thread each model call sees.

The journal always keeps the whole thread. `BufferMemory` (the default) sends
all of it, `WindowMemory` the recent messages, `NoMemory` only the current run,
`SummaryMemory` recent turns plus a model-written summary of older ones,
kept in the journal, `VectorMemory` the current run plus the earlier
messages closest in meaning to the request (embedded once, kept in a
`VectorStore` beside the checkpointer's journals), and `CompositeMemory` a
window, a summary and recall together.

Who owns what: `_base` (the protocol), `_strategies` (buffer, window, off),
`_summary`, `_vector` and `_composite` (one memory each), `_transcript`
(messages as text and recall units), `_vector_store` (the store protocol,
similarity, the in-memory store), `_vector_sqlite` and `_vector_postgres`
(the durable stores), `_store_for` (the store beside a checkpointer),
`_resolve` (names to memories).
"""

from tidemill.agents.memory._base import Memory, MemoryView, memory_events, start_of_turn
from tidemill.agents.memory._composite import CompositeMemory
from tidemill.agents.memory._resolve import resolve_memory
from tidemill.agents.memory._store_for import store_for
from tidemill.agents.memory._strategies import BufferMemory, NoMemory, WindowMemory
from tidemill.agents.memory._summary import SummaryMemory
from tidemill.agents.memory._vector import VectorMemory
from tidemill.agents.memory._vector_postgres import PostgresVectorStore
from tidemill.agents.memory._vector_sqlite import SQLiteVectorStore
from tidemill.agents.memory._vector_store import InMemoryVectorStore, Match, StoredUnit, VectorStore

__all__ = [
    "BufferMemory",
    "CompositeMemory",
    "InMemoryVectorStore",
    "Match",
    "Memory",
    "MemoryView",
    "NoMemory",
    "PostgresVectorStore",
    "SQLiteVectorStore",
    "StoredUnit",
    "SummaryMemory",
    "VectorMemory",
    "VectorStore",
    "WindowMemory",
    "memory_events",
    "resolve_memory",
    "start_of_turn",
    "store_for",
]
