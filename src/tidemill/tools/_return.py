"""`ToolReturn`: a tool's value together with what producing it cost."""

from __future__ import annotations

from dataclasses import dataclass, field

from tidemill.types import Usage

__all__ = ["ToolReturn"]


@dataclass(frozen=True, slots=True)
class ToolReturn:
    """Return this from a tool that spent model usage (a nested agent, an LLM call).

    The runtime shows the model `value` and adds `usage` to the run's usage,
    so limits and reports count what the tool spent.

    Examples:
        >>> from tidemill.types import Usage
        >>> ToolReturn("a summary", usage=Usage(requests=1)).usage.requests
        1
    """

    value: object
    """What the model sees, rendered as any tool result is."""
    usage: Usage = field(default_factory=Usage)
    """What the tool spent."""
    is_error: bool = False
    """Whether `value` reports a failure the model should see as one."""
    tool_calls: int = 0
    """Tool calls made on the call's behalf (by the agents a delegation ran), counted
    against the run's `tool_calls` limit like the run's own."""
