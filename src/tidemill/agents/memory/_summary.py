"""`SummaryMemory`: older turns condensed by the model, the summary kept in the journal."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import JsonValue

from tidemill.agents.journal import MemorySummarized, ThreadState
from tidemill.agents.memory._base import MemoryView, start_of_turn
from tidemill.agents.memory._transcript import message_line
from tidemill.errors import ConfigurationError
from tidemill.llm import Model, ModelRequest
from tidemill.types import Message

__all__ = ["SummaryMemory"]

_PROMPT = (
    "Summarise the conversation below for an assistant who will continue it. Keep every "
    "fact, decision, name, number and open question it will need; leave out pleasantries. "
    "Write plain prose, at most {words} words."
)


@dataclass(frozen=True)
class SummaryMemory:
    """Recent turns verbatim; everything older condensed by the model into a summary.

    When a run starts and more than `max_messages` messages precede the
    recent ones, the model writes a summary of them (and of any earlier
    summary). The summary is journaled, so it is written once, survives
    restarts, and shows in the audit trail with what it cost; each model call
    then gets it in the system prompt, followed by the recent messages.

    Args:
        max_messages: Messages the thread may hold before older ones are condensed.
        keep_last: Recent messages always sent verbatim (widened to start on a
            user's turn).
        words: A length hint for the summary.
    """

    max_messages: int = 40
    """Messages the thread may hold before older ones are condensed."""
    keep_last: int = 10
    """Recent messages always sent verbatim (widened to start on a user's turn)."""
    words: int = 200
    """A length hint for the summary, in words."""

    def __post_init__(self) -> None:
        if self.keep_last < 1 or self.max_messages <= self.keep_last:
            raise ConfigurationError(
                "A summary memory needs keep_last >= 1 and max_messages > keep_last "
                f"(got keep_last={self.keep_last}, max_messages={self.max_messages})."
            )

    def view(self, state: ThreadState) -> MemoryView:
        """The summary as context, then the messages it does not cover."""
        context = (
            f"Summary of the earlier conversation:\n{state.summary}" if state.summary else None
        )
        return MemoryView(state.messages[state.summary_upto :], context)

    async def compact(self, state: ThreadState, model: Model) -> MemorySummarized | None:
        """Summarise what precedes the recent messages, if the thread has grown past the limit."""
        messages = state.messages
        if len(messages) - state.summary_upto <= self.max_messages:
            return None
        upto = start_of_turn(messages, len(messages) - self.keep_last, floor=state.summary_upto)
        if upto <= state.summary_upto:
            return None
        transcript = "\n".join(message_line(m) for m in messages[state.summary_upto : upto])
        if state.summary:
            transcript = f"(Summary so far) {state.summary}\n{transcript}"
        request = ModelRequest(
            [
                Message.system(_PROMPT.format(words=self.words)),
                Message.user(transcript),
            ]
        )
        response = await model.request(request)
        return MemorySummarized(
            summary=response.message.content.strip(), upto=upto, usage=response.usage
        )

    def describe(self) -> dict[str, JsonValue]:
        """Describe the memory."""
        return {
            "kind": "summary",
            "max_messages": self.max_messages,
            "keep_last": self.keep_last,
        }
