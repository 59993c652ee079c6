"""Tools and scripted models the graph runtime's tests share."""

from __future__ import annotations

from tidemill import tool
from tidemill.agents.checkpoint import Checkpointer
from tidemill.agents.graph import GraphRuntime
from tidemill.llm import ModelRequest, ScriptedModel
from tidemill.types import Message, ToolCall

payments: list[tuple[str, int]] = []
"""Every call of `pay` and `balance`, in order; tests clear it."""


@tool(requires_approval=True)
def pay(to: str, amount: int) -> str:
    """Send money.

    Args:
        to: Who gets it.
        amount: How much, in cents.
    """
    payments.append((to, amount))
    return f"paid {amount} to {to}"


@tool
def balance() -> int:
    """Read the balance."""
    payments.append(("balance", 0))
    return 100


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@tool
def explode() -> str:
    """Always fails."""
    raise ValueError("the fuse blew")


def payer(*calls: ToolCall) -> ScriptedModel:
    """Asks for `calls` in one turn, then answers with what the tools said."""

    def handler(request: ModelRequest) -> str | Message:
        if request.messages[-1].role == "user":
            return Message.assistant("Paying.", tool_calls=calls)
        return "Result: " + " | ".join(m.content for m in request.messages if m.role == "tool")

    return ScriptedModel(handler=handler)


def graph_runtime(
    checkpointer: Checkpointer, model: ScriptedModel, **options: object
) -> GraphRuntime:
    """A graph agent with `pay` and `balance`, journaling to `checkpointer`."""
    return GraphRuntime(
        model=model,
        tools=[pay, balance],
        checkpointer=checkpointer,
        **options,  # type: ignore[arg-type]
    )
