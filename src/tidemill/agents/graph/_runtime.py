"""`GraphRuntime`: the same agent, run as a LangGraph graph you can edit.

The runtime is thin: it journals the run's input and the approvers'
decisions, drives the compiled graph (`_nodes`) with a `GraphRun` as its
context, and turns how the graph stopped into Tidemill's outcomes: an answer,
an `AgentInterrupt`, or a limit's error. LangGraph's checkpoints go to the
same journal through `JournalSaver`.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncGenerator, AsyncIterator, Iterable, Mapping
from contextlib import aclosing
from typing import Any, Unpack

from langchain_core.runnables import RunnableConfig
from langgraph.errors import GraphRecursionError
from langgraph.graph import StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command, StateSnapshot
from pydantic import JsonValue

from tidemill._sync import LoopThread
from tidemill.agents._decisions import decision_events, decisions_from_flags
from tidemill.agents._facade import AgentFacade, Prompt, prompt_messages
from tidemill.agents._limits import UsageLimits
from tidemill.agents._loop import RunBounds
from tidemill.agents._tool_runner import ToolRunner
from tidemill.agents.checkpoint import Checkpointer, MemoryCheckpointer
from tidemill.agents.graph._nodes import AgentNodes, agent_graph
from tidemill.agents.graph._saver import JournalSaver, ThreadLog
from tidemill.agents.graph._state import GraphRun, GraphState
from tidemill.agents.journal import (
    JournalRecord,
    RunFailed,
    RunFinished,
    ThreadState,
    UserInput,
)
from tidemill.agents.tracing import NullTracer, Tracer
from tidemill.errors import (
    AgentInterrupt,
    ApprovalError,
    ConfigurationError,
    LimitExceeded,
    MaxIterationsExceeded,
    ThreadBusy,
    ToolRetriesExceeded,
)
from tidemill.llm import Model, ModelSettings
from tidemill.tools import ToolLike, ToolRegistry
from tidemill.types import (
    AgentResponse,
    ApprovalRequired,
    Decision,
    Message,
    ReasoningDelta,
    ResponseDone,
    RunDone,
    RunStopped,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
)

__all__ = ["AgentGraph", "GraphRuntime"]

AgentGraph = StateGraph[GraphState, GraphRun, GraphState, GraphState]
"""The uncompiled agent graph `GraphRuntime.native_graph` returns."""

GraphInput = GraphState | Command[Any] | None
"""What a run feeds the graph: new messages, the approvers' answer, or nothing (continue)."""

_DECISION_ATTEMPTS = 3
_INTERRUPT = "__interrupt__"
_FORWARDED = (TextDelta, ReasoningDelta, ToolCallDelta, ResponseDone, ToolCallStart, ToolCallEnd)
"""The custom stream chunks that are the agent's events; other nodes' chunks are not."""
"""Where a values chunk of LangGraph's stream carries a pause."""


class GraphRuntime(AgentFacade):
    """A tool-calling agent run by LangGraph, with Tidemill's journal and outcomes.

    It takes the same model, tools, approvals and limits as `AgentRuntime`,
    answers with the same `AgentResponse`, pauses with the same
    `AgentInterrupt` and resumes with the same decisions. Use it when you want
    the graph: `native_graph()` returns the LangGraph `StateGraph` to add
    nodes and edges to, and `recompile()` makes later runs use your edits.
    LangGraph's checkpoints are kept in the `checkpointer`'s journals, so a
    paused graph thread resumes in another process. Needs
    `pip install 'tidemill[graph]'`.

    Args:
        model: The reasoning model.
        tools: The tools it may call.
        system_prompt: Instructions sent first on every model call.
        name: The agent's name, for logs, tool contexts and the graph.
        max_iterations: Model calls allowed per run before `MaxIterationsExceeded`;
            LangGraph's recursion limit is derived from it.
        tool_call_retries: Model turns with a failing tool call a run may
            recover from before `ToolRetriesExceeded`.
        parallel_tools: Run the calls of one turn concurrently.
        max_parallel: At most this many of them at once.
        require_approval: Pause before every tool call, not only those whose
            tool asks for approval.
        checkpointer: Where journals (LangGraph's checkpoints included) are
            kept; in memory by default.
        limits: Usage budgets per run, beside `max_iterations`.
        tracer: Where spans for the run, each model call and each tool call go.

    Examples:
        >>> from tidemill.llm import ScriptedModel
        >>> runtime = GraphRuntime(model=ScriptedModel(["Done."]))
        >>> runtime.run("Say done.").output
        'Done.'
        >>> runtime.describe()["runtime"]
        'langgraph'
        >>> runtime.close()
    """

    def __init__(
        self,
        *,
        model: Model,
        tools: ToolRegistry | Iterable[ToolLike] = (),
        system_prompt: str | None = None,
        name: str = "agent",
        max_iterations: int = 10,
        tool_call_retries: int = 2,
        parallel_tools: bool = True,
        max_parallel: int = 8,
        require_approval: bool = False,
        checkpointer: Checkpointer | None = None,
        limits: UsageLimits | None = None,
        tracer: Tracer | None = None,
    ) -> None:
        if max_iterations < 1:
            raise ConfigurationError("max_iterations must be at least 1.")
        if tool_call_retries < 0:
            raise ConfigurationError("tool_call_retries must not be negative.")
        if max_parallel < 1:
            raise ConfigurationError("max_parallel must be at least 1.")
        self.model = model
        self.tools = tools if isinstance(tools, ToolRegistry) else ToolRegistry(tools)
        if len(self.tools) and not model.supports_tools:
            raise ConfigurationError(
                f"The model {model.model_name!r} cannot call tools, but "
                f"{len(self.tools)} tool(s) are bound.",
                hint="Use a tool-capable model, or drop the tools.",
            )
        self.system_prompt = system_prompt
        self.name = name
        self.max_iterations = max_iterations
        self.tool_call_retries = tool_call_retries
        self.parallel_tools = parallel_tools
        self.max_parallel = max_parallel
        self.require_approval = require_approval
        self.checkpointer: Checkpointer = checkpointer or MemoryCheckpointer()
        self.limits = limits or UsageLimits()
        self.tracer: Tracer = tracer or NullTracer()
        self.saver = JournalSaver(self.checkpointer)
        """The LangGraph checkpoint saver over `checkpointer`."""
        self._graph: AgentGraph = agent_graph(
            AgentNodes(
                model=model,
                runner=ToolRunner(
                    self.tools,
                    agent_name=name,
                    parallel=parallel_tools,
                    max_parallel=max_parallel,
                    require_approval=require_approval,
                    tracer=self.tracer,
                ),
                system_prompt=system_prompt,
                tool_call_retries=tool_call_retries,
                tracer=self.tracer,
            )
        )
        self._app = self.recompile()
        self._sync = LoopThread(f"tidemill-graph-{name}")

    # -- the graph ------------------------------------------------------------------

    def native_graph(self) -> AgentGraph:
        """Return the uncompiled LangGraph `StateGraph`, to edit; then call `recompile()`.

        Its nodes are `agent` (one model call) and `tools` (the calls of that
        turn); its state is `GraphState`, the conversation as Tidemill
        messages. A node you add returns `{"messages": [...]}` to append to it.
        To put a node between `tools` and `agent`, replace the edge:

            graph = runtime.native_graph()
            graph.add_node("critic", critic)
            graph.edges.discard(("tools", "agent"))
            graph.add_edge("tools", "critic")
            graph.add_edge("critic", "agent")
            runtime.recompile()
        """
        return self._graph

    def recompile(self) -> CompiledStateGraph[GraphState, GraphRun, GraphState, GraphState]:
        """Compile the graph again, with its edits; later runs use the result.

        Returns:
            The compiled graph, checkpointed by `saver`.
        """
        self._app = self._graph.compile(checkpointer=self.saver, name=self.name)
        # Every node may run once per iteration: enough for the graph's own check
        # of `max_iterations` to fire first, a backstop for loops that skip `agent`.
        self._steps_per_iteration = max(2, len(self._graph.nodes))
        return self._app

    async def agraph_state(self, thread_id: str) -> StateSnapshot:
        """Return LangGraph's view of the thread: its values, with what your nodes added."""
        return await self._app.aget_state({"configurable": {"thread_id": thread_id}})

    def graph_state(self, thread_id: str) -> StateSnapshot:
        """Blocking `agraph_state`."""
        return self._sync.run(self.agraph_state(thread_id))

    # -- running ---------------------------------------------------------------------

    async def arun(
        self,
        prompt: Prompt,
        *,
        thread_id: str | None = None,
        max_iterations: int | None = None,
        limits: UsageLimits | None = None,
        deps: object = None,
        **settings: Unpack[ModelSettings],
    ) -> AgentResponse:
        """Run the agent until it answers; see `AgentRuntime.arun`.

        Raises:
            AgentInterrupt: A tool call needs approval; continue with `aresume`.
            MaxIterationsExceeded: The budget ran out; carries the partial run.
            LimitExceeded: A usage limit would be crossed; carries the partial run.
            ToolRetriesExceeded: The model kept making failing tool calls.
            ApprovalError: The thread is paused for approval.
            ThreadBusy: The thread has an unfinished run, or another process
                wrote to it meanwhile.
        """
        bounds = self._bounds(max_iterations, limits)
        log, graph_input = await self._begin(prompt, thread_id)
        log.writer.deps = deps
        return await self._complete(log, graph_input, bounds, settings)

    async def astream(
        self,
        prompt: Prompt,
        *,
        thread_id: str | None = None,
        max_iterations: int | None = None,
        limits: UsageLimits | None = None,
        deps: object = None,
        **settings: Unpack[ModelSettings],
    ) -> AsyncIterator[StreamEvent]:
        """Run the agent, yielding what happens as it happens; see `AgentRuntime.astream`.

        Yields the model's deltas and `ResponseDone`, `ToolCallStart` and
        `ToolCallEnd` around each tool call, then `RunDone`; or
        `ApprovalRequired` when the run pauses. A run stopped at a bound
        yields `RunStopped`, then raises.
        """
        bounds = self._bounds(max_iterations, limits)
        log, graph_input = await self._begin(prompt, thread_id)
        log.writer.deps = deps
        async with aclosing(self._drive(log, graph_input, bounds, settings, True)) as events:
            async for event in events:
                yield event

    # -- approvals and recovery ---------------------------------------------------------

    async def aresume(
        self,
        thread_id: str,
        decisions: Mapping[str, Decision] | None = None,
        *,
        approved: bool | None = None,
        feedback: str = "",
        edited_arguments: Mapping[str, dict[str, JsonValue]] | None = None,
        retry_in_flight: bool = False,
        max_iterations: int | None = None,
        limits: UsageLimits | None = None,
        deps: object = None,
        **settings: Unpack[ModelSettings],
    ) -> AgentResponse:
        """Continue a paused or interrupted run; see `AgentRuntime.aresume`.

        The decisions are checked and journaled first, exactly as the built-in
        loop does, then the graph continues with `Command(resume=...)`.

        Raises:
            ApprovalError: The decisions do not fit the thread; nothing is stored.
            ThreadBusy: Another process resumed the thread first, or a call
                is in flight and `retry_in_flight` is False.
            AgentInterrupt: Calls still wait for a decision.
        """
        if decisions is not None and approved is not None:
            raise ApprovalError(
                "Pass decisions= or approved=, not both.",
                hint="decisions= decides calls one by one; approved= decides them all.",
            )
        bounds = self._bounds(max_iterations, limits)
        log, chosen = await self._decide(
            thread_id, decisions, approved, feedback=feedback, edited_arguments=edited_arguments
        )
        state = log.state
        if chosen:
            in_flight = [state.open_calls[c] for c in state.attempts if c in state.open_calls]
            if in_flight and not retry_in_flight:
                raise ThreadBusy(
                    "The decisions were recorded; "
                    + ", ".join(f"{c.name} ({c.id})" for c in in_flight)
                    + " is still running in another process, which will carry the run on.",
                    hint="Wait for that process; if it died, resume(thread_id, "
                    "retry_in_flight=True) runs the unfinished call again.",
                    context={"thread_id": thread_id, "calls": [c.id for c in in_flight]},
                )
        elif state.status == "paused":
            raise ApprovalError(
                f"Thread {thread_id!r} is waiting for decisions on "
                + ", ".join(f"{c.name} ({cid})" for cid, c in state.pending.items())
                + ".",
                hint="Pass decisions={call_id: Decision.approve()} or approved=True.",
                context={"pending": list(state.pending)},
            )
        elif state.status != "running":
            raise ApprovalError(
                f"Thread {thread_id!r} has nothing to resume (it is {state.status}).",
                hint="Start a new run on it with run(prompt, thread_id=...).",
                context={"status": state.status},
            )
        log.writer.retry_in_flight = retry_in_flight
        log.writer.deps = deps
        # Keyed by "decisions", never by interrupt ids: one value for the one pause.
        answer = {"decisions": {cid: d.model_dump(mode="json") for cid, d in chosen.items()}}
        graph_input: GraphInput = Command(resume=answer) if chosen else None
        return await self._complete(log, graph_input, bounds, settings)

    async def _decide(
        self,
        thread_id: str,
        decisions: Mapping[str, Decision] | None,
        approved: bool | None,
        *,
        feedback: str,
        edited_arguments: Mapping[str, dict[str, JsonValue]] | None,
    ) -> tuple[ThreadLog, dict[str, Decision]]:
        """Load the thread and journal the decisions, re-reading after a lost race."""
        for attempt in range(_DECISION_ATTEMPTS):
            log = await self.saver.open(thread_id)
            if decisions is None and approved is None:
                return log, {}
            chosen = dict(
                decisions_from_flags(
                    log.state,
                    approved=approved,
                    feedback=feedback,
                    edited_arguments=edited_arguments,
                )
                if approved is not None
                else decisions or {}
            )
            try:
                await log.append(*decision_events(log.state, chosen, self.tools))
            except ThreadBusy:
                if attempt + 1 == _DECISION_ATTEMPTS:
                    raise
                continue
            return log, chosen
        raise AssertionError("unreachable")  # pragma: no cover

    # -- inspection -------------------------------------------------------------------

    async def astate(self, thread_id: str) -> ThreadState | None:
        """Return the thread's journal state (turns, calls, decisions), or None if it has none.

        Messages your own nodes added are in the graph's state: `agraph_state`.
        """
        state = (await self.saver.open(thread_id)).state
        return state if state.seq else None

    async def apending_approvals(self, thread_id: str) -> list[ToolCall]:
        """Return the calls waiting for a decision on the thread, or `[]`."""
        return list((await self.saver.open(thread_id)).state.pending.values())

    async def ahistory(self, thread_id: str, limit: int | None = None) -> list[JournalRecord]:
        """Return the thread's journal, oldest first; the last `limit` records if given.

        Beside the Tidemill events it holds LangGraph's `graph_checkpoint` and
        `graph_writes` events.
        """
        records = await self.checkpointer.read(thread_id)
        return records[-limit:] if limit else records

    def describe(self) -> dict[str, JsonValue]:
        """Return a JSON-safe description of the agent's configuration."""
        return {
            "name": self.name,
            "runtime": "langgraph",
            "model": self.model.describe(),
            "tools": list(self.tools.describe()),
            "system_prompt": self.system_prompt,
            "max_iterations": self.max_iterations,
            "tool_call_retries": self.tool_call_retries,
            "parallel_tools": self.parallel_tools,
            "require_approval": self.require_approval,
            "checkpointer": type(self.checkpointer).__name__,
            "limits": self.limits.describe(),
            "tracer": self.tracer.describe(),
            "nodes": list[JsonValue](sorted(self._graph.nodes)),
        }

    # -- the run ----------------------------------------------------------------------

    async def _begin(self, prompt: Prompt, thread_id: str | None) -> tuple[ThreadLog, GraphState]:
        messages = prompt_messages(prompt)
        log = await self.saver.open(thread_id or "thread_" + secrets.token_hex(12))
        state = log.state
        if state.status == "paused":
            raise ApprovalError(
                f"Thread {state.thread_id!r} is waiting for approval.",
                hint="Decide the pending calls with resume() before starting a new run.",
                context={"pending": list(state.pending)},
            )
        if state.status == "running":
            raise ThreadBusy(
                f"Thread {state.thread_id!r} has an unfinished run.",
                hint="Continue it with resume(thread_id), or use another thread.",
            )
        await log.append(UserInput(messages=messages, run_id="run_" + secrets.token_hex(8)))
        return log, GraphState(messages=list(messages))

    async def _complete(
        self, log: ThreadLog, graph_input: GraphInput, bounds: RunBounds, settings: ModelSettings
    ) -> AgentResponse:
        run = GraphRun(log, bounds, settings, streaming=False)
        async with aclosing(self._steps(run, graph_input)) as events:
            async for event in events:
                if event.type == "done":
                    return event.response
                if event.type == "approval_required":
                    raise AgentInterrupt(
                        thread_id=log.thread_id, pending=event.calls, response=run.response()
                    )
        raise AssertionError("the graph ended without an outcome")  # pragma: no cover

    async def _drive(
        self,
        log: ThreadLog,
        graph_input: GraphInput,
        bounds: RunBounds,
        settings: ModelSettings,
        streaming: bool,
    ) -> AsyncGenerator[StreamEvent, None]:
        """`_steps`, with `RunStopped` before a bound's error, as `AgentRuntime.astream` does."""
        run = GraphRun(log, bounds, settings, streaming=streaming)
        try:
            async with aclosing(self._steps(run, graph_input)) as events:
                async for event in events:
                    yield event
        except (LimitExceeded, ToolRetriesExceeded) as stop:
            yield RunStopped(
                error=type(stop).__name__,
                message=stop.message,
                limit=stop.limit if isinstance(stop, LimitExceeded) else None,
                response=stop.response or run.response(),
            )
            raise

    async def _steps(
        self, run: GraphRun, graph_input: GraphInput
    ) -> AsyncGenerator[StreamEvent, None]:
        """Drive the graph; `RunDone` or `ApprovalRequired` last."""
        log = run.log
        config: RunnableConfig = {
            "configurable": {"thread_id": log.thread_id},
            "recursion_limit": self._steps_per_iteration * run.bounds.max_iterations + 1,
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
            stream = self._app.astream(
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
            await log.append(RunFinished(output=_answer(run.messages)))
        yield RunDone(response=run.response())

    async def _saved_messages(self, thread_id: str) -> list[Message]:
        values = (await self.agraph_state(thread_id)).values
        return list(values.get("messages", [])) if isinstance(values, dict) else []

    def _bounds(self, max_iterations: int | None, limits: UsageLimits | None) -> RunBounds:
        return RunBounds.of(max_iterations, limits, self.max_iterations, self.limits)


def _answer(messages: list[Message]) -> str:
    """The run's output: the last thing the model said."""
    return next((m.content for m in reversed(messages) if m.role == "assistant"), "")
