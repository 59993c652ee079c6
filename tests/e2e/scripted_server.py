"""`tidemill server` with its worker's models scripted as a support agent (browser tests).

    python tests/e2e/scripted_server.py --db sqlite:///... --port 0

It prints the line `tidemill server` prints when it listens. The agent it
scripts decides from the conversation alone (so a resumed step gets the same
turns): it looks order A-1001 up, asks to refund it (a tool that needs a
person's approval), then answers with the first line of its system prompt and
what the refund said, so that a test can tell which prompt (a draft's or the
deployed one) a run used.

The copilot (`--copilot-model fake`: its turns' step is `copilot`) is
scripted too, from its turn's message: "add ..." searches the flows, then
proposes `COPILOT_PROPOSAL` (the flow greeting twice) with `set_flow`; "test
..." asks for a test run of the draft (which waits for the user's approval)
and reports its status and result; anything else is answered "Hello.".
"""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import Any

import yaml

from tidemill.engine import ModelChoice
from tidemill.engine._memory import RECALL_HEADER
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


COPILOT_PROPOSAL: dict[str, Any] = {
    "summary": "Greet twice",
    "inputs": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
    "steps": [
        {
            "id": "greet",
            "script": {"path": "f/demo/greet"},
            "inputs": {"name": {"expr": "flow_input.name"}},
        },
        {
            "id": "again",
            "script": {"path": "f/demo/greet"},
            "inputs": {"name": {"expr": "results.greet"}},
        },
    ],
}


def _call(name: str, index: int, **arguments: Any) -> Message:
    return Message.assistant(
        "", tool_calls=(ToolCall(id=f"cp{index}", name=name, arguments=arguments),)
    )


def copilot(request: ModelRequest) -> str | Message:
    """The copilot's next turn, read off this turn's message and the tool results since."""
    messages = list(request.messages)
    start = max(
        i
        for i, m in enumerate(messages)
        if m.role == "user" and not m.content.startswith(RECALL_HEADER)
    )
    asked = messages[start].content.lower()
    results = [m for m in messages[start + 1 :] if m.role == "tool"]
    if asked.startswith("add"):
        if not results:
            return _call("search_flows", len(messages), query="greet")
        if len(results) == 1:
            proposal = yaml.safe_dump(COPILOT_PROPOSAL, sort_keys=False)
            return _call("set_flow", len(messages), flow=proposal)
        return "I added a step `again` that greets the greeting; it is saved as your draft."
    if asked.startswith("test"):
        if not results:
            return _call("test_run_flow", len(messages), inputs={"name": "Ada"})
        last = results[-1]
        if last.is_error:
            return f"Not run: {last.content}"
        view = json.loads(last.content)
        return f"Test run {view['status']}: {view.get('result')}"
    return "Hello."


def models(choice: ModelChoice) -> Model:
    """The copilot's turns get the scripted copilot; every other step, the support agent."""
    handler = copilot if choice.step_id == "copilot" else support_agent
    return ScriptedModel(handler=handler, record=False)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--db", required=True)
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    config = ServerConfig(db=args.db, models=models, copilot_model="fake")

    def ready(url: str, first_admin: str | None) -> None:
        print(f"Tidemill server at {url} (web UI: {url}/); scripted models.", flush=True)

    asyncio.run(serve(config, port=args.port, on_ready=ready))


if __name__ == "__main__":
    main()
