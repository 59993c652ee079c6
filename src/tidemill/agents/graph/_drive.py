"""`GraphDriver`: one compiled agent graph, driven for a thread, and how it stopped.

`GraphRuntime` journals a run's input or its decisions, then hands the
thread's log to the driver, which runs the compiled graph with a `GraphRun`
as its context and turns how the graph stopped into Tidemill's outcomes: an
answer (validated against the output type), an approval pause, or a bound's
error, with `RunStopped` before it when streaming.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.errors import GraphRecursionError
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command

from tidemill.agents._loop import RUN_STOPS, RunBounds, run_stopped
from tidemill.agents._output import OutputSpec
from tidemill.agents.graph._saver import JournalSaver, ThreadLog
from tidemill.agents.graph._state import GraphRun, GraphState
from tidemill.agents.journal import RunFailed, RunFinished
from tidemill.agents.tracing import Tracer
from tidemill.errors import (
    AgentInterrupt,
    ConfigurationError,
    MaxIterationsExceeded,
    OutputValidationError,
)
from tidemill.llm import Model, ModelSettings
from tidemill.types import (
    AgentResponse,
    ApprovalRequired,
    Message,
    ReasoningDelta,
    ResponseDone,
    RunDone,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
)

__all__ = ["CompiledAgentGraph", "GraphDriver", "GraphInput"]

CompiledAgentGraph = CompiledStateGraph[GraphState, GraphRun, GraphState, GraphState]
"""The compiled agent graph `GraphRuntime.recompile` returns."""

GraphInput = GraphState | Command[Any] | None
"""What a run feeds the graph: new messages, the approvers' answer, or nothing (continue)."""

_INTERRUPT = "__interrupt__"
"""Where a values chunk of LangGraph's stream carries a pause."""
_FORWARDED = (TextDelta, ReasoningDelta, ToolCallDelta, ResponseDone, ToolCallStart, ToolCallEnd)
"""The custom stream chunks that are the agent's events; other nodes' chunks are not."""


@dataclass(frozen=True)
class GraphDriver:
    """Runs one compilation of an agent's graph; `GraphRuntime.recompile` makes a new one."""

    app: CompiledAgentGraph
    """The compiled graph, checkpointed by `saver`."""
    saver: JournalSaver
    """The saver the graph's checkpoints go through, bound to the run's log."""
    name: str
    """The agent's name, for its run span."""
    model: Model
    """The agent's model, named on its run span."""
    tracer: Tracer
    """Where the run's span goes."""
    output: OutputSpec | None
    """The shape the final answer must have, when the agent has one."""
    steps_per_iteration: int
    """LangGraph steps allowed per iteration: the recursion limit's factor."""

    async def complete(
        self, log: ThreadLog, graph_input: GraphInput, bounds: RunBounds, settings: ModelSettings
    ) -> AgentResponse:
        """Drive the graph to its answer.

        Raises:
            AgentInterrupt: Tool calls wait for a decision.
        """
        run = GraphRun(log, bounds, settings, streaming=False, output=self.output)
        async with aclosing(self._steps(run, graph_input)) as events:
            async for event in events:
                if event.type == "done":
                    return event.response
                if event.type == "approval_required":
                    raise AgentInterrupt(
                        thread_id=log.thread_id, pending=event.calls, response=run.response()
                    )
        raise AssertionError("the graph ended without an outcome")  # pragma: no cover

    async def drive(
        self, log: ThreadLog, graph_input: GraphInput, bounds: RunBounds, settings: ModelSettings
    ) -> AsyncGenerator[StreamEvent, None]:
        """Drive the graph, streaming; `RunStopped` comes before a bound's error, as in the loop."""
        run = GraphRun(log, bounds, settings, streaming=True, output=self.output)
        try:
            async with aclosing(self._steps(run, graph_input)) as events:
                async for event in events:
                    yield event
        except RUN_STOPS as stop:
            yield run_stopped(stop, run.response)
            raise

    async def _steps(
        self, run: GraphRun, graph_input: GraphInput
    ) -> AsyncGenerator[StreamEvent, None]:
        """Drive the graph; `RunDone` or `ApprovalRequired` last."""
        log = run.log
        config: RunnableConfig = {
            "configurable": {"thread_id": log.thread_id},
            "recursion_limit": self.steps_per_iteration * run.bounds.max_iterations + 1,
        }
        seen = interrupted = False
        with (
            self.saver.bind(log),
            self.tracer.agent_span(
                self.name,
                thread_id=log.thread_id,
                run_id=log.state.run_id,
                model=self.model.model_name,
                provider=self.model.provider,
            ) as span,
        ):
            log.writer.span = span
            stream = self.app.astream(
                graph_input,
                config,
                context=run,
                stream_mode=["values", "custom"] if run.streaming else ["values"],
                durability="sync",
            )
            try:
                async for mode, chunk in stream:
                    if mode == "custom":
                        if isinstance(chunk, _FORWARDED):
                            yield chunk
                    elif isinstance(chunk, dict):
                        interrupted = interrupted or _INTERRUPT in chunk
                        if "messages" in chunk:
                            run.messages, seen = list(chunk["messages"]), True
            except GraphRecursionError:
                budget = run.bounds.max_iterations
                await log.append(
                    RunFailed(
                        reason="limit",
                        limit="max_iterations",
                        message=f"the graph took more than {config['recursion_limit']} steps",
                    )
                )
                raise MaxIterationsExceeded(budget, response=run.response()) from None
            finally:
                span.record_usage(log.state.usage)
                if isinstance(stream, AsyncGenerator):
                    await stream.aclose()
            if not seen:  # continued a graph that had already ended
                run.messages = await self._saved_messages(log.thread_id)
            state = log.state
            if state.status == "paused":
                yield ApprovalRequired(thread_id=log.thread_id, calls=tuple(state.pending.values()))
                return
            if interrupted:
                raise ConfigurationError(
                    "A node of the graph paused it with interrupt(); GraphRuntime pauses "
                    "only for tool calls that need approval.",
                    hint="Mark the tool requires_approval=True instead, or run the compiled "
                    "graph yourself with the runtime's saver.",
                    context={"thread_id": log.thread_id},
                )
            await self._finish(run)
        yield RunDone(response=run.response())

    async def _finish(self, run: GraphRun) -> None:
        """Journal the run's answer: the last thing the model said, validated if typed.

        The `agent` node already sent back answers the output type rejects;
        this catches a graph of yours that ends on something else.

        Raises:
            OutputValidationError: The answer the graph ended on is not of the output type.
        """
        text = _answer(run.messages)
        if self.output is None:
            await run.log.append(RunFinished(output=text))
            return
        value, errors = self.output.parse(text)
        if errors:
            detail = "; ".join(errors)
            await run.log.append(RunFailed(reason="output_validation", message=detail))
            raise OutputValidationError(text, errors, response=run.response())
        await run.log.append(RunFinished(output=value))

    async def _saved_messages(self, thread_id: str) -> list[Message]:
        snapshot = await self.app.aget_state({"configurable": {"thread_id": thread_id}})
        values = snapshot.values
        return list(values.get("messages", [])) if isinstance(values, dict) else []


def _answer(messages: list[Message]) -> str:
    """The run's output: the last thing the model said."""
    return next((m.content for m in reversed(messages) if m.role == "assistant"), "")
