"""Fixtures of the copilot tests: a billing workspace on each backend, and scripted conversations.

`shop` is a workspace (on the `store_url` backend, with an engine on the
same store) as its admin `ada`, holding:

- `f/billing/process_invoice` (flow, input `invoice_id`), which uses the
  script `f/billing/load_invoice`;
- `f/billing/refund` (flow: `lookup` then `refund`, the script
  `f/billing/issue_refund`);
- `f/notify/send_notification` (script: `channel`, `message`);
- `f/billing/stripe_key`, a secret variable, and `f/billing/stripe`, a
  resource naming it; `f/billing/charge`, a flow whose step reads the secret;
- `f/private/payroll`, a flow in a folder `bob` (a member) has no role on;
  `bob` writes `f/billing` and `f/notify`.

`Conversation` is a `ScriptedModel` handler that decides each turn from
the conversation so far: turn `n` (the number of assistant turns already in
it) is `turns[n](transcript)`, which answers tool calls or the final text,
reading what earlier tools answered.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pytest

from tidemill.engine import AsyncEngine
from tidemill.llm import ModelRequest, ScriptedModel
from tidemill.types import Message, ToolCall
from tidemill.workspace import AsyncWorkspace, MasterKey

LOAD_INVOICE = '''"""Load an invoice from the billing database."""

def main(invoice_id: str):
    return {"invoice_id": invoice_id, "total": 120.0, "customer": "acme"}
'''
ISSUE_REFUND = '''"""Issue a refund for an order through the payment provider."""

def main(order_id: str, amount: float):
    return {"refunded": order_id, "amount": amount}
'''
SEND_NOTIFICATION = '''"""Send a notification message to a channel (email, Slack, SMS)."""

def main(channel: str, message: str):
    print("notify", channel)
    return {"sent": True, "channel": channel, "message": message}
'''
CHARGE_CARD = '''"""Charge a card with the payment provider's API key."""

def main(token: str, amount: float):
    print("charging with", token)
    return {"charged": amount, "token_used": token}
'''
PROCESS_INVOICE = {
    "summary": "Process an invoice",
    "description": "Load an invoice and compute what is due.",
    "inputs": {
        "type": "object",
        "properties": {"invoice_id": {"type": "string"}},
        "required": ["invoice_id"],
    },
    "steps": [
        {
            "id": "load",
            "summary": "Load the invoice",
            "script": {"path": "f/billing/load_invoice"},
            "inputs": {"invoice_id": {"expr": "flow_input.invoice_id"}},
        },
        {
            "id": "due",
            "script": "def main(invoice):\n    return invoice['total']\n",
            "inputs": {"invoice": {"expr": "results.load"}},
        },
    ],
}
REFUND = {
    "summary": "Refund an order",
    "inputs": {
        "type": "object",
        "properties": {"order_id": {"type": "string"}, "amount": {"type": "number"}},
        "required": ["order_id", "amount"],
    },
    "steps": [
        {"id": "lookup", "identity": {}, "inputs": {"order_id": {"expr": "flow_input.order_id"}}},
        {
            "id": "refund",
            "script": {"path": "f/billing/issue_refund"},
            "inputs": {
                "order_id": {"expr": "flow_input.order_id"},
                "amount": {"expr": "flow_input.amount"},
            },
        },
    ],
}
CHARGE = {
    "summary": "Charge a card",
    "steps": [
        {
            "id": "charge",
            "script": {"path": "f/billing/charge_card"},
            "inputs": {"token": "$var:f/billing/stripe_key", "amount": 5},
        }
    ],
}
PAYROLL = {"summary": "Run the payroll", "steps": [{"id": "pay", "identity": {}}]}


@dataclass
class Shop:
    """The billing workspace: its engine, and the workspace as ada (admin) and bob (member)."""

    engine: AsyncEngine
    ada: AsyncWorkspace
    bob: AsyncWorkspace
    secret: str


@pytest.fixture
async def shop(store_url: str, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Shop]:
    """The billing workspace of the module docstring, on each backend."""
    # The workers of a test run decrypt secrets with the master key they find, as in production.
    monkeypatch.setenv("TIDEMILL_MASTER_KEY", MasterKey.generate().encoded())
    engine = AsyncEngine(store_url, migrate=True)
    ada = AsyncWorkspace(engine.store, user="ada", migrate=True)
    secret = f"sk-live-SECRET-{uuid.uuid4().hex}"
    try:
        await ada.add_user("bob")
        await ada.add_folder("billing", roles={"bob": "writer"})
        await ada.add_folder("notify", roles={"bob": "writer"})
        await ada.add_folder("private")
        await ada.write("f/billing/load_invoice", "script", LOAD_INVOICE)
        await ada.write("f/billing/issue_refund", "script", ISSUE_REFUND)
        await ada.write("f/billing/charge_card", "script", CHARGE_CARD)
        await ada.write("f/notify/send_notification", "script", SEND_NOTIFICATION)
        await ada.write("f/billing/process_invoice", "flow", PROCESS_INVOICE)
        await ada.write("f/billing/refund", "flow", REFUND)
        await ada.write("f/billing/stripe_key", "variable", secret, secret=True)
        await ada.write(
            "f/billing/stripe",
            "resource",
            {"api_key": "$var:f/billing/stripe_key", "model": "gpt-4o-mini"},
            resource_type="openai",
        )
        await ada.write("f/billing/charge", "flow", CHARGE)
        await ada.write("f/private/payroll", "flow", PAYROLL)
        bob = await ada.acting_as("bob")
        yield Shop(engine, ada, bob, secret)
    finally:
        await ada.close()
        await engine.close()


class Transcript:
    """The conversation a turn decides from: what each tool answered so far."""

    def __init__(self, messages: Sequence[Message]) -> None:
        self.messages = list(messages)

    def results(self, tool: str) -> list[Message]:
        """The results of `tool`'s calls, oldest first."""
        return [m for m in self.messages if m.role == "tool" and m.name == tool]

    def last(self, tool: str) -> Any:
        """The last result of `tool`, parsed from JSON (text when it is none)."""
        found = self.results(tool)
        assert found, f"no result of {tool} in the conversation"
        try:
            return json.loads(found[-1].content)
        except json.JSONDecodeError:
            return found[-1].content

    @property
    def user(self) -> str:
        """The user's first message."""
        return next(m.content for m in self.messages if m.role == "user")


Turn = Callable[[Transcript], "str | list[ToolCall]"]


def call(name: str, **arguments: Any) -> ToolCall:
    """A tool call as the model would make it."""
    return ToolCall(name=name, arguments=arguments)


class Conversation:
    """A scripted model's handler playing `turns`, each decided from the conversation."""

    def __init__(self, *turns: Turn | str | list[ToolCall]) -> None:
        self.turns = turns

    def __call__(self, request: ModelRequest) -> Message:
        done = sum(1 for m in request.messages if m.role == "assistant")
        if done >= len(self.turns):
            raise AssertionError(f"the model was asked for turn {done}; only {len(self.turns)}")
        turn = self.turns[done]
        answer = turn(Transcript(request.messages)) if callable(turn) else turn
        if isinstance(answer, str):
            return Message(role="assistant", content=answer)
        return Message(role="assistant", tool_calls=tuple(answer))

    def model(self) -> ScriptedModel:
        """A scripted model answering with this conversation."""
        return ScriptedModel(handler=self)


def tool_results(model: ScriptedModel) -> list[Message]:
    """Every tool result the model was sent, in its last request."""
    return [m for m in model.requests[-1].messages if m.role == "tool"]


def sent_text(model: ScriptedModel) -> str:
    """Everything the model was ever sent, as one text (to look for what must not be there)."""
    parts = []
    for request in model.requests:
        for m in request.messages:
            parts.append(m.content)
            parts.extend(json.dumps(c.arguments) for c in m.tool_calls)
        parts.extend(json.dumps(t.parameters) + t.description for t in request.tools)
    return "\n".join(parts)
