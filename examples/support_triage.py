"""Support triage as a durable workspace flow: an AI classification, an agent, a person's approval.

The demo pushes `examples/workspace/` into a workspace (as `tidemill sync push`
does) and runs its flow `f/support/triage` by path, as the local user, the
workspace's first admin. The flow classifies a ticket with `ai_action` (an
output schema), lets the saved agent `f/support/responder` (a linked
`ai_agent` step: its brain and tools live in the workspace) look the order up
and refund it (the refund tool needs a person's approval: the run waits; once
approved, the call runs the workspace flow `f/support/refund` as a child run),
then formats the reply with the workspace script `f/support/format_reply`.
The classification and the agent take their provider from the resource
`f/ai/llm` (`provider: $res:f/ai/llm`), resolved as the run's identity when
the step runs. The demo approves the
refund through the CLI, as a person in another terminal would, and prints
the steps, the agent's transcript, usage and cost.

With no API key the models are Tidemill's offline scripted models (the demo
says so); with OPENAI_API_KEY or ANTHROPIC_API_KEY set, the key goes into
the secret variable `f/ai/llm_key`, the resource `f/ai/llm` names it, and
the steps call the real model.

    make demo        # or: python examples/support_triage.py
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from tidemill.engine import Engine, ModelChoice, ModelResolver, default_models
from tidemill.llm import Model, ModelRequest, ScriptedModel
from tidemill.types import Message, ToolCall
from tidemill.workspace import Workspace

WORKSPACE = Path(__file__).parent / "workspace"
FLOW = "f/support/triage"
DB = "sqlite:///.tidemill/triage.db"
REAL = {  # the key's variable, the provider resource's type, the model the steps then call
    "OPENAI_API_KEY": ("openai", "openai:gpt-4o-mini"),
    "ANTHROPIC_API_KEY": ("anthropic", "anthropic:claude-haiku-4-5"),
}
TICKET = {
    "customer": "ada@example.com",
    "ticket": "My order A-1001 arrived broken. Can I get my money back?",
}


def agent_script(request: ModelRequest) -> str | Message:
    """The offline agent: decides its next move from the last message."""
    last = request.messages[-1]
    if last.role == "user":
        return Message.assistant(
            "Let me look that order up.",
            tool_calls=(ToolCall(name="lookup_order", arguments={"order_id": "A-1001"}),),
        )
    if last.name == "lookup_order":
        order = json.loads(last.content)
        return Message.assistant(
            f"The {order['item']} {order['status']}; I will refund it in full.",
            tool_calls=(
                ToolCall(
                    name="issue_refund", arguments={"order_id": "A-1001", "amount": order["paid"]}
                ),
            ),
        )
    return (
        f"We are sorry your grinder arrived broken: {last.content}. "
        "The money is on its way back to you."
    )


def offline(choice: ModelChoice) -> Model:
    """Scripted models, one per step."""
    if choice.step_id == "classify":
        return ScriptedModel(['{"category": "refund", "urgency": "high"}'], model_name="scripted")
    return ScriptedModel(handler=agent_script, model_name="scripted")


def real(spec: str) -> ModelResolver:
    """The steps name the offline model `fake`: with a key, call `spec` instead."""

    def build(choice: ModelChoice) -> Model:
        return default_models(dataclasses.replace(choice, spec=spec))

    return build


def deploy(ws: Workspace) -> tuple[ModelResolver, str]:
    """Push examples/workspace; with an API key set, point f/ai/llm at that provider."""
    plan = ws.push(WORKSPACE, message="support triage demo")
    counts = ", ".join(f"{n} {what}" for what, n in plan.counts().items())
    print(f"Pushed examples/workspace: {counts}.")
    for env, (kind, spec) in REAL.items():
        if key := os.environ.get(env):
            # The key lives in a secret variable (encrypted at rest); the resource names it.
            ws.write("f/ai/llm_key", "variable", key, secret=True, summary=f"The {env}")
            value = {"api_key": "$var:f/ai/llm_key"}
            ws.write("f/ai/llm", "resource", value, resource_type=kind, message=f"use {kind}")
            return real(spec), f"{spec}, its key from {env} in f/ai/llm_key"
    return offline, "Tidemill's offline scripted models (no API key is set)"


def main() -> None:
    with Workspace(DB) as ws:
        models, label = deploy(ws)
        flow = ws.get(FLOW)
        print(f"Flow {FLOW} (version {flow.version}): {flow.summary}")
        print(f"Models: {label}\n")

    with Engine(DB) as engine, Workspace(DB) as ws, engine.worker(concurrency=4, models=models):
        run = engine.submit_path(ws, FLOW, TICKET)
        print(f"Submitted run {run.id} of {FLOW}, as {run.info().run_as}.")
        while not (pending := engine.approvals(run.id)):
            if run.info().done:
                raise SystemExit(f"the run ended without asking for approval: {run.status}")
            time.sleep(0.05)
        approval = pending[0]
        details = approval.details or {}
        print(
            f"The run is {run.status}: the agent wants to call {details.get('tool')}"
            f"({json.dumps(details.get('arguments'))})"
        )
        command = [sys.executable, "-m", "tidemill.cli", "approvals", "approve", approval.id,
                   "--db", DB, "--as", "demo", "--comment", "broken on arrival"]  # fmt: skip
        print("Approving it from the command line:")
        print("  $ tidemill approvals approve " + approval.id + f" --db {DB} --as demo")
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        print("  " + (done.stdout or done.stderr).strip().replace("\n", "\n  "))
        result = run.wait(timeout=300)

        print("\nSteps:")
        for job in engine.jobs(run.id):
            took = (job.finished_at or 0) - (job.started_at or job.created_at)
            where = "" if job.run_id == run.id else "  (a child run of a tool call)"
            print(f"  {job.step_id:9} attempt {job.attempt}  {job.status:9} {took:6.2f} s{where}")
        print("\nThe agent's transcript:")
        for message in engine.transcript(run.id, "answer"):
            calls = ", ".join(f"{c.name}({json.dumps(c.arguments)})" for c in message.tool_calls)
            text = message.content or ""
            print(f"  {message.role.value:9} {text[:120]}{' -> ' + calls if calls else ''}")
        usage = engine.usage(run.id)
        tokens_in = sum(u["input_tokens"] for u in usage)
        tokens_out = sum(u["output_tokens"] for u in usage)
        costs = [u["cost_usd"] for u in usage if u["cost_usd"] is not None]
        cost = f"${sum(costs):.4f}" if costs else "unpriced"
        if models is offline:
            cost += " (scripted models are free)"
        print(f"\nUsage: {len(usage)} model calls, {tokens_in} input + {tokens_out} output "
              f"tokens, cost {cost}")  # fmt: skip
        print(f"\nResult ({run.status}):")
        print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
