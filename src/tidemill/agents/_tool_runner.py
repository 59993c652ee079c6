"""`ToolRunner`: admitting a turn's tool calls, and running them journal-first."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from tidemill.agents._thread import ThreadWriter
from tidemill.agents.journal import (
    ApprovalRequested,
    JournalEvent,
    ModelTurn,
    ToolFinished,
    ToolStarted,
)
from tidemill.agents.tracing import NullTracer, Span, Tracer
from tidemill.errors import (
    AgentSuspended,
    ConfigurationError,
    ThreadBusy,
    ToolArgumentsError,
    ToolSuspended,
)
from tidemill.llm import Model
from tidemill.tools import Tool, ToolContext, ToolLike, ToolRegistry, ToolReturn
from tidemill.types import (
    ModelResponse,
    StreamEvent,
    ToolCall,
    ToolCallEnd,
    ToolCallStart,
    ToolResult,
    Usage,
)
from tidemill.types._build import validator
from tidemill.types._text import valid_text

__all__ = ["Admission", "ToolRunner", "tool_registry"]

_log = logging.getLogger("tidemill.agents")

# What every iteration builds (see `tidemill.types._build`).
_new_turn = validator(ModelTurn)
_new_result = validator(ToolResult)
_new_finished = validator(ToolFinished)


def tool_registry(model: Model, tools: ToolRegistry | Iterable[ToolLike]) -> ToolRegistry:
    """The registry of an agent's tools (`tools` itself when it is one), checked against `model`.

    Raises:
        ConfigurationError: When there are tools and `model` cannot call tools.
    """
    registry = tools if isinstance(tools, ToolRegistry) else ToolRegistry(tools)
    if len(registry) and not model.supports_tools:
        raise ConfigurationError(
            f"The model {model.model_name!r} cannot call tools, but "
            f"{len(registry)} tool(s) are bound.",
            hint="Use a tool-capable model, or drop the tools.",
        )
    return registry


class Admission(NamedTuple):
    """A fresh turn's calls, sorted (a named tuple: one is made for every turn)."""

    refused: list[ToolResult]
    """Calls that cannot run (unknown tool, bad arguments), with the error the model sees."""
    pending: list[ToolCall]
    """Calls that wait for a person's decision."""
    runnable: list[ToolCall]
    """Calls that may run now."""


@dataclass(frozen=True)
class ToolRunner:
    """Runs an agent's tool calls: validated first, journaled before and after each effect."""

    tools: ToolRegistry
    agent_name: str = "agent"
    parallel: bool = True
    max_parallel: int = 8
    require_approval: bool = False
    max_fan_out: int | None = None
    """At most this many delegations (calls of tools that run an agent) per turn."""
    tracer: Tracer = field(default_factory=NullTracer)

    def admit(self, writer: ThreadWriter, calls: Sequence[ToolCall]) -> Admission:
        """Sort a fresh turn's calls: refused now, awaiting approval, or runnable."""
        refused: list[ToolResult] = []
        pending: list[ToolCall] = []
        runnable: list[ToolCall] = []
        delegated = 0
        for call in calls:
            tool = self.tools.get(call.name)
            refusal = self._refuse(writer, call, tool)
            if refusal is None and tool is not None and tool.delegates:
                delegated += 1
                if self.max_fan_out is not None and delegated > self.max_fan_out:
                    refusal = ToolResult(
                        call_id=call.id,
                        name=call.name,
                        content=f"Not run: at most {self.max_fan_out} delegation(s) per turn. "
                        "Wait for these results, then delegate the rest.",
                        is_error=True,
                    )
            if refusal is not None:
                refused.append(refusal)
                continue
            if self.require_approval or (tool is not None and tool.requires_approval):
                pending.append(call)
            else:
                runnable.append(call)
        return Admission(refused, pending, runnable)

    def admission_events(
        self, response: ModelResponse, admission: Admission, started: set[str]
    ) -> list[JournalEvent]:
        """The turn and the events that record its admission, written as one entry.

        Journal before effect: calls about to run are marked started in the
        turn itself (`ModelTurn.started`); run serially, only the first one.
        """
        runnable = admission.runnable
        ids = tuple(call.id for call in (runnable if self.parallel else runnable[:1]))
        started.update(ids)
        events: list[JournalEvent] = [_new_turn({"response": response, "started": ids})]
        events += [ToolFinished(result=r) for r in admission.refused]
        if admission.pending:
            events.append(ApprovalRequested(calls=tuple(admission.pending)))
        return events

    def _refuse(self, writer: ThreadWriter, call: ToolCall, tool: Tool | None) -> ToolResult | None:
        """The error result for a call that cannot run, or None when it can."""
        if call.raw_arguments is not None:
            problem = (
                f"The arguments of {call.name!r} are not a JSON object: "
                f"{call.raw_arguments[:200]!r}. Send the arguments as one JSON object."
            )
        elif tool is None:
            close = self.tools.suggest(call.name)
            problem = (
                f"There is no tool named {call.name!r}. "
                + (f"Did you mean {' or '.join(map(repr, close))}? " if close else "")
                + f"Available tools: {', '.join(self.tools.names()) or 'none'}."
            )
        else:
            try:
                writer.validated[call.id] = tool.validate(call.arguments)
            except ToolArgumentsError as exc:
                problem = f"{exc.message}. Correct the arguments and call the tool again."
            else:
                return None
        return ToolResult(call_id=call.id, name=call.name, content=problem, is_error=True)

    async def act(
        self,
        writer: ThreadWriter,
        calls: Sequence[ToolCall],
        started: set[str],
        *,
        streaming: bool,
    ) -> AsyncIterator[StreamEvent]:
        """Run calls whose turn was journaled; yield their start and end events.

        Raises:
            AgentSuspended: Calls raised `ToolSuspended`. In parallel, the
                other calls finish first; in sequence, the calls after the
                suspended one do not start.
        """
        if not calls:
            return
        if streaming:
            for call in calls:
                yield ToolCallStart(call=call)
        if not self.parallel or len(calls) == 1:
            for call in calls:
                result = await self.run_one(writer, call, started)
                if streaming:
                    yield ToolCallEnd(result=result)
            return
        await self._mark_started(writer, calls, started)
        limit = asyncio.Semaphore(self.max_parallel)

        async def bounded(call: ToolCall) -> ToolResult | tuple[ToolCall, ToolSuspended]:
            async with limit:
                try:
                    return await self._execute(writer, call)
                except ToolSuspended as suspended:
                    return call, suspended

        tasks = [asyncio.ensure_future(bounded(call)) for call in calls]
        waiting: list[tuple[ToolCall, ToolSuspended]] = []
        try:
            for finished in asyncio.as_completed(tasks):
                outcome = await finished
                if isinstance(outcome, tuple):
                    waiting.append(outcome)
                elif streaming:
                    yield ToolCallEnd(result=outcome)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        if waiting:
            order = {call.id: index for index, call in enumerate(calls)}
            waiting.sort(key=lambda pair: order[pair[0].id])
            raise AgentSuspended(thread_id=writer.thread_id, suspended=waiting)

    async def run_one(self, writer: ThreadWriter, call: ToolCall, started: set[str]) -> ToolResult:
        """Run one call whose turn was journaled, alone.

        Raises:
            AgentSuspended: The call raised `ToolSuspended`.
        """
        if call.id not in started:  # usually journaled with its turn already
            await self._mark_started(writer, [call], started)
        try:
            return await self._execute(writer, call)
        except ToolSuspended as suspended:
            raise AgentSuspended(
                thread_id=writer.thread_id, suspended=[(call, suspended)]
            ) from None

    async def _mark_started(
        self, writer: ThreadWriter, calls: Sequence[ToolCall], started: set[str]
    ) -> None:
        """Journal calls as started, unless this pass already did.

        A call started by an earlier pass has no result: its process died, or
        it is still running elsewhere. It runs again only when the caller said so.
        """
        attempts = writer.state.attempts
        in_flight = [c for c in calls if c.id in attempts and c.id not in started]
        if in_flight and not writer.retry_in_flight:
            names = ", ".join(f"{c.name} ({c.id})" for c in in_flight)
            raise ThreadBusy(
                f"Tool call {names} on thread {writer.thread_id!r} was started and has no "
                "result: it may still be running in another process, or that process died.",
                hint="Once you know it is not running, resume(thread_id, retry_in_flight=True) "
                "runs it again with the same idempotency key.",
                context={"thread_id": writer.thread_id, "calls": [c.id for c in in_flight]},
            )
        fresh = [
            ToolStarted(call=call, attempt=attempts.get(call.id, 0) + 1)
            for call in calls
            if call.id not in started
        ]
        if fresh:
            await writer.append(*fresh)
            started.update(event.call.id for event in fresh)

    async def _execute(self, writer: ThreadWriter, call: ToolCall) -> ToolResult:
        """Run one started call and journal its result; tool errors become results."""
        call_id, name = call.id, call.name
        tool = self.tools.get(name)
        description = tool.description if tool is not None else None
        with self.tracer.tool_span(call, description=description, parent=writer.span) as span:
            content, failed, usage, delegated = await self._invoke(writer, call, tool, span)
            # The tool has run: its result must be storable, or the effect would be lost.
            content = valid_text(content)
            result = _new_result(
                {"call_id": call_id, "name": name, "content": content, "is_error": failed}
            )
            span.record_result(result)
        finished = _new_finished({"result": result, "usage": usage, "tool_calls": delegated})
        await writer.append(finished)
        return result

    async def _invoke(
        self, writer: ThreadWriter, call: ToolCall, tool: Tool | None, span: Span
    ) -> tuple[str, bool, Usage | None, int]:
        """Call the tool; its text for the model, whether it failed, what it spent and called."""
        call_id, name = call.id, call.name
        if tool is None:
            return f"There is no tool named {name!r}.", True, None, 0
        arguments = writer.validated.pop(call_id, None)
        state = writer.state
        context = ToolContext(
            thread_id=state.thread_id,
            call_id=call_id,
            tool_name=name,
            attempt=state.attempts.get(call_id, 1),
            agent=self.agent_name,
            deps=writer.deps,
        )
        try:
            if arguments is None:
                arguments = tool.validate(call.arguments)
            value = await tool.acall(arguments, context)
        except ToolArgumentsError as exc:
            span.record_error(exc)
            return exc.message, True, None, 0
        except ToolSuspended:
            raise  # no result: the call stays started, and runs again on resume
        except Exception as exc:
            _log.warning("Tool %s (%s) raised %r", name, call_id, exc)
            span.record_error(exc)
            return f"The tool raised {type(exc).__name__}: {exc}", True, None, 0
        if isinstance(value, ToolReturn):
            return tool.render(value.value), value.is_error, value.usage, value.tool_calls
        return tool.render(value), False, None, 0
