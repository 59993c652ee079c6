"""The `Checkpointer` protocol: where thread journals are kept."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import timedelta
from typing import Protocol, runtime_checkable

import pydantic
import pydantic_core

from tidemill.agents.journal import JOURNAL_EVENT, SCHEMA_VERSION, JournalEvent, JournalRecord
from tidemill.errors import SerializationError

__all__ = ["Checkpointer", "decode_event", "encode_event"]


@runtime_checkable
class Checkpointer(Protocol):
    """Stores thread journals: append-only lists of events, one per thread.

    Implementations must be safe to share between the tasks of one event
    loop, between threads, and (for durable backends) between processes.
    Run `tidemill.agents.checkpoint.conformance` against a new backend.
    """

    async def append(self, thread_id: str, events: Sequence[JournalEvent], *, after: int) -> int:
        """Append `events` to the thread, all or nothing, and return the new last seq.

        Args:
            thread_id: The thread; it is created by its first append.
            events: The events, in order. Their seqs are `after + 1`, `after + 2`, ...
            after: The seq the caller believes is last (0 for a new thread).

        Raises:
            JournalConflict: When the thread's last seq is not `after`; nothing is stored.
            SerializationError: When an event cannot be encoded or the write fails.
        """
        ...

    async def read(self, thread_id: str, *, after: int = 0) -> list[JournalRecord]:
        """Return the thread's records with seq greater than `after`, in order.

        An unknown thread reads as empty.
        """
        ...

    async def threads(self) -> list[str]:
        """Return every thread id with at least one record, sorted."""
        ...

    async def delete(self, thread_id: str) -> bool:
        """Remove a thread's whole journal; return whether it existed."""
        ...

    async def prune(self, *, older_than: timedelta) -> int:
        """Remove threads whose newest record is older than `older_than`; return how many."""
        ...

    async def aclose(self) -> None:
        """Release connections. The checkpointer may not be used afterwards."""
        ...


def encode_event(event: JournalEvent) -> bytes:
    """Serialise one event as JSON.

    Raises:
        SerializationError: When the event holds something JSON cannot carry.
    """
    try:
        # The event's own serializer: a third of the cost of going through the union.
        return event.__pydantic_serializer__.to_json(event)
    except (pydantic_core.PydanticSerializationError, ValueError, TypeError) as exc:
        raise SerializationError(
            f"A {event.kind!r} event cannot be stored as JSON: {exc}",
            hint="Keep tool arguments and outputs to JSON values: str, numbers, lists, dicts.",
        ) from exc


def decode_event(payload: str | bytes, *, thread_id: str, seq: int) -> JournalEvent:
    """Read one event back from JSON text.

    Raises:
        SerializationError: When the text is not a known event, or was written
            by a newer version of the journal format.
    """
    try:
        event = JOURNAL_EVENT.validate_json(payload)
    except pydantic.ValidationError as exc:
        version = _version_of(payload)
        if version is not None and version > SCHEMA_VERSION:
            raise _newer(version, thread_id=thread_id, seq=seq) from exc
        raise SerializationError(
            f"Entry {seq} of thread {thread_id!r} is not a valid journal event: "
            f"{exc.error_count()} problem(s), first: {exc.errors()[0]['msg']}",
            hint="The journal was written by something other than Tidemill, or damaged.",
            context={"thread_id": thread_id, "seq": seq},
        ) from exc
    if event.schema_version > SCHEMA_VERSION:
        # A newer format may mean something else by fields that happen to validate.
        raise _newer(event.schema_version, thread_id=thread_id, seq=seq)
    return event


def _newer(version: int, *, thread_id: str, seq: int) -> SerializationError:
    return SerializationError(
        f"Entry {seq} of thread {thread_id!r} uses journal format {version}; "
        f"this version of Tidemill reads up to {SCHEMA_VERSION}.",
        hint="Upgrade tidemill in this process.",
        context={"thread_id": thread_id, "seq": seq},
    )


def _version_of(payload: str | bytes) -> int | None:
    try:
        data = json.loads(payload)
    except ValueError:
        return None
    version = data.get("schema_version") if isinstance(data, dict) else None
    return version if isinstance(version, int) else None
