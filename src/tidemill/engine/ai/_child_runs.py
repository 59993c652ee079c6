"""Child runs of tool calls: an agent step waits for the runs its `flow` and `agent` tools started.

A call of a `flow` or `agent` tool runs as a child run of the agent step's
job, whose id is derived from the call's idempotency key (run, step, call).
The step does not hold a worker while the child runs: it parks (`ChildWait`),
and the child's end queues it again. Whatever attempt of the step calls the
tool next finds the child by its id, and its result, instead of starting a
second one.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any

from tidemill.flows import Flow

__all__ = [
    "ChildRequest",
    "ChildWait",
    "child_run_id",
    "is_tool_child",
    "own_path",
    "tool_part",
]

_NAMESPACE = uuid.UUID("6f1d9a52-6a3e-4b1e-9a57-0c1e5d7b9f21")
"""The namespace of derived child-run ids (any fixed UUID; never change it)."""

_TOOL = "tool:"


def child_run_id(key: str) -> str:
    """The id of the child run a tool call starts: the same for every attempt of the call.

    Examples:
        >>> child_run_id("r1:agent:call_1") == child_run_id("r1:agent:call_1")
        True
        >>> child_run_id("r1:agent:call_1") == child_run_id("r1:agent:call_2")
        False
    """
    return str(uuid.uuid5(_NAMESPACE, key))


def tool_part(tool: str, call_id: str) -> str:
    """The scope part of a tool call's child run.

    Examples:
        >>> tool_part("lookup", "c1")
        'tool:lookup:c1'
    """
    return f"{_TOOL}{tool}:{call_id}"


def own_path(path: list[list[str]]) -> list[list[str]]:
    """A scope path within the run's own flow: what follows its last tool call part.

    A tool call's child run executes another flow (its own digest), so the
    path to it from the top says where it was called from, not where its
    steps are.

    Examples:
        >>> own_path([["each", "body"], ["agent", "tool:lookup:c1"], ["pick", "case:0"]])
        [['pick', 'case:0']]
        >>> own_path([["each", "body"]])
        [['each', 'body']]
    """
    cut = max((i + 1 for i, (_s, part) in enumerate(path) if part.startswith(_TOOL)), default=0)
    return path[cut:]


def is_tool_child(scope: str) -> bool:
    """True when a run with this stored scope is a tool call's child run.

    Examples:
        >>> is_tool_child('[["agent","tool:lookup:c1"]]'), is_tool_child('[["each","body"]]')
        (True, False)
    """
    if f'"{_TOOL}' not in scope:  # the common case, without parsing
        return False
    path = json.loads(scope)
    return bool(path) and str(path[-1][1]).startswith(_TOOL)


@dataclass(frozen=True, slots=True)
class ChildRequest:
    """A child run a tool call needs: started unless it exists, then waited for.

    Attributes:
        run_id: Its derived id (`child_run_id`).
        tool: The tool's name.
        call_id: The model's id of the call.
        flow: The flow the child runs.
        digest: The flow's digest.
        body: The flow's JSON, stored as its definition.
        flow_input: The child's `flow_input`.
    """

    run_id: str
    tool: str
    call_id: str
    flow: Flow
    digest: str
    body: str
    flow_input: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ChildWait:
    """An agent step waits for the child runs of its tool calls.

    The worker records it in one transaction: what the step spent and
    printed so far, the job parked as `waiting`, and each requested child
    started (unless it exists). When the last of the job's children ends,
    the job is queued again and the agent resumes: its tools then find
    their children finished.
    """

    requests: tuple[ChildRequest, ...]
    usage: tuple[dict[str, Any], ...] = ()
    logs: tuple[tuple[str, str], ...] = ()
