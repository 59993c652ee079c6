"""The `Memory` protocol: which part of a thread the model sees."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple, Protocol, runtime_checkable

from pydantic import JsonValue

from tidemill.agents.journal import MemoryRecalled, MemorySummarized, ThreadState
from tidemill.errors import ConfigurationError
from tidemill.llm import Model
from tidemill.types import Message
from tidemill.types._messages import USER

__all__ = ["Memory", "MemoryView", "memory_events", "start_of_turn"]


class MemoryView(NamedTuple):
    """What a model call is given of the thread.

    A named tuple, not a frozen dataclass: one is made for every model call,
    and a frozen dataclass sets each field through `object.__setattr__`.
    """

    messages: Sequence[Message]
    """The conversation to send, after the system prompt."""
    context: str | None = None
    """Text to add to the system prompt, such as a summary of older turns."""


@runtime_checkable
class Memory(Protocol):
    """Chooses the part of a thread each model call sees.

    The journal always keeps the whole thread; memory only decides what is
    sent. `view` runs before every model call, so it must be cheap; `compact`
    runs once when a run starts and returns what to journal: a summary of
    older turns (`MemorySummarized`), the earlier messages recalled for the
    run (`MemoryRecalled`), a sequence of such events, or None. The runtime
    appends them in one write and folds them into the `ThreadState` that
    `view` reads, so a run resumed by another process sees what this one chose.
    """

    def view(self, state: ThreadState) -> MemoryView:
        """The messages (and extra context) for the next model call."""
        ...

    async def compact(
        self, state: ThreadState, model: Model
    ) -> MemorySummarized | MemoryRecalled | Sequence[MemorySummarized | MemoryRecalled] | None:
        """What to journal when a run starts, in order; None when there is nothing to do."""
        ...

    def describe(self) -> dict[str, JsonValue]:
        """A JSON-safe description."""
        ...


def memory_events(compacted: object) -> tuple[MemorySummarized | MemoryRecalled, ...]:
    """What `Memory.compact` returned, as the events to append, in order.

    Raises:
        ConfigurationError: When it returned something other than memory events or None.

    Examples:
        >>> memory_events(None), memory_events(MemorySummarized(summary="s", upto=2))[0].upto
        ((), 2)
    """
    if compacted is None:
        return ()
    if isinstance(compacted, MemorySummarized | MemoryRecalled):
        return (compacted,)
    if isinstance(compacted, Sequence) and not isinstance(compacted, str):
        events = tuple(compacted)
        if all(isinstance(e, MemorySummarized | MemoryRecalled) for e in events):
            return events
    raise ConfigurationError(
        f"A memory's compact() returned {type(compacted).__name__}, not memory events.",
        hint="Return a MemorySummarized, a MemoryRecalled, a sequence of them, or None.",
    )


def start_of_turn(messages: Sequence[Message], index: int, floor: int = 0) -> int:
    """The first user turn at or after `index`; else the last one before it, down to `floor`.

    A view that starts on a user's message never opens with a tool result cut
    off from its call, nor with an assistant message (which some providers refuse).
    """
    for position in range(max(index, floor), len(messages)):
        if messages[position].role == USER:
            return position
    for position in range(min(index, len(messages)) - 1, floor - 1, -1):
        if messages[position].role == USER:
            return position
    return floor
