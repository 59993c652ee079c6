"""Errors of storage: data, journals and the store (`tidemill.store`).

Data could not be encoded, decoded or stored; a journal append lost a race
with another writer; or the store could not be opened, migrated or reached.
"""

from __future__ import annotations

from tidemill.errors._base import TidemillError

__all__ = ["JournalConflict", "SchemaVersionError", "SerializationError", "StoreError"]


class SerializationError(TidemillError):
    """Data could not be turned into JSON, read back, or written to a store."""


class JournalConflict(SerializationError):
    """An append to a thread's journal lost a race with another writer.

    The journal is append-only and every append names the sequence number it
    expects to follow. When another writer got there first, nothing of this
    append is stored.

    Attributes:
        thread_id: The thread whose journal moved on.
        expected_seq: The sequence number this writer expected to be last.
    """

    def __init__(self, thread_id: str, expected_seq: int) -> None:
        super().__init__(
            f"Thread {thread_id!r} changed while appending after entry {expected_seq}.",
            hint="Another writer appended first. Re-read the thread and try again.",
            context={"thread_id": thread_id, "expected_seq": expected_seq},
        )
        self.thread_id = thread_id
        self.expected_seq = expected_seq


class StoreError(TidemillError):
    """The store could not be opened, migrated or reached."""


class SchemaVersionError(StoreError):
    """The database's schema is not the one this version of Tidemill uses."""
