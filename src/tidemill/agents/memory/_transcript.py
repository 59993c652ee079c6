"""A thread's messages as text, and cut into the units that are recalled whole."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from tidemill.types import Message, Role

__all__ = ["Unit", "message_line", "units_of"]

_TEXT_LIMIT = 8000
"""Characters of a unit kept for embedding and recall: embedding models read a few thousand
tokens at most, and a recalled unit should not crowd out the conversation."""


def message_line(message: Message) -> str:
    """One message as a line of a transcript.

    Examples:
        >>> message_line(Message.user("Hi"))
        'user: Hi'
    """
    if message.role == Role.TOOL:
        return f"tool {message.name} returned: {message.content}"
    calls = ", ".join(f"{c.name}({c.arguments})" for c in message.tool_calls)
    text = " ".join(part for part in (message.content, calls and f"[called {calls}]") if part)
    return f"{message.role.value}: {text}"


@dataclass(frozen=True, slots=True)
class Unit:
    """Messages `start` to `end` (exclusive) of a thread, recalled together."""

    start: int
    end: int
    text: str
    """The unit as transcript lines, cut to a few thousand characters."""

    @property
    def digest(self) -> str:
        """A fingerprint of the text: a stored vector of other text at `start` is stale."""
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()[:32]


def units_of(messages: Sequence[Message], upto: int | None = None) -> list[Unit]:
    """Cut `messages[:upto]` into units: a message, or a tool-calling turn with its results.

    An assistant message that calls tools and the results that follow it are
    one unit, so a recalled call always comes with what it returned. System
    messages and messages with no text are left out.

    Examples:
        >>> from tidemill.types import ToolCall, ToolResult
        >>> call = ToolCall(id="c1", name="weather", arguments={"city": "Oslo"})
        >>> thread = [Message.user("Weather?"), Message.assistant("", tool_calls=(call,)),
        ...           Message.tool(ToolResult(call_id="c1", name="weather", content="rain")),
        ...           Message.assistant("It rains.")]
        >>> [(u.start, u.end) for u in units_of(thread)]
        [(0, 1), (1, 3), (3, 4)]
    """
    end = len(messages) if upto is None else min(upto, len(messages))
    units: list[Unit] = []
    position = 0
    while position < end:
        message = messages[position]
        stop = position + 1
        if message.role == Role.ASSISTANT and message.tool_calls:
            while stop < end and messages[stop].role == Role.TOOL:
                stop += 1
        if message.role != Role.SYSTEM:
            text = "\n".join(message_line(m) for m in messages[position:stop])
            if message.content.strip() or message.tool_calls:
                units.append(Unit(position, stop, text[:_TEXT_LIMIT]))
        position = stop
    return units
