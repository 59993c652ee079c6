"""Memory: which part of a thread each model call sees.

The journal always keeps the whole thread. `BufferMemory` (the default) sends
all of it, `WindowMemory` the recent messages, `NoMemory` only the current run,
and `SummaryMemory` recent turns plus a model-written summary of older ones,
kept in the journal.
"""

from tidemill.agents.memory._base import Memory, MemoryView, start_of_turn
from tidemill.agents.memory._resolve import resolve_memory
from tidemill.agents.memory._strategies import BufferMemory, NoMemory, WindowMemory
from tidemill.agents.memory._summary import SummaryMemory

__all__ = [
    "BufferMemory",
    "Memory",
    "MemoryView",
    "NoMemory",
    "SummaryMemory",
    "WindowMemory",
    "resolve_memory",
    "start_of_turn",
]
