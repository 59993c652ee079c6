"""The simple memories: everything, a window of recent messages, or only this run."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import JsonValue

from tidemill.agents.journal import MemorySummarized, ThreadState
from tidemill.agents.memory._base import MemoryView, start_of_turn
from tidemill.errors import ConfigurationError
from tidemill.llm import Model

__all__ = ["BufferMemory", "NoMemory", "WindowMemory"]


class _NoCompaction:
    async def compact(self, state: ThreadState, model: Model) -> MemorySummarized | None:
        """Nothing to condense."""
        return None


class BufferMemory(_NoCompaction):
    """The whole thread, every run of it: the default."""

    def view(self, state: ThreadState) -> MemoryView:
        """Every message of the thread."""
        return MemoryView(state.messages)

    def describe(self) -> dict[str, JsonValue]:
        """Describe the memory."""
        return {"kind": "buffer"}


class NoMemory(_NoCompaction):
    """Only the current run: earlier runs on the thread are not sent."""

    def view(self, state: ThreadState) -> MemoryView:
        """The current run's messages."""
        return MemoryView(state.messages[state.run_start :])

    def describe(self) -> dict[str, JsonValue]:
        """Describe the memory."""
        return {"kind": "off"}


@dataclass(frozen=True)
class WindowMemory(_NoCompaction):
    """The most recent messages, starting on a user's turn.

    A window never opens on a tool result cut off from its call: it starts at
    the first user message inside the last `size` messages, or, when a run's
    own tool loop is longer than the window, at that run's prompt.

    Examples:
        >>> from tidemill.agents.journal import ThreadState, UserInput
        >>> from tidemill.types import Message
        >>> state = ThreadState("t")
        >>> for n in range(3):
        ...     state.apply(n + 1, UserInput(messages=(Message.user(f"q{n}"),), run_id=f"r{n}"))
        >>> [m.content for m in WindowMemory(size=2).view(state).messages]
        ['q1', 'q2']
    """

    size: int = 20
    """At most this many recent messages; more when none of them is a user message."""

    def __post_init__(self) -> None:
        if self.size < 1:
            raise ConfigurationError(f"A memory window holds at least 1 message, not {self.size}.")

    def view(self, state: ThreadState) -> MemoryView:
        """The last `size` messages, widened back to the latest user message if needed."""
        messages = state.messages
        start = max(0, len(messages) - self.size)
        if state.last_user < start:
            # No user turn inside the window (a long tool loop): start at the latest one.
            return MemoryView(messages[state.last_user :])
        return MemoryView(messages[start_of_turn(messages, start) :])

    def describe(self) -> dict[str, JsonValue]:
        """Describe the memory."""
        return {"kind": "window", "size": self.size}
