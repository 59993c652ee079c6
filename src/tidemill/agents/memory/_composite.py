"""`CompositeMemory`: a window of recent messages, a summary of older ones, recall by meaning."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import JsonValue

from tidemill.agents.journal import MemoryRecalled, MemorySummarized, ThreadState
from tidemill.agents.memory._base import MemoryView, start_of_turn
from tidemill.agents.memory._summary import SummaryMemory
from tidemill.agents.memory._vector import VectorMemory
from tidemill.errors import ConfigurationError
from tidemill.llm import Model

__all__ = ["CompositeMemory"]


class CompositeMemory:
    """The three memories configured together; each model call sees all they give.

    - the window: the last `window` messages verbatim (starting on a user's
      turn, as `WindowMemory` does, and never before what the summary covers);
    - the summary (`summary=`): older turns condensed by the model once the
      thread outgrows `max_messages`, journaled, as `SummaryMemory` does;
    - recall (`vector=`): the earlier units closest in meaning to the
      request, chosen from the messages before the window when the run
      starts, as `VectorMemory` does, so nothing is sent twice.

    The summary and the recalled messages go into the system prompt, in that
    order; the window follows as the conversation. Both are journaled when
    the run starts (`MemoryRecalled`, then `MemorySummarized`, in one write),
    so a run resumed elsewhere sees the same, and both count in its usage.

    Args:
        window: Recent messages sent verbatim.
        summary: `SummaryMemory` options (`{"max_messages": 40, "keep_last": 10}`),
            a `SummaryMemory`, or None for no summary.
        vector: `VectorMemory` options (`{"embedder": "openai:text-embedding-3-small",
            "k": 4}`), a `VectorMemory`, or None for no recall.

    Raises:
        ConfigurationError: For a window below 1, neither a summary nor
            recall, or bad options for either.

    Examples:
        >>> memory = CompositeMemory(window=6, summary={"max_messages": 30},
        ...                          vector={"embedder": "fake", "k": 2})
        >>> memory.describe()["window"], memory.describe()["summary"]["max_messages"]
        (6, 30)
    """

    def __init__(
        self,
        *,
        window: int = 20,
        summary: Mapping[str, Any] | SummaryMemory | None = None,
        vector: Mapping[str, Any] | VectorMemory | None = None,
    ) -> None:
        if window < 1:
            raise ConfigurationError(
                f"A memory window holds at least 1 message, not {window}.",
                hint="Pass window=20 (the default) or another count of recent messages.",
            )
        if summary is None and vector is None:
            raise ConfigurationError(
                "A composite memory with neither a summary nor recall is a window.",
                hint="Pass summary={...} and/or vector={'embedder': ...}, or use "
                ".memory('window', size=...).",
            )
        self.window = window
        self.summary = _part(SummaryMemory, summary, "summary")
        self.vector = _part(VectorMemory, vector, "vector")

    def bound(self, checkpointer: object) -> CompositeMemory:
        """This memory with its recall vectors beside `checkpointer`'s journals."""
        if self.vector is None:
            return self
        return CompositeMemory(
            window=self.window, summary=self.summary, vector=self.vector.bound(checkpointer)
        )

    def view(self, state: ThreadState) -> MemoryView:
        """The window as the conversation; the summary and the recalled messages as context."""
        start = self._window_start(state)
        parts: list[str] = []
        if self.summary is not None:
            context = self.summary.view(state).context
            if context:
                parts.append(context)
        if self.vector is not None:
            recalled = self.vector.recall_context(state)
            if recalled:
                parts.append(recalled)
        return MemoryView(state.messages[start:], "\n\n".join(parts) or None)

    async def compact(
        self, state: ThreadState, model: Model
    ) -> tuple[MemoryRecalled | MemorySummarized, ...] | None:
        """Recall from before the window, then let the summary condense: the events to journal."""
        events: list[MemoryRecalled | MemorySummarized] = []
        if self.vector is not None:
            recalled = await self.vector.recall(state, before=self._window_start(state))
            if recalled is not None:
                events.append(recalled)
        if self.summary is not None:
            summarized = await self.summary.compact(state, model)
            if summarized is not None:
                events.append(summarized)
        return tuple(events) or None

    async def aclose(self) -> None:
        """Close what the recall part opened."""
        if self.vector is not None:
            await self.vector.aclose()

    def describe(self) -> dict[str, JsonValue]:
        """Describe the memory and its parts."""
        return {
            "kind": "composite",
            "window": self.window,
            "summary": self.summary.describe() if self.summary else None,
            "vector": self.vector.describe() if self.vector else None,
        }

    def _window_start(self, state: ThreadState) -> int:
        messages = state.messages
        floor = min(state.summary_upto, state.last_user) if self.summary is not None else 0
        start = max(floor, len(messages) - self.window)
        if state.last_user < start:
            return state.last_user  # a long tool loop: start at the latest user turn
        return start_of_turn(messages, start, floor)


_Part = TypeVar("_Part", SummaryMemory, VectorMemory)


def _part(kind: type[_Part], given: Mapping[str, Any] | _Part | None, name: str) -> _Part | None:
    if given is None or isinstance(given, kind):
        return given
    if not isinstance(given, Mapping):
        raise ConfigurationError(
            f"{name}= takes a dict of options or a {kind.__name__}, not {type(given).__name__}.",
            hint=f"Pass {name}={{...}} with the options of the {name!r} memory.",
        )
    try:
        return kind(**given)
    except TypeError as exc:
        raise ConfigurationError(
            f"Bad option for the composite memory's {name}: {exc}",
            hint=f"The options are those of .memory({name!r}, ...).",
        ) from None
