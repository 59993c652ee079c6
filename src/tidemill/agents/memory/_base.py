"""The `Memory` protocol: which part of a thread the model sees."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple, Protocol, runtime_checkable

from pydantic import JsonValue

from tidemill.agents.journal import MemorySummarized, ThreadState
from tidemill.llm import Model
from tidemill.types import Message
from tidemill.types._messages import USER

__all__ = ["Memory", "MemoryView", "start_of_turn"]


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
    runs once when a run starts and may condense older turns into a journal
    event (a summary), which `view` then uses.
    """

    def view(self, state: ThreadState) -> MemoryView:
        """The messages (and extra context) for the next model call."""
        ...

    async def compact(self, state: ThreadState, model: Model) -> MemorySummarized | None:
        """Condense older turns when a run starts; None when there is nothing to do."""
        ...

    def describe(self) -> dict[str, JsonValue]:
        """A JSON-safe description."""
        ...


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
