"""Admitting a delegation: every check made before any task of it starts.

The model's `delegate` call names tasks: an id, a declared specialist, a
prompt. The call is admitted whole or not at all: too many tasks, nesting
deeper than allowed, repeated ids, an undeclared specialist, or budgets that
together need more than the delegating agent has left each refuse it, and
no task starts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tidemill.agents.journal import ThreadState
from tidemill.flows._ai import AgentDelegation, AgentLimits, Specialist, SpecialistBudget

__all__ = ["BOUNDS", "TASK_ID", "Task", "admit", "bounds", "remaining"]

BOUNDS = (
    "max_requests",
    "max_tool_calls",
    "max_input_tokens",
    "max_output_tokens",
    "max_total_tokens",
)
"""The bounds a task's budget is checked against: the delegating agent's."""

TASK_ID = r"^[A-Za-z0-9_.-]{1,64}$"
"""What a task id may be (it becomes part of journal threads and idempotency keys)."""


@dataclass(frozen=True, slots=True)
class Task:
    """One task of a delegation, as the model gave it.

    Examples:
        >>> Task.of({"id": "t1", "specialist": "researcher", "prompt": "Find X."})
        Task(id='t1', specialist='researcher', prompt='Find X.')
    """

    id: str
    specialist: str
    prompt: str

    @classmethod
    def of(cls, item: Mapping[str, Any]) -> Task:
        """A task from the (validated) arguments of a `delegate` call."""
        return cls(str(item["id"]), str(item["specialist"]), str(item["prompt"]))


def bounds(source: AgentLimits | SpecialistBudget) -> dict[str, int]:
    """The bounds an agent's limits (or a specialist's budget) set.

    Examples:
        >>> bounds(SpecialistBudget(max_requests=3, max_iterations=4))
        {'max_requests': 3}
    """
    return {name: value for name in BOUNDS if (value := getattr(source, name)) is not None}


def remaining(limits: Mapping[str, int], state: ThreadState) -> dict[str, int]:
    """What an agent whose thread stands at `state` has left of each of its bounds.

    Tool calls are those its run started (the `delegate` call too) and those
    its earlier delegations' tasks made; requests and tokens are its run's
    usage, what earlier delegations spent included.

    Examples:
        >>> state = ThreadState("t")
        >>> state.tool_calls = 1
        >>> remaining({"max_tool_calls": 5, "max_total_tokens": 100}, state)
        {'max_tool_calls': 4, 'max_total_tokens': 100}
    """
    usage = state.usage
    spent = {
        "max_requests": usage.requests,
        "max_tool_calls": state.tool_calls,
        "max_input_tokens": usage.input_tokens,
        "max_output_tokens": usage.output_tokens,
        "max_total_tokens": usage.total_tokens,
    }
    return {name: max(limit - spent[name], 0) for name, limit in limits.items()}


def admit(
    tasks: Sequence[Task],
    specialists: Mapping[str, Specialist],
    policy: AgentDelegation,
    *,
    depth: int,
    left: Mapping[str, int],
) -> list[str]:
    """Why a delegation may not start, or `[]` when all its tasks may.

    Args:
        tasks: The tasks, in the model's order.
        specialists: The delegating agent's specialists, by name.
        policy: The step's delegation bounds.
        depth: The delegating agent's depth (the step's agent is 0).
        left: What the delegating agent has left of its bounds (see `remaining`).

    Examples:
        >>> team = {"writer": Specialist(name="writer", budget={"max_requests": 2})}
        >>> tasks = [Task("a", "writer", "..."), Task("a", "poet", "...")]
        >>> for problem in admit(tasks, team, AgentDelegation(), depth=0,
        ...                      left={"max_requests": 1}):
        ...     print(problem)
        the task id 'a' is used more than once
        'poet' is not a declared specialist (declared: writer)
        the tasks' budgets need 2 max_requests together, but 1 remain
    """
    problems: list[str] = []
    if len(tasks) > policy.max_fanout:
        problems.append(f"{len(tasks)} tasks, more than max_fanout {policy.max_fanout}")
    if depth + 1 > policy.max_depth:
        problems.append(
            f"delegating from here would nest {depth + 1} deep, beyond max_depth {policy.max_depth}"
        )
    ids = [task.id for task in tasks]
    problems += [
        f"the task id {task_id!r} is used more than once"
        for task_id in dict.fromkeys(ids)
        if ids.count(task_id) > 1
    ]
    known = ", ".join(specialists) or "none"
    problems += [
        f"{name!r} is not a declared specialist (declared: {known})"
        for name in dict.fromkeys(task.specialist for task in tasks)
        if name not in specialists
    ]
    declared = [specialists[task.specialist] for task in tasks if task.specialist in specialists]
    for name, limit in left.items():
        budgets = [getattr(specialist.budget, name) for specialist in declared]
        if any(budget is None for budget in budgets):
            problems.append(f"a task has no {name} budget, but only {limit} remain")
        elif sum(budgets) > limit:
            problems.append(
                f"the tasks' budgets need {sum(budgets)} {name} together, but {limit} remain"
            )
    return problems
