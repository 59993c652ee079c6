"""`tidemill server` with its worker's models scripted as a support agent (browser tests).

    python tests/e2e/scripted_server.py --db sqlite:///... --port 0

It prints the line `tidemill server` prints when it listens. The agent it
scripts decides from the conversation alone (so a resumed step gets the same
turns): it looks order A-1001 up, asks to refund it (a tool that needs a
person's approval), then answers with the first line of its system prompt and
what the refund said, so that a test can tell which prompt (a draft's or the
deployed one) a run used.
"""

from __future__ import annotations

import argparse
import asyncio
import json

from tidemill.engine import ModelChoice
from tidemill.llm import Model, ModelRequest, ScriptedModel
from tidemill.server import ServerConfig, serve
from tidemill.types import Message, ToolCall


def support_agent(request: ModelRequest) -> str | Message:
    """The next turn of the support agent, read off the conversation."""
    last = request.messages[-1]
    system = next((m.content for m in request.messages if m.role == "system"), "") or ""
    if last.role == "user":
        lookup = ToolCall(id="call_lookup", name="lookup_order", arguments={"order_id": "A-1001"})
        return Message.assistant("Let me look that order up.", tool_calls=(lookup,))
    if last.name == "lookup_order":
        order = json.loads(last.content or "{}")
        refund = ToolCall(
            id="call_refund",
            name="issue_refund",
            arguments={"order_id": "A-1001", "amount": order.get("paid", 0)},
        )
        return Message.assistant("It arrived broken: I will refund it.", tool_calls=(refund,))
    return f"{system.splitlines()[0] if system else 'Done'}: {last.content}"


def models(choice: ModelChoice) -> Model:
    """Every model the worker asks for is the scripted support agent."""
    return ScriptedModel(handler=support_agent, record=False)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--db", required=True)
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    config = ServerConfig(db=args.db, models=models)

    def ready(url: str, first_admin: str | None) -> None:
        print(f"Tidemill server at {url} (web UI: {url}/); scripted models.", flush=True)

    asyncio.run(serve(config, port=args.port, on_ready=ready))


if __name__ == "__main__":
    main()
