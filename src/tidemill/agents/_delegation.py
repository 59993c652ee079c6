"""Specialists: agents a supervisor delegates to, as tools, within bounds.

A specialist is a tool from the supervisor's point of view: `AgentTool`
takes a self-contained task and runs the worker agent on a thread of its own,
so the worker sees only its task, never the supervisor's transcript. The
`Delegation` policy bounds it: how deep delegations may nest, how many one
turn may start, how many run at once, and what each child may spend. What a
child spends rolls up into the parent's usage.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import secrets
import time
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic import JsonValue

from tidemill.agents._limits import UsageLimits
from tidemill.agents.journal import ThreadState
from tidemill.errors import ConfigurationError, TidemillError
from tidemill.tools import Tool, ToolContext, ToolReturn, render_result
from tidemill.types import AgentResponse, AgentStep, Message, Usage

__all__ = [
    "ROUTING_PROMPT",
    "AgentTool",
    "Delegation",
    "Worker",
    "broadcast",
    "delegate_broadcast",
    "delegate_pipeline",
    "first_line",
    "pipeline",
    "roster",
    "with_roster",
]

_log = logging.getLogger("tidemill.agents")

ROUTING_PROMPT = (
    "You lead a team of specialists. Delegate work by calling a specialist's tool with "
    "a complete, self-contained task: they cannot see this conversation. Specialists:\n{roster}"
)
"""A supervisor's routing instructions; `{roster}` becomes one line per specialist."""

# How many more levels of delegation the current run may start; None when unbounded.
_LEVELS_LEFT: contextvars.ContextVar[int | None] = contextvars.ContextVar(
    "tidemill_delegation_levels_left", default=None
)


class Worker(Protocol):
    """What can be a specialist: an `AgentBuilder`, an `AgentRuntime`, or alike."""

    async def arun(
        self,
        prompt: str,
        *,
        thread_id: str | None = None,
        max_iterations: int | None = None,
        limits: UsageLimits | None = None,
        deps: object = None,
    ) -> AgentResponse:
        """Run on a task; `deps` for its tools, as in `AgentRuntime.arun`."""
        ...

    async def astate(self, thread_id: str) -> ThreadState | None:
        """A thread's state, to find a delegation that already ran."""
        ...


@dataclass(frozen=True)
class Delegation:
    """Bounds on delegation to specialists.

    Args:
        max_depth: How deep delegations may nest (a specialist that delegates
            in turn counts one more level).
        max_fan_out: Delegations one model turn may start; the rest are
            refused with an error the model sees.
        max_concurrency: Children running at once, across the supervisor.
        child_limits: Usage limits for each child run; a child's own limits
            apply when this is None.
    """

    max_depth: int = 3
    """How deep delegations may nest."""
    max_fan_out: int = 4
    """Delegations one model turn may start; the rest are refused."""
    max_concurrency: int = 4
    """Children running at once, across the supervisor."""
    child_limits: UsageLimits | None = None
    """Usage limits for each child run; None: each child's own limits."""

    def __post_init__(self) -> None:
        for name in ("max_depth", "max_fan_out", "max_concurrency"):
            if getattr(self, name) < 1:
                raise ConfigurationError(f"Delegation {name} must be at least 1.")

    def describe(self) -> dict[str, JsonValue]:
        """The bounds, JSON-safe."""
        return {
            "max_depth": self.max_depth,
            "max_fan_out": self.max_fan_out,
            "max_concurrency": self.max_concurrency,
            "child_limits": self.child_limits.describe() if self.child_limits else None,
        }


class AgentTool(Tool):
    """A specialist as a tool: a task in, the worker's answer out.

    The child runs on the thread `{parent thread}:{name}:{call id}`, so a call
    re-run after a crash finds the child's finished answer instead of running
    it again. It sees only its task, never the supervisor's transcript; its
    tools get the supervisor's run's `deps`.

    Args:
        worker: The specialist agent.
        name: The tool name the supervisor calls it by.
        description: What the specialist is good at; the supervisor routes on
            it. Without one, the worker's own description (`describe()`'s
            `"description"`: its `.description()` or its system prompt's first line).
        delegation: The bounds shared by the supervisor's specialists.

    Examples:
        >>> import asyncio
        >>> from tidemill import agent
        >>> from tidemill.tools import ToolContext
        >>> helper = AgentTool(agent().llm("fake", responses=["done"]), name="helper",
        ...                    description="Does small jobs.")
        >>> result = asyncio.run(helper.acall({"task": "tidy up"},
        ...                      ToolContext(thread_id="t", call_id="c1", tool_name="helper")))
        >>> result.value, result.usage.requests
        ('done', 1)
    """

    delegates = True
    """True: calling it runs the specialist, within the delegation bounds."""

    def __init__(
        self,
        worker: Worker,
        *,
        name: str,
        description: str = "",
        delegation: Delegation | None = None,
    ) -> None:
        if not callable(getattr(worker, "arun", None)) or not callable(
            getattr(worker, "astate", None)
        ):
            raise ConfigurationError(
                f"Cannot use {type(worker).__name__} as the {name!r} specialist: "
                "it has no arun() and astate().",
                hint="Pass an agent builder (agent()...), an AgentRuntime, or an object "
                "with async arun(task, ...) and astate(thread_id).",
            )
        super().__init__(
            name=name,
            description=description or own_description(worker, name),
            parameters={
                "type": "object",
                "properties": {
                    "task": {
                        "type": "string",
                        "description": "A complete, self-contained description of the work. "
                        "The specialist cannot see this conversation.",
                    }
                },
                "required": ["task"],
                "additionalProperties": False,
            },
        )
        self.worker = worker
        self.delegation = delegation or Delegation()
        self._gates: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = (
            weakref.WeakKeyDictionary()
        )

    def native(self) -> Worker:
        """Return the wrapped worker: the specialist agent itself."""
        return self.worker

    async def acall(self, arguments: dict[str, Any], context: ToolContext) -> object:
        """Run the worker on the task, within the delegation bounds."""
        task = str(arguments.get("task", "")).strip()
        if not task:
            return ToolReturn("No task was given: describe the work in `task`.", is_error=True)
        # The strictest bound of every supervisor above this one applies.
        inherited = _LEVELS_LEFT.get()
        left = self.delegation.max_depth if inherited is None else inherited
        left = min(left, self.delegation.max_depth)
        if left < 1:
            return ToolReturn(
                "Not run: delegations may not nest any deeper here. Do this part yourself.",
                is_error=True,
            )
        thread_id = f"{context.thread_id}:{self.name}:{context.call_id}"
        token = _LEVELS_LEFT.set(left - 1)
        try:
            async with self._gate():
                return await self._run(task, thread_id, context.deps)
        finally:
            _LEVELS_LEFT.reset(token)

    async def _run(self, task: str, thread_id: str, deps: object) -> ToolReturn:
        earlier = await self.worker.astate(thread_id)
        if earlier is not None and earlier.status == "finished":
            return ToolReturn(
                _text(earlier.output), usage=earlier.usage, tool_calls=earlier.tool_calls
            )
        if earlier is not None and earlier.status != "new":
            return ToolReturn(
                f"The {self.name!r} specialist's earlier run on thread {thread_id!r} "
                f"is {earlier.status}; it cannot be run again from here.",
                usage=earlier.usage,
                is_error=True,
                tool_calls=earlier.tool_calls,
            )
        try:
            response = await self.worker.arun(
                task, thread_id=thread_id, limits=self.delegation.child_limits, deps=deps
            )
        except TidemillError as exc:
            # A provider's failure too: the supervisor sees it and can route elsewhere.
            partial = getattr(exc, "response", None)
            usage = partial.usage if isinstance(partial, AgentResponse) else Usage()
            return ToolReturn(
                f"The {self.name!r} specialist failed: {exc.message}",
                usage=usage,
                is_error=True,
                tool_calls=await self._tool_calls(thread_id),
            )
        return ToolReturn(
            _text(response.output),
            usage=response.usage,
            tool_calls=await self._tool_calls(thread_id),
        )

    async def _tool_calls(self, thread_id: str) -> int:
        """The tool calls the specialist's thread made: they count as its supervisor's too."""
        state = await self.worker.astate(thread_id)
        return 0 if state is None else state.tool_calls

    def _gate(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        gate = self._gates.get(loop)
        if gate is None:
            gate = self._gates[loop] = asyncio.Semaphore(self.delegation.max_concurrency)
        return gate


def _text(output: object) -> str:
    return render_result(output)


async def broadcast(
    specialists: Mapping[str, Worker],
    task: str,
    *,
    max_concurrency: int = 4,
    limits: UsageLimits | None = None,
    deps: object = None,
) -> dict[str, AgentResponse]:
    """Run every specialist on the same task, concurrently.

    One specialist failing (any exception but a cancellation) does not lose
    the others' work: its entry is an `AgentResponse` whose output says what
    went wrong, with `metadata["error"]` set to the exception's type.
    `limits` bounds each specialist's run, as `Delegation.child_limits`
    bounds a delegated one; `deps` goes to each.
    """
    gate = asyncio.Semaphore(max_concurrency)

    async def one(name: str, worker: Worker) -> AgentResponse:
        async with gate:
            try:
                return await worker.arun(task, limits=limits, deps=deps)
            except Exception as exc:
                if not isinstance(exc, TidemillError):
                    _log.warning("specialist %r failed in a broadcast", name, exc_info=exc)
                partial = getattr(exc, "response", None)
                message = exc.message if isinstance(exc, TidemillError) else str(exc)
                return AgentResponse(
                    output=f"{name} failed: {message}",
                    usage=partial.usage if isinstance(partial, AgentResponse) else Usage(),
                    thread_id=partial.thread_id if isinstance(partial, AgentResponse) else "",
                    metadata={"error": type(exc).__name__, "agent": name},
                )

    names = list(specialists)
    results = await asyncio.gather(*(one(n, specialists[n]) for n in names))
    return dict(zip(names, results, strict=True))


async def pipeline(
    specialists: Mapping[str, Worker],
    task: str,
    order: Sequence[str],
    *,
    limits: UsageLimits | None = None,
    deps: object = None,
) -> AgentResponse:
    """Chain specialists: each gets the previous one's answer as its task.

    Returns the last answer, with one step per stage and the usage of all.
    `limits` bounds each stage's run, as `Delegation.child_limits` bounds a
    delegated one; `deps` goes to each.

    Raises:
        ConfigurationError: When `order` names an unknown specialist.
    """
    missing = [name for name in order if name not in specialists]
    if missing or not order:
        raise ConfigurationError(
            f"Unknown specialist(s) in the pipeline: {', '.join(missing) or '(none given)'}.",
            hint=f"Known: {', '.join(specialists) or 'none'}.",
        )
    started = time.perf_counter()
    current = task
    steps: list[AgentStep] = []
    messages = [Message.user(task)]
    usage = Usage()
    output: object = task
    threads: list[JsonValue] = []
    for index, name in enumerate(order):
        response = await specialists[name].arun(current, limits=limits, deps=deps)
        threads.append(response.thread_id)
        output, current = response.output, _text(response.output)
        usage = usage + response.usage
        messages.append(Message.assistant(current, name=name))
        steps.append(AgentStep(index=index, thought=current, usage=response.usage, note=name))
    return AgentResponse(
        output=output,
        messages=messages,
        steps=steps,
        usage=usage,
        latency_ms=(time.perf_counter() - started) * 1000,
        thread_id="pipeline_" + secrets.token_hex(12),
        metadata={"pattern": "pipeline", "order": list(order), "threads": threads},
    )


def roster(specialists: Sequence[AgentTool], prompt: str = ROUTING_PROMPT) -> str:
    """A supervisor's instructions: `prompt` with `{roster}` replaced by its specialists.

    Examples:
        >>> from tidemill import agent
        >>> team = [AgentTool(agent().llm("fake"), name="a", description="Does A.")]
        >>> roster(team, "Route to: {roster}")
        'Route to: - a: Does A.'
    """
    lines = "\n".join(f"- {tool.name}: {tool.description}" for tool in specialists)
    return prompt.replace("{roster}", lines)


def with_roster(
    system_prompt: str | None,
    specialists: Mapping[str, AgentTool],
    prompt: str = ROUTING_PROMPT,
) -> str | None:
    """The system prompt each model call of a supervisor gets: its own, then the roster."""
    if not specialists:
        return system_prompt
    parts = (system_prompt, roster(list(specialists.values()), prompt))
    return "\n\n".join(p for p in parts if p)


async def delegate_broadcast(
    specialists: Mapping[str, AgentTool], delegation: Delegation, task: str, *, deps: object
) -> dict[str, AgentResponse]:
    """A supervisor's `broadcast` to its specialists, within its `delegation`'s bounds.

    Raises:
        ConfigurationError: When there are no specialists.
    """
    return await broadcast(
        _workers(specialists),
        task,
        max_concurrency=delegation.max_concurrency,
        limits=delegation.child_limits,
        deps=deps,
    )


async def delegate_pipeline(
    specialists: Mapping[str, AgentTool],
    delegation: Delegation,
    task: str,
    order: Sequence[str],
    *,
    deps: object,
) -> AgentResponse:
    """A supervisor's `pipeline` through its specialists, with its `delegation`'s child limits.

    Raises:
        ConfigurationError: When there are no specialists or `order` names an unknown one.
    """
    return await pipeline(
        _workers(specialists), task, order, limits=delegation.child_limits, deps=deps
    )


def _workers(specialists: Mapping[str, AgentTool]) -> dict[str, Worker]:
    """The workers behind a supervisor's specialists, by name.

    Raises:
        ConfigurationError: When there are no specialists.
    """
    if not specialists:
        raise ConfigurationError(
            "This agent has no specialists.",
            hint="Add them with .agent('name', worker, 'what it is good at').",
        )
    return {name: tool.worker for name, tool in specialists.items()}


def first_line(text: str | None, *, limit: int = 200) -> str | None:
    r"""The first non-empty line of `text`, cut to `limit` characters; None for none.

    Examples:
        >>> first_line("\nYou are a careful editor.\nFix typos.")
        'You are a careful editor.'
    """
    for line in (text or "").splitlines():
        if line.strip():
            line = line.strip()
            return line if len(line) <= limit else line[: limit - 1].rstrip() + "…"
    return None


def own_description(worker: object, name: str) -> str:
    """What a worker says it is good at, or a generic line naming it."""
    describe = getattr(worker, "describe", None)
    if callable(describe):
        try:
            described = describe()
        except TidemillError:  # a builder with no model yet cannot describe itself
            described = None
        if isinstance(described, Mapping):
            text = described.get("description")
            if isinstance(text, str) and text.strip():
                return text.strip()
    return f"Delegate a task to the {name!r} specialist."
