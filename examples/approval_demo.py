"""A support agent that looks up an order and asks a person before refunding it.

Runs offline: the model is Tidemill's scripted model, and the thread's journal
is kept in a SQLite file (.tidemill/demo.db). The run pauses before the refund;
a second agent object, as another process would, approves it and finishes.

    make demo        # or: python examples/approval_demo.py
"""

from __future__ import annotations

import json
import secrets
from pathlib import Path

import tidemill
from tidemill import AgentInterrupt, Decision, Message, ToolCall
from tidemill.llm import ModelRequest

ORDERS = {"A-1001": {"item": "espresso grinder", "paid": 129.0, "status": "arrived broken"}}
DB = Path(".tidemill/demo.db")


@tidemill.tool
def lookup_order(order_id: str) -> dict[str, object]:
    """Look up an order.

    Args:
        order_id: The order number, like A-1001.
    """
    return {"order_id": order_id, **ORDERS[order_id]}


@tidemill.tool(requires_approval=True)
def issue_refund(order_id: str, amount: float, reason: str) -> str:
    """Refund an order. A person must approve every refund.

    Args:
        order_id: The order to refund.
        amount: How much to refund, in euros.
        reason: Why, for the customer's record.
    """
    return f"refunded {amount:.2f} EUR on {order_id}"


def support_model(request: ModelRequest) -> str | Message:
    """The scripted model: decides its next move from the last message."""
    last = request.messages[-1]
    if last.role == "user":
        return Message.assistant(
            "Let me look that order up.",
            tool_calls=(ToolCall(name="lookup_order", arguments={"order_id": "A-1001"}),),
        )
    if last.name == "lookup_order":
        order = json.loads(last.content)
        return Message.assistant(
            "It arrived broken; I will refund it in full.",
            tool_calls=(
                ToolCall(
                    name="issue_refund",
                    arguments={
                        "order_id": order["order_id"],
                        "amount": order["paid"],
                        "reason": order["status"],
                    },
                ),
            ),
        )
    return f"Done: {last.content}. Sorry about the grinder!"


def build_agent() -> tidemill.AgentBuilder:
    return (
        tidemill.agent()
        .name("support")
        .llm("fake", handler=support_model)
        .tool(lookup_order, issue_refund)
        .system("You are a support agent. Refunds need a person's approval.")
        .checkpoint("sqlite", path=DB)
    )


def main() -> None:
    thread_id = "demo-" + secrets.token_hex(4)
    print(f"Tidemill {tidemill.__version__}: offline scripted model, journal in {DB}\n")

    first = build_agent()
    try:
        first.run("My order A-1001 arrived broken, can I get a refund?", thread_id=thread_id)
        raise SystemExit("expected the refund to wait for approval")
    except AgentInterrupt as pause:
        print(f"PAUSED on thread {pause.thread_id}: {len(pause.pending)} call(s) need approval")
        for call in pause.pending:
            print(f"  - {call.name}({json.dumps(call.arguments)})  [{call.id}]")
        pending = pause.pending
    first.close()

    # Another agent object, as a different process would build it, reads the
    # pause from the journal and continues after the person approves.
    second = build_agent()
    print("\nAPPROVER: approved, with the amount lowered to 99.00 (store credit covers the rest)\n")
    response = second.resume(
        thread_id,
        {pending[0].id: Decision.approve({**pending[0].arguments, "amount": 99.0}, actor="dana")},
    )

    print("TRANSCRIPT")
    for message in response.messages:
        text = message.content or ", ".join(
            f"{c.name}({json.dumps(c.arguments)})" for c in message.tool_calls
        )
        print(f"  {message.role.value:>9}: {text}")
    print("\nSTEPS")
    for step in response.steps:
        calls = ", ".join(c.name for c in step.tool_calls) or "(answer)"
        print(f"  {step.index}. {calls}: {step.thought}")
        for record in step.approvals:
            print(
                f"     approval: {record.outcome} by {record.actor}; "
                f"asked {record.arguments}, ran {record.edited_arguments}"
            )
    usage = response.usage
    print(
        f"\nUSAGE  {usage.requests} model calls, {usage.input_tokens} input + "
        f"{usage.output_tokens} output tokens"
    )
    print(f"JOURNAL {len(second.history(thread_id))} events in {DB}")
    print(f"\nANSWER {response.output}")
    second.close()


if __name__ == "__main__":
    main()
