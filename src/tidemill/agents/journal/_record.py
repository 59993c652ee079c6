"""`JournalRecord`: an event as a checkpointer stores it."""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple

from tidemill.agents.journal._events import JournalEvent

__all__ = ["JournalRecord"]


class JournalRecord(NamedTuple):
    """A stored event: its position in the thread and when it was written."""

    seq: int
    """1 for a thread's first event, then 2, 3, ... with no gaps.

    A compacted thread starts at its snapshot's seq instead: seqs are never renumbered.
    """
    event: JournalEvent
    """The event itself."""
    created_at: datetime
    """When the checkpointer stored the event."""
