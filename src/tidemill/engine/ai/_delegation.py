"""The `delegate` tool of an `ai_agent` step with specialists: bounded delegation.

The model calls `delegate` with tasks, and nothing else: `[{id, specialist,
prompt}]`. The call is admitted whole or not at all (see `_admission`);
then each task runs a specialist's agent (see `_specialist`), at most
`delegation.max_concurrency` at once, and the call's result lists the tasks'
entries in the order the model gave them, however they finished.

A specialist's agent sees only its task's prompt, and in its system prompt
its lineage (`<step>/<task id>/...`): never the delegating conversation. Its
tools are exactly those its delegating agent has, it lists, and
`delegation.allow` lists. Its model calls are usage records of the step,
named after it, and what it spends counts against its delegating agent's
bounds. A specialist with specialists of its own gets a `delegate` tool too,
one level deeper.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from tidemill.agents import AgentRuntime, Delegation, OutputSpec, UsageLimits
from tidemill.agents.checkpoint import Checkpointer
from tidemill.engine._journal import Journal
from tidemill.engine._models import ModelChoice, ModelResolver
from tidemill.engine.ai._admission import TASK_ID, Task, admit, bounds, remaining
from tidemill.engine.ai._specialist import failed_entry, run_task, task_thread
from tidemill.engine.ai._usage import MeteredModel
from tidemill.flows._ai import AgentDelegation, Specialist
from tidemill.flows._nesting import AgentToolSpec, AIAgent
from tidemill.llm import Model, ModelSettings
from tidemill.tools import Tool, ToolContext, ToolReturn
from tidemill.types import Usage

__all__ = [
    "DELEGATE",
    "ONE_PER_TURN",
    "DelegateTool",
    "Team",
    "delegate_parameters",
    "step_delegate",
]

DELEGATE = "delegate"
"""The delegation tool's name."""

ONE_PER_TURN = Delegation(max_fan_out=1)
"""An agent with a `delegate` tool may call it once per model turn (`max_fanout` tasks)."""


def delegate_parameters() -> dict[str, Any]:
    """The `delegate` tool's arguments: the tasks, each an id, a specialist and a prompt.

    Examples:
        >>> sorted(delegate_parameters()["properties"]["tasks"]["items"]["properties"])
        ['id', 'prompt', 'specialist']
    """
    task = {
        "type": "object",
        "properties": {
            "id": {
                "type": "string",
                "pattern": TASK_ID,
                "description": "Your id for the task, unique in this call.",
            },
            "specialist": {"type": "string", "description": "Who does it, by name."},
            "prompt": {
                "type": "string",
                "minLength": 1,
                "description": "The complete task: the specialist sees nothing else.",
            },
        },
        "required": ["id", "specialist", "prompt"],
        "additionalProperties": False,
    }
    return {
        "type": "object",
        "properties": {"tasks": {"type": "array", "minItems": 1, "items": task}},
        "required": ["tasks"],
        "additionalProperties": False,
    }


def _description(specialists: Sequence[Specialist], policy: AgentDelegation) -> str:
    roster = "\n".join(f"- {s.name}: {s.description or 'a specialist'}" for s in specialists)
    return (
        f"Delegate tasks to specialists: up to {policy.max_fanout} per call, one call per "
        "turn. Each specialist sees only its task's prompt, never this conversation. "
        "Returns [{id, specialist, ok, result | error}] in your order. Specialists:\n" + roster
    )


def _briefing(specialist: Specialist, task: Task, lineage: str) -> str:
    return (
        f"You are the specialist {specialist.name!r}, working on the delegated task "
        f"{task.id!r} (lineage: {lineage}). Its prompt is all you are given."
    )


def _limits(specialist: Specialist) -> UsageLimits:
    budget = specialist.budget
    return UsageLimits(
        requests=budget.max_requests,
        tool_calls=budget.max_tool_calls,
        input_tokens=budget.max_input_tokens,
        output_tokens=budget.max_output_tokens,
        total_tokens=budget.max_total_tokens,
    )


@dataclass(frozen=True, slots=True)
class Team:
    """What every `delegate` tool of one step execution builds its specialists from.

    Attributes:
        policy: The step's delegation bounds.
        checkpointer: The journal the tasks' threads are kept in.
        models: The (metered) model of a specialist.
        tools: A tool for a specialist, its calls keyed by a delegation scope.
        settings: Model settings for every run (the step's).
    """

    policy: AgentDelegation
    checkpointer: Checkpointer
    models: Callable[[Specialist], Model]
    tools: Callable[[AgentToolSpec, str], Tool]
    settings: ModelSettings


class DelegateTool(Tool):
    """The `delegate` tool of one delegating agent.

    Args:
        team: What its specialists are built from.
        specialists: Its specialists.
        tools: Its own tools, by name (a specialist's are a subset).
        limits: Its bounds, as `_admission.bounds` gives them.
        depth: Its depth: 0 for the step's agent, 1 for its specialists, ...
        lineage: Its place: the step id, then a task id per level.
        scope: The idempotency scope of its tool calls (empty for the step's agent).
    """

    delegates = True

    def __init__(
        self,
        team: Team,
        specialists: Sequence[Specialist],
        tools: Mapping[str, AgentToolSpec],
        limits: Mapping[str, int],
        *,
        depth: int,
        lineage: str,
        scope: str = "",
    ) -> None:
        super().__init__(
            name=DELEGATE,
            description=_description(specialists, team.policy),
            parameters=delegate_parameters(),
        )
        self._team = team
        self._specialists = {specialist.name: specialist for specialist in specialists}
        self._tools = dict(tools)
        self._limits = dict(limits)
        self._depth, self._lineage, self._scope = depth, lineage, scope
        self._gate = asyncio.Semaphore(team.policy.max_concurrency)

    async def acall(self, arguments: dict[str, Any], context: ToolContext) -> object:
        """Admit the tasks, run them within the bounds, and list their entries in order."""
        tasks = [Task.of(item) for item in arguments["tasks"]]
        state = (await Journal.read(self._team.checkpointer, context.thread_id)).state
        problems = admit(
            tasks,
            self._specialists,
            self._team.policy,
            depth=self._depth,
            left=remaining(self._limits, state),
        )
        if problems:
            return ToolReturn(
                "Not delegated, no task was started: " + "; ".join(problems) + ".", is_error=True
            )
        done = await asyncio.gather(*(self._one(task, context) for task in tasks))
        return ToolReturn(
            [entry for entry, _, _ in done],
            usage=Usage.total(usage for _, usage, _ in done),
            tool_calls=sum(calls for _, _, calls in done),
        )

    async def _one(self, task: Task, context: ToolContext) -> tuple[dict[str, Any], Usage, int]:
        async with self._gate:
            specialist = self._specialists[task.specialist]
            scope = ":".join(part for part in (self._scope, context.call_id, task.id) if part)
            lineage = f"{self._lineage}/{task.id}"
            try:
                runtime = self._runtime(specialist, task, scope, lineage)
            except Exception as exc:  # a model the worker cannot build, say
                message = getattr(exc, "message", str(exc))
                error = {"type": type(exc).__name__, "message": message}
                return failed_entry(task, error), Usage(), 0
            try:
                thread = task_thread(context.thread_id, context.call_id, task.id)
                return await run_task(
                    runtime, task, thread, self._team.checkpointer, self._team.settings
                )
            finally:
                runtime.close()

    def _runtime(
        self, specialist: Specialist, task: Task, scope: str, lineage: str
    ) -> AgentRuntime:
        team = self._team
        allowed = set(team.policy.allow)
        own = {
            name: self._tools[name]
            for name in specialist.tools
            if name in self._tools and name in allowed
        }
        tools = [team.tools(spec, scope) for spec in own.values()]
        if specialist.specialists:
            tools.append(
                DelegateTool(
                    team,
                    specialist.specialists,
                    own,
                    bounds(specialist.budget),
                    depth=self._depth + 1,
                    lineage=lineage,
                    scope=scope,
                )
            )
        system = "\n\n".join(
            part for part in (specialist.system, _briefing(specialist, task, lineage)) if part
        )
        schema = specialist.output_schema
        return AgentRuntime(
            model=team.models(specialist),
            tools=tools,
            system_prompt=system,
            name=specialist.name,
            max_iterations=specialist.budget.max_iterations,
            checkpointer=team.checkpointer,
            limits=_limits(specialist),
            output=None if schema is None else OutputSpec.of(schema),
            delegation=ONE_PER_TURN,
        )


def step_delegate(
    agent: AIAgent,
    step_id: str,
    checkpointer: Checkpointer,
    *,
    models: ModelResolver,
    metered: MeteredModel,
    tools: Callable[[AgentToolSpec, str], Tool],
    settings: ModelSettings,
    choice: ModelChoice | None = None,
) -> DelegateTool:
    """The `delegate` tool of a step's agent (which has specialists).

    A specialist's model is resolved with its name as `ModelChoice.agent`
    (the step's model, endpoint and key, `choice`, with its resolved
    credentials, unless it names its own), and metered into the step's usage
    records, named after it.
    """
    step_choice = choice or ModelChoice(agent.model, agent.base_url, agent.api_key, step_id)

    def model_of(specialist: Specialist) -> Model:
        name = specialist.name
        if specialist.model is None:
            choice = replace(step_choice, agent=name)
        else:
            own = (specialist.model, specialist.base_url, specialist.api_key)
            choice = ModelChoice(*own, step_id, name)
        return MeteredModel(
            models(choice),
            agent.metadata,
            metered.observe,
            records=metered.records,
            agent=specialist.name,
            hold=metered.hold,
        )

    team = Team(agent.delegation, checkpointer, model_of, tools, settings)
    own = {tool.name: tool for tool in agent.tools}
    return DelegateTool(
        team, agent.specialists, own, bounds(agent.limits), depth=0, lineage=step_id
    )
