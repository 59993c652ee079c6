"""Copilot conversations as durable runs: a turn is an engine run, the memory its history.

A conversation is one user's about one flow path. Each turn is a run of a
built-in flow (`turn_flow`) submitted as that user: one `ai_agent` step
whose brain is the copilot's (its instructions, the model given) and whose
tools are the copilot's, run in the worker with `run: in_process`, where
each call is given the run's `ToolRun` (`tidemill.copilot.session_of`
makes the copilot's session of it: the workspace as the user, the engine).
The step's `memory_id` is the conversation's id, so a turn recalls the
turns before it (window memory); its test runs are ordinary `tool_call`
approvals; its events are the run's.

A turn is recorded as a run of the user's own path `u/<user>/copilot`
(`turns_path`), so the user and the workspace's admins see it, and no one
else: its transcript holds the user's drafts.

The conversation read back (`conversation`) is the turns the memory holds
(a turn that failed stored nothing, so the model never sees it) and the
turn still in flight; `forget` drops the memory, and the next turn starts
afresh.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tidemill.copilot._copilot import TOOLS
from tidemill.copilot._prompt import system_prompt
from tidemill.engine import AsyncEngine
from tidemill.engine._memory import RECALL_HEADER
from tidemill.engine._run_pages import run_input, runs_page
from tidemill.errors import RunStateError
from tidemill.flows import Flow
from tidemill.store import RunReach, Tx
from tidemill.tools import FunctionTool
from tidemill.types import Message
from tidemill.workspace import AsyncWorkspace

__all__ = [
    "COPILOT_FLOW",
    "COPILOT_STEP",
    "Conversation",
    "conversation",
    "conversation_id",
    "forget",
    "start_turn",
    "turn_flow",
    "turns_path",
]

COPILOT_FLOW = "copilot"
"""The name of the built-in flow a turn runs (runs are listed under it)."""
COPILOT_STEP = "copilot"
"""The id of its agent step (its transcript: `/api/runs/{id}/steps/copilot/transcript`)."""

_NAMESPACE = uuid.UUID("0b7f2d3e-8c41-5a6e-9f12-4d7c3b9a1e58")
_IN_FLIGHT = ("queued", "running", "waiting")
_MEMORY = 200
"""How many messages of the conversation a turn recalls (100 exchanges)."""


def conversation_id(workspace: str, user: str, flow: str) -> str:
    """The id of `user`'s conversation about `flow`: stable, and its memory's id.

    Examples:
        >>> conversation_id("w", "ada", "f/a/b") == conversation_id("w", "ada", "f/a/b")
        True
        >>> conversation_id("w", "ada", "f/a/b") == conversation_id("w", "bob", "f/a/b")
        False
    """
    return str(uuid.uuid5(_NAMESPACE, f"{workspace}\n{user}\n{flow}"))


def turns_path(user: str) -> str:
    """The path a user's turns are recorded under: their own, so no one else reads them.

    Examples:
        >>> turns_path("ada")
        'u/ada/copilot'
    """
    return f"u/{user}/copilot"


def _reference(tool: Any) -> str:
    assert isinstance(tool, FunctionTool)
    function = tool.function
    return f"{function.__module__}:{function.__name__}"


def turn_flow(model: str, flow: str, *, max_iterations: int = 40) -> Flow:
    """The built-in flow one turn runs: the copilot as an `ai_agent` step.

    Its input is `{flow, message, conversation}`; the test-run tools wait
    for approval (`requires_approval`), as with `Copilot`.

    Examples:
        >>> step = turn_flow("fake", "f/billing/invoice").steps[0]
        >>> step.id, step.ai_agent.memory.kind, len(step.ai_agent.tools)
        ('copilot', 'window', 13)
        >>> [t.name for t in step.ai_agent.tools if t.requires_approval]
        ['test_run_flow', 'test_run_step']
    """
    tools = [
        {
            "name": tool.name,
            "description": tool.description,
            "function": _reference(tool),
            "run": "in_process",
            "requires_approval": tool.requires_approval,
        }
        for tool in TOOLS
    ]
    text = {"type": "string", "minLength": 1}
    return Flow.model_validate(
        {
            "name": COPILOT_FLOW,
            "summary": f"A copilot turn about {flow}",
            # Two turns of one conversation never run at once, even if both were let in.
            "concurrency": {"limit": 1, "key": "flow_input.conversation"},
            "inputs": {
                "type": "object",
                "properties": {"flow": text, "message": text, "conversation": text},
                "required": ["flow", "message", "conversation"],
            },
            "steps": [
                {
                    "id": COPILOT_STEP,
                    "ai_agent": {
                        "model": model,
                        "system": system_prompt(flow),
                        "tools": tools,
                        "max_iterations": max_iterations,
                        "memory": {"kind": "window", "context_length": _MEMORY},
                    },
                    "inputs": {
                        "user_message": {"expr": "flow_input.message"},
                        "memory_id": {"expr": "flow_input.conversation"},
                    },
                }
            ],
        }
    )


@dataclass(frozen=True, slots=True)
class Conversation:
    """A conversation as read back: its turns' messages, runs and pending approvals."""

    id: str
    flow: str
    messages: list[Message] = field(default_factory=list)
    """The user's messages, the copilot's tool calls and their results, its answers."""
    runs: list[str] = field(default_factory=list)
    """The turns' runs, oldest first (the one in flight last)."""
    running: str | None = None
    """The run of the turn in flight (queued, running or waiting), or None."""
    pending_approvals: list[str] = field(default_factory=list)
    """The approvals the turn in flight waits for (`/api/approvals/{id}`)."""


async def _in_flight(engine: AsyncEngine, ws: AsyncWorkspace, cid: str) -> str | None:
    reach = RunReach(ws.name, run_as=ws.user)
    for status in _IN_FLIGHT:
        for info, _ in await runs_page(engine, reach, status=status, flow=COPILOT_FLOW, limit=50):
            if info.run_as == ws.user and (info.source or {}).get("conversation") == cid:
                return info.id
    return None


def _turn_messages(transcript: Sequence[Message]) -> list[Message]:
    """A turn's own messages: without the instructions and the recalled earlier turns."""
    recalled = [m for m in transcript if m.role == "user" and m.content.startswith(RECALL_HEADER)]
    return [m for m in transcript if m.role != "system" and m not in recalled]


async def conversation(engine: AsyncEngine, ws: AsyncWorkspace, flow: str) -> Conversation:
    """`ws.user`'s conversation about `flow`, as the memory and the turn in flight hold it."""
    cid = conversation_id(ws.name, ws.user, flow)
    rows = await engine.store.transact(lambda tx: _memory_runs(tx, cid))
    running = await _in_flight(engine, ws, cid)
    runs = [*rows, *([running] if running and running not in rows else [])]
    messages: list[Message] = []
    for run_id in runs:
        turn = _turn_messages(await engine.transcript(run_id, COPILOT_STEP))
        if not turn and run_id == running:  # its step has not started: its message so far
            turn = [Message.user(str((await run_input(engine, run_id)).get("message", "")))]
        messages.extend(turn)
    pending = [] if running is None else [row.id for row in await engine.approvals(running)]
    return Conversation(cid, flow, messages, runs, running, pending)


def _memory_runs(tx: Tx, cid: str) -> list[str]:
    """The runs that wrote the conversation's memory, oldest first."""
    found: list[str] = []
    for run_id in tx.agent_memory_runs(cid, COPILOT_STEP):
        if run_id not in found:
            found.append(run_id)
    return found


async def start_turn(
    engine: AsyncEngine, ws: AsyncWorkspace, flow: str, message: str, *, model: str
) -> tuple[str, str]:
    """Start a turn of `ws.user`'s conversation about `flow`; its run id and the conversation's.

    Refused while the previous turn is in flight; should two requests pass
    that check at once, the flow's concurrency key (the conversation) still
    runs their turns one after the other.

    Raises:
        RunStateError: The conversation's previous turn is still in flight.
        FlowValidationError: `model` is not a model spec the engine can read.
    """
    cid = conversation_id(ws.name, ws.user, flow)
    running = await _in_flight(engine, ws, cid)
    if running is not None:
        raise RunStateError(
            f"The previous turn of this conversation (run {running}) has not ended yet.",
            hint="Wait for it to answer, or decide the test runs it waits for "
            "(GET /api/approvals), or cancel it (POST /api/runs/{id}/cancel).",
            context={"run_id": running, "conversation": cid},
        )
    # Recorded under the user's own path, so only they (and admins) see the turn.
    source = {
        "workspace": ws.name,
        "path": turns_path(ws.user),
        "copilot": flow,
        "conversation": cid,
    }
    run_id = await engine.submit(
        turn_flow(model, flow),
        {"flow": flow, "message": message, "conversation": cid},
        run_as=ws.user,
        source=source,
    )
    return run_id, cid


async def forget(engine: AsyncEngine, ws: AsyncWorkspace, flow: str) -> int:
    """Forget `ws.user`'s conversation about `flow`: the next turn starts a new one.

    Returns how many messages of its memory were dropped.

    Raises:
        RunStateError: A turn of it is still in flight.
    """
    cid = conversation_id(ws.name, ws.user, flow)
    running = await _in_flight(engine, ws, cid)
    if running is not None:
        raise RunStateError(
            f"A turn of this conversation (run {running}) has not ended yet.",
            hint="Cancel it first (POST /api/runs/{id}/cancel), then forget the conversation.",
            context={"run_id": running, "conversation": cid},
        )
    dropped: int = await engine.store.transact(lambda tx: tx.delete_agent_memory(cid))
    return dropped
