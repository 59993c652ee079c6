"""The agent graph's state, and the run every node of it can see."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Annotated, TypedDict

from tidemill.agents._loop import RunBounds
from tidemill.agents._output import OutputSpec
from tidemill.agents.graph._saver import ThreadLog
from tidemill.errors import ConfigurationError
from tidemill.llm import ModelSettings
from tidemill.types import AgentResponse, Message

__all__ = ["GraphRun", "GraphState", "append_messages"]


def append_messages(left: Sequence[Message], right: Message | Sequence[Message]) -> list[Message]:
    """The `messages` reducer: a node's messages are appended to the conversation.

    An update that repeats the whole conversation first, as a compiled
    subgraph on `GraphState` returns it (its input and what its nodes
    added), appends only what follows: a subgraph added as a node does not
    double the conversation.

    Raises:
        ConfigurationError: When a node returns something other than `Message`s.

    Examples:
        >>> hi = Message.user("Hi")
        >>> [m.content for m in append_messages([hi], Message.assistant("Hello"))]
        ['Hi', 'Hello']
        >>> [m.content for m in append_messages([hi], [hi, Message.user("Note.")])]
        ['Hi', 'Note.']
    """
    added = [right] if isinstance(right, Message) else list(right)
    wrong = [type(item).__name__ for item in added if not isinstance(item, Message)]
    if wrong:
        raise ConfigurationError(
            f"A graph node returned {', '.join(wrong)} in `messages`; the agent graph "
            "holds tidemill.types.Message objects.",
            hint='Return {"messages": [Message.user("...")]} from the node.',
        )
    size = len(left)
    if size and len(added) >= size and added[0] == left[0] and added[:size] == list(left):
        added = added[size:]  # a subgraph's whole state: the conversation, then its additions
    return [*left, *added]


class GraphState(TypedDict):
    """The agent graph's state: the conversation, as Tidemill messages.

    A node you add reads `state["messages"]` and returns
    `{"messages": [...]}` to append to it.
    """

    messages: Annotated[list[Message], append_messages]
    """The conversation; a node's returned messages are appended (`append_messages`)."""


@dataclass
class GraphRun:
    """One run of the agent graph: LangGraph hands it to every node as its context."""

    log: ThreadLog
    """The thread the run writes to."""
    bounds: RunBounds
    """The run's iteration budget and usage limits."""
    settings: ModelSettings
    """The settings every model call of the run is sent with."""
    streaming: bool
    """Whether the run streams: model output and tool events are yielded as they happen."""
    started: set[str] = field(default_factory=set)
    """Calls this run journaled as started, so they are not marked twice."""
    messages: list[Message] = field(default_factory=list)
    """The graph's conversation as of its last completed step."""
    output: OutputSpec | None = None
    """The shape the final answer must have, when the agent has one."""

    def response(self, *added: Message) -> AgentResponse:
        """The run so far: steps and usage from the journal, the graph's messages.

        Once the run finished with an output type, `output` is the validated
        value as that type, as `AgentRuntime` answers it.
        """
        state = self.log.state
        response = state.response(latency_ms=self.log.writer.elapsed_ms())
        response.messages = [*self.messages, *added]
        if self.output is not None and state.status == "finished":
            response.output = self.output.load(state.output)
        return response
