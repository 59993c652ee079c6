"""The `ai_agent` step: an agent run as a durable step of a flow.

`run_ai_agent` is what a worker runs for an `ai_agent` step. The agent is
the agent library's reason/act loop, its journal kept in the store's
database under a thread id derived from the run and the step. This module
sets one execution of the step up: its tools (scripts, child runs, MCP
servers, specialists, `ask_person`), its model (metered; with
`on_exceeded: ask`, budgeted) and its runtime. `AgentStep` (`_agent_step`)
then continues the thread from wherever its journal stands. Its models
stream: their text reaches the run's events as `text_delta` while they
write (`_deltas`), the journal keeps each turn whole.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Any

from tidemill.agents import AgentRuntime, OutputSpec, UsageLimits
from tidemill.engine._events import journal_events
from tidemill.engine._journal import open_journal, thread_id
from tidemill.engine._outcome import Outcome
from tidemill.engine._step_env import ToolRun
from tidemill.engine.ai._action import (
    model_choice,
    render,
    step_error,
    step_settings,
    step_values,
)
from tidemill.engine.ai._agent_step import AgentStep
from tidemill.engine.ai._budget import BudgetModel, extended_duration, extended_limits
from tidemill.engine.ai._child_runs import ChildWait
from tidemill.engine.ai._child_tools import child_tool
from tidemill.engine.ai._delegation import ONE_PER_TURN, step_delegate
from tidemill.engine.ai._deltas import TextDeltas
from tidemill.engine.ai._mcp import mcp_tools
from tidemill.engine.ai._pause import AgentPause
from tidemill.engine.ai._question import ask_tool
from tidemill.engine.ai._tools import ToolSite, pool_tool
from tidemill.engine.ai._usage import MeteredModel
from tidemill.errors import ExpressionError, LeaseLost, MCPConnectionError, TidemillError
from tidemill.llm import Model
from tidemill.tools import Tool
from tidemill.workspace import DEFAULT_WORKSPACE

if TYPE_CHECKING:
    from tidemill.engine._models import ModelChoice
    from tidemill.engine._step_env import StepEnv
    from tidemill.flows import AIAgent, Step
    from tidemill.store import ApprovalRow, Tx

__all__ = ["run_ai_agent"]


def _step_approvals(tx: Tx, *, env: StepEnv, step_id: str) -> list[ApprovalRow]:
    """Every approval the step asked for in this run, whatever the job (a retry is another)."""
    rows = tx.approvals(status=None, root_id=env.run.root_id)
    return [row for row in rows if row.run_id == env.run.id and row.step_id == step_id]


def _limits(agent: AIAgent) -> UsageLimits:
    limits = agent.limits
    if limits.on_exceeded == "ask":  # checked by `BudgetModel`, which asks for more
        return UsageLimits()
    return UsageLimits(
        requests=limits.max_requests,
        tool_calls=limits.max_tool_calls,
        input_tokens=limits.max_input_tokens,
        output_tokens=limits.max_output_tokens,
        total_tokens=limits.max_total_tokens,
    )


async def run_ai_agent(
    step: Step, inputs: dict[str, Any], context: dict[str, Any], env: StepEnv
) -> Outcome | AgentPause | ChildWait:
    """Run (or continue) an `ai_agent` step.

    Returns a succeeded outcome with the final answer (its text, or the
    parsed object with `output_schema`); an `AgentPause` when tool calls
    wait for approval; or a failed outcome: a bound crossed (`LimitExceeded`,
    not retryable), a broken configuration (not retryable), a provider's
    failure (retryable when a later try may pass). Every outcome carries one
    usage record per model call this attempt made, and what the tools printed.
    With `env.metrics`, model and tool calls are counted as they happen, and
    the segment's outcome, duration and any bound crossed when it ends.
    """
    metrics = env.metrics
    if metrics is None:
        return await _run(step, inputs, context, env)
    started = time.perf_counter()
    result: Outcome | AgentPause | ChildWait | None = None
    try:
        result = await _run(step, inputs, context, env)
        return result
    finally:
        metrics.agent_step(result, time.perf_counter() - started)


async def _run(
    step: Step, inputs: dict[str, Any], context: dict[str, Any], env: StepEnv
) -> Outcome | AgentPause | ChildWait:
    agent = step.ai_agent
    assert agent is not None
    if agent.enabled_tools is not None:  # the tools this step may call
        wanted = set(agent.enabled_tools)
        tools_kept = [spec for spec in agent.tools if spec.name in wanted]
        agent = agent.model_copy(update={"tools": tools_kept, "enabled_tools": None})
    values = step_values(inputs, context)
    metrics = env.metrics
    site = ToolSite(
        env.run.id, step.id, env.job.attempt, env.pool, store=env.store,
        resolve=env.resolve, secrets=env.secrets, run=_tool_run(step, env, values),
    )  # fmt: skip
    if metrics is not None:
        site.on_call = metrics.tool_observer([spec.name for spec in agent.tools])
    async with contextlib.AsyncExitStack() as stack:
        try:
            system = render(agent.system, values, field="system") if agent.system else ""
            tools = await _tools(agent, values, site, stack)
            choice = model_choice(agent, step.id, env)
            model = env.models(choice)
        except MCPConnectionError as exc:  # the server may be back on a later try
            return Outcome("failed", error=step_error(exc))
        except (TidemillError, ExpressionError) as exc:
            return Outcome("failed", error=step_error(exc), retryable=False)
        except Exception as exc:
            return Outcome("failed", error=step_error(exc))
        return await _drive(step, agent, inputs, values, env, site, system, tools, model, choice)


def _tool_run(step: Step, env: StepEnv, values: Mapping[str, Any]) -> ToolRun:
    """What the step's in-process tools asking for a `ToolContext` get as its `deps`."""
    run = env.run
    flow_input = values.get("flow_input")
    return ToolRun(
        run.id, run.root_id, step.id, env.job.attempt, run_as=run.run_as,
        workspace_name=str((run.source or {}).get("workspace") or DEFAULT_WORKSPACE),
        flow_input=flow_input if isinstance(flow_input, Mapping) else {},
        engine=env.engine, session=env.workspace,
    )  # fmt: skip


async def _tools(
    agent: AIAgent,
    values: Mapping[str, Any],
    site: ToolSite,
    stack: contextlib.AsyncExitStack,
) -> list[Tool]:
    """The agent's tools, by kind; `mcp` servers stay connected until `stack` closes."""
    tools: list[Tool] = []
    for spec in agent.tools:
        if spec.flow is not None or spec.agent is not None or spec.run == "child":
            tools.append(child_tool(spec, values, site))
        elif spec.mcp is not None:
            tools.extend(await mcp_tools(spec, stack, resolve=site.resolve, secrets=site.secrets))
        else:
            tools.append(pool_tool(spec, values, site))
    if agent.questions is not None:
        tools.append(ask_tool())
    return tools


async def _drive(
    step: Step,
    agent: AIAgent,
    inputs: dict[str, Any],
    values: dict[str, Any],
    env: StepEnv,
    site: ToolSite,
    system: str,
    tools: list[Tool],
    model: Model,
    choice: ModelChoice,
) -> Outcome | AgentPause | ChildWait:
    metrics = env.metrics
    deltas = TextDeltas(env.store, env.run, env.job, env.secrets)  # the text as it comes
    metered = MeteredModel(
        deltas.model(model),
        agent.metadata,
        None if metrics is None else metrics.agent_model_call,
        hold=env.hold,
    )
    output = None if agent.output_schema is None else OutputSpec.of(agent.output_schema)
    thread = thread_id(env.run.id, step.id)
    record = journal_events(env.store, env.run, env.job, thread, env.secrets.mask_value)
    async with open_journal(env.store.url, env.journals, hold=env.hold, on_append=record) as (
        checkpointer
    ):
        if agent.specialists:
            tools.append(
                step_delegate(
                    agent, step.id, checkpointer, models=deltas.resolver(env.models),
                    metered=metered, choice=choice,
                    tools=lambda spec, scope: pool_tool(spec, values, replace(site, scope=scope)),
                    settings=step_settings(agent),
                )
            )  # fmt: skip
        model_for_runtime: Model = metered
        max_duration = agent.limits.max_duration
        if agent.limits.on_exceeded == "ask":
            rows = await env.store.transact(partial(_step_approvals, env=env, step_id=step.id))
            limits = extended_limits(agent, rows)  # granted to any attempt, a retry's too
            max_duration = extended_duration(agent, rows)
            model_for_runtime = BudgetModel(metered, checkpointer, thread, limits)
        try:
            runtime = AgentRuntime(
                model=model_for_runtime,
                tools=tools,
                system_prompt=system or None,
                name=step.id,
                max_iterations=agent.max_iterations,
                checkpointer=checkpointer,
                limits=_limits(agent),
                output=output,
                delegation=ONE_PER_TURN,
            )
        except TidemillError as exc:
            return Outcome("failed", error=step_error(exc), retryable=False)
        run = AgentStep(
            step, agent, env, inputs, thread, runtime, metered, site,
            {tool.name: dict(tool.parameters) for tool in tools}, step_settings(agent),
            max_duration,
        )  # fmt: skip
        try:
            return await run.drive(checkpointer)
        except LeaseLost:
            raise
        except Exception as exc:
            return run.failed(step_error(exc), retryable=True)
        finally:
            await deltas.aclose()
            runtime.close()
