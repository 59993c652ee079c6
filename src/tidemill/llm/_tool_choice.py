"""A request's `tool_choice`, beside the forced output tool of Anthropic and Bedrock.

Both APIs take structured output as a tool the model is made to call
(`_forced_output`), so the tool choice a request asks for and the one the
output tool needs are one field of the body. `plan_tool_choice` settles
both: which tools to send, and how hard the model is pushed to call one:

- `auto` (the request's default): the output tool is forced as
  `forced_choice` says; without one, nothing is forced;
- `none`: no tool of the request's may be called; the output tool alone
  is sent (and forced) when there is one, and for an API with no `none`
  mode (Converse) the request's tools are not sent at all;
- `required` and a named tool (`ForcedTool`): `any` and `tool`, beside the
  output tool too; an API or model that cannot force a call (extended
  thinking, a Bedrock model without `toolChoice`) refuses the request with
  `UnsupportedOption`, since leaving it out would let the model answer
  without the call it was asked for.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from tidemill.llm._forced_output import forced_choice
from tidemill.llm._model import ForcedTool, ModelRequest
from tidemill.llm._options import UnsupportedOption
from tidemill.types import ToolDefinition

__all__ = ["ToolChoicePlan", "plan_tool_choice"]

ChoiceKind = Literal["auto", "none", "any", "tool"]
"""How hard the model is pushed: not at all, never, some tool, the tool named."""


@dataclass(frozen=True, slots=True)
class ToolChoicePlan:
    """The tools to send and how the model is made to call them."""

    tools: Sequence[ToolDefinition]
    """The request's tools (unless `none` leaves them out), then the output tool."""
    kind: ChoiceKind = "auto"
    name: str | None = None
    """The tool to call, with `kind="tool"`."""


def plan_tool_choice(
    request: ModelRequest,
    answer_tool: ToolDefinition | None,
    *,
    provider: str,
    can_force: bool,
    cannot_force: str = "",
    has_none: bool = True,
) -> ToolChoicePlan:
    """Which tools to send and the choice that goes with them.

    Args:
        request: The request, with its tools and `tool_choice`.
        answer_tool: The forced output tool (`output_tool`), if any.
        provider: The provider, for errors.
        can_force: Whether a call can be forced (`any` or `tool`).
        cannot_force: Why not, when it cannot.
        has_none: Whether the API has a `none` mode.

    Raises:
        UnsupportedOption: For `required` or a named tool when no call can be forced.

    Examples:
        >>> from tidemill.types import Message
        >>> tool = ToolDefinition(name="add", parameters={"type": "object"})
        >>> asked = ModelRequest([Message.user("4 + 2?")], tools=[tool], tool_choice="required")
        >>> plan_tool_choice(asked, None, provider="anthropic", can_force=True).kind
        'any'
    """
    choice = request.tool_choice
    tools = list(request.tools)
    if choice == "none" and (answer_tool is not None or not has_none):
        tools = []  # none of them may be called, and the API cannot say so otherwise
        choice = "auto"
    forced = choice == "required" or isinstance(choice, ForcedTool)
    if forced and tools and not can_force:
        raise UnsupportedOption("tool_choice", provider, cannot_force, value=True)
    if answer_tool is not None:
        if isinstance(choice, ForcedTool):
            return ToolChoicePlan([*tools, answer_tool], "tool", choice.name)
        if choice == "required":
            return ToolChoicePlan([*tools, answer_tool], "any")
        kind = forced_choice(dataclasses.replace(request, tools=tools), can_force=can_force)
        return ToolChoicePlan([*tools, answer_tool], kind, answer_tool.name)
    if not tools or choice == "auto":
        return ToolChoicePlan(tools)
    if isinstance(choice, ForcedTool):
        return ToolChoicePlan(tools, "tool", choice.name)
    return ToolChoicePlan(tools, "any" if choice == "required" else "none")
