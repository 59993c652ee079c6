"""`GraphRuntime`: the same agent, run as a LangGraph graph you can edit.

The runtime is thin: it checks the run's input with the guardrail, journals
it (and what the memory summarised or recalled) and the approvers' decisions, then hands the
thread to a `GraphDriver` (`_drive`), which runs the compiled graph
(`_nodes`) and turns how it stopped into Tidemill's outcomes. LangGraph's
checkpoints go to the same journal through `JournalSaver`.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from contextlib import aclosing
from typing import Unpack

from langgraph.graph import StateGraph
from langgraph.types import Command, StateSnapshot
from pydantic import JsonValue

from tidemill._sync import LoopThread
from tidemill.agents._decisions import check_flags, decision_events, decisions_from_flags
from tidemill.agents._delegation import (
    ROUTING_PROMPT,
    AgentTool,
    Delegation,
    delegate_broadcast,
    delegate_pipeline,
    first_line,
    with_roster,
)
from tidemill.agents._facade import AgentFacade, Closeable, Prompt, prompt_messages
from tidemill.agents._limits import UsageLimits
from tidemill.agents._loop import RunBounds, check_loop_options
from tidemill.agents._output import OutputSpec
from tidemill.agents._thread import check_resumable, check_startable
from tidemill.agents._tool_runner import ToolRunner, tool_registry
from tidemill.agents.checkpoint import Checkpointer, MemoryCheckpointer, fork_thread
from tidemill.agents.graph._drive import CompiledAgentGraph, GraphDriver, GraphInput
from tidemill.agents.graph._nodes import AgentNodes, agent_graph
from tidemill.agents.graph._saver import JournalSaver, ThreadLog
from tidemill.agents.graph._state import GraphRun, GraphState
from tidemill.agents.guardrails import Guardrail
from tidemill.agents.guardrails._screen import screen_input
from tidemill.agents.journal import (
    JournalRecord,
    ThreadState,
    UserInput,
)
from tidemill.agents.memory import BufferMemory, Memory, memory_events
from tidemill.agents.tracing import NullTracer, Tracer
from tidemill.errors import (
    ThreadBusy,
)
from tidemill.llm import Model, ModelSettings
from tidemill.tools import ToolLike, ToolRegistry
from tidemill.types import (
    AgentResponse,
    Decision,
    StreamEvent,
    ToolCall,
)

__all__ = ["AgentGraph", "GraphRuntime"]

AgentGraph = StateGraph[GraphState, GraphRun, GraphState, GraphState]
"""The uncompiled agent graph `GraphRuntime.native_graph` returns."""

_DECISION_ATTEMPTS = 3


class GraphRuntime(AgentFacade):
    """A tool-calling agent run by LangGraph, with Tidemill's journal and outcomes.

    It takes the same model, tools, approvals, limits, structured output,
    memory, guardrails and specialists as `AgentRuntime`, with the same
    meaning, answers with the same `AgentResponse`, pauses with the same
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
        output: The shape the final answer must have; `AgentResponse.output`
            is then the validated value. An invalid answer goes back to the
            model with what is wrong, up to the spec's `retries`.
        memory: Which part of the graph's conversation each model call sees;
            all of it (`BufferMemory`) by default. The journal and the
            graph's state always keep everything.
        specialists: Agents this one may delegate to, as tools; with any,
            the system prompt gains the roster (`routing_prompt`).
        delegation: Bounds on delegation: nesting depth, fan-out per turn,
            concurrency, and each child's limits.
        routing_prompt: The routing instructions with specialists, `{roster}`
            replaced by one line per specialist.
        guardrail: An input and output policy: the run's input is checked
            before it is journaled, each answer before it is journaled or
            streamed out.
        tracer: Where spans for the run, each model call and each tool call go.
        description: What the agent is good at, for a supervisor that
            delegates to it; its system prompt's first line when not given.

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
        output: OutputSpec | None = None,
        memory: Memory | None = None,
        specialists: Sequence[AgentTool] = (),
        delegation: Delegation | None = None,
        routing_prompt: str = ROUTING_PROMPT,
        guardrail: Guardrail | None = None,
        tracer: Tracer | None = None,
        description: str | None = None,
        owned: Sequence[Closeable] = (),
    ) -> None:
        check_loop_options(
            max_iterations=max_iterations,
            tool_call_retries=tool_call_retries,
            max_parallel=max_parallel,
        )
        self.model = model
        self.tools = tool_registry(model, tools)
        self.system_prompt = system_prompt
        self.description = description or first_line(system_prompt)
        self.name = name
        self._owned = owned if isinstance(owned, list) else list(owned)
        self.max_iterations = max_iterations
        self.tool_call_retries = tool_call_retries
        self.parallel_tools = parallel_tools
        self.max_parallel = max_parallel
        self.require_approval = require_approval
        self.checkpointer: Checkpointer = checkpointer or MemoryCheckpointer()
        self.limits = limits or UsageLimits()
        self.output = output
        self.memory: Memory = memory or BufferMemory()
        self.delegation = delegation or Delegation()
        self.routing_prompt = routing_prompt
        self.guardrail = guardrail
        self.tracer: Tracer = tracer or NullTracer()
        self.specialists = {tool.name: tool for tool in specialists}
        for specialist in specialists:
            self.tools.add(specialist)
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
                    max_fan_out=self.delegation.max_fan_out,
                    tracer=self.tracer,
                ),
                system_prompt=self._instructions(),
                tool_call_retries=tool_call_retries,
                output=output,
                memory=self.memory,
                guardrail=guardrail,
                tracer=self.tracer,
            )
        )
        self.recompile()
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

        Edits take effect at `recompile()`: until then runs use the graph compiled last.
        """
        # Editing after a compile is the point here; LangGraph would log a warning per edit.
        self._graph.compiled = False
        return self._graph

    def recompile(self) -> CompiledAgentGraph:
        """Compile the graph again, with its edits; later runs use the result.

        Returns:
            The compiled graph, checkpointed by `saver`.
        """
        app = self._graph.compile(checkpointer=self.saver, name=self.name)
        self._driver = GraphDriver(
            app,
            self.saver,
            self.name,
            self.model,
            self.tracer,
            self.output,
            # Every node may run once per iteration: enough for the graph's own check
            # of `max_iterations` to fire first, a backstop for loops that skip `agent`.
            steps_per_iteration=max(2, len(self._graph.nodes)),
        )
        return app

    async def agraph_state(self, thread_id: str) -> StateSnapshot:
        """Return LangGraph's view of the thread: its values, with what your nodes added."""
        return await self._driver.app.aget_state({"configurable": {"thread_id": thread_id}})

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
            OutputValidationError: The answers kept failing the output type.
            GuardrailViolation: The guardrail blocked the input (nothing is
                journaled) or an answer (the run fails, journaled).
            ApprovalError: The thread is paused for approval.
            ThreadBusy: The thread has an unfinished run, or another process
                wrote to it meanwhile.
        """
        bounds = self._bounds(max_iterations, limits)
        log, graph_input = await self._begin(prompt, thread_id)
        log.writer.deps = deps
        return await self._driver.complete(log, graph_input, bounds, settings)

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
        `ApprovalRequired` when the run pauses. A run stopped at a bound, by
        the output type or by the guardrail yields `RunStopped`, then raises.
        With a guardrail, text is yielded only once it has passed it.
        """
        bounds = self._bounds(max_iterations, limits)
        log, graph_input = await self._begin(prompt, thread_id)
        log.writer.deps = deps
        async with aclosing(self._driver.drive(log, graph_input, bounds, settings)) as events:
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
        check_flags(decisions, approved)
        bounds = self._bounds(max_iterations, limits)
        log, chosen = await self._decide(
            thread_id, decisions, approved, feedback=feedback, edited_arguments=edited_arguments
        )
        state = log.state
        check_resumable(state, thread_id, decided=bool(chosen), retry_in_flight=retry_in_flight)
        log.writer.retry_in_flight = retry_in_flight
        log.writer.deps = deps
        # Keyed by "decisions", never by interrupt ids: one value for the one pause.
        answer = {"decisions": {cid: d.model_dump(mode="json") for cid, d in chosen.items()}}
        graph_input: GraphInput = Command(resume=answer) if chosen else None
        return await self._driver.complete(log, graph_input, bounds, settings)

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

    # -- specialists ------------------------------------------------------------------

    async def abroadcast(self, task: str, *, deps: object = None) -> dict[str, AgentResponse]:
        """Run every specialist on the same task, concurrently; see `AgentRuntime.abroadcast`.

        Raises:
            ConfigurationError: When the agent has no specialists.
        """
        return await delegate_broadcast(self.specialists, self.delegation, task, deps=deps)

    def broadcast(self, task: str, *, deps: object = None) -> dict[str, AgentResponse]:
        """Blocking `abroadcast`."""
        return self._sync.run(self.abroadcast(task, deps=deps))

    async def apipeline(
        self, task: str, order: Sequence[str], *, deps: object = None
    ) -> AgentResponse:
        """Chain specialists in `order`, each on the previous answer; see `AgentRuntime.apipeline`.

        Raises:
            ConfigurationError: When the agent has no specialists or `order`
                names an unknown one.
        """
        return await delegate_pipeline(self.specialists, self.delegation, task, order, deps=deps)

    def pipeline(self, task: str, order: Sequence[str], *, deps: object = None) -> AgentResponse:
        """Blocking `apipeline`."""
        return self._sync.run(self.apipeline(task, order, deps=deps))

    def _instructions(self) -> str | None:
        """The system prompt each model call gets: the agent's own, then the roster."""
        return with_roster(self.system_prompt, self.specialists, self.routing_prompt)

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

    async def ahistory(self, thread_id: str, limit: int | None = 20) -> list[JournalRecord]:
        """Return the thread's last `limit` journal records (all with None), oldest first.

        Beside the Tidemill events it holds LangGraph's `graph_checkpoint` and
        `graph_writes` events; a compacted thread starts with its `snapshot`.
        """
        records = await self.checkpointer.read(thread_id)
        return records[-limit:] if limit else records

    async def afork(self, thread_id: str, *, at: int, new_thread_id: str | None = None) -> str:
        """Start a new thread from the state of `thread_id` as of its record `at`; return its id.

        The fork's snapshot keeps the LangGraph events up to `at`, so the
        graph goes on from its checkpoints there. See
        `tidemill.agents.checkpoint.fork_thread`.
        """
        return await fork_thread(self.checkpointer, thread_id, at=at, new_thread_id=new_thread_id)

    def native_llm(self) -> Model:
        """Return the `Model` the agent calls."""
        return self.model

    async def aclose(self) -> None:
        """Close what the runtime owns (what its builder made), once; see `AgentRuntime.aclose`."""
        while self._owned:
            await self._owned.pop().aclose()

    def describe(self) -> dict[str, JsonValue]:
        """Return a JSON-safe description of the agent's configuration."""
        return {
            "name": self.name,
            "runtime": "langgraph",
            "description": self.description,
            "model": self.model.describe(),
            "tools": list(self.tools.describe()),
            "system_prompt": self.system_prompt,
            "max_iterations": self.max_iterations,
            "tool_call_retries": self.tool_call_retries,
            "parallel_tools": self.parallel_tools,
            "require_approval": self.require_approval,
            "checkpointer": type(self.checkpointer).__name__,
            "limits": self.limits.describe(),
            "memory": self.memory.describe(),
            "specialists": list[JsonValue](sorted(self.specialists)),
            "delegation": self.delegation.describe() if self.specialists else None,
            "guardrail": self.guardrail.describe() if self.guardrail else None,
            "tracer": self.tracer.describe(),
            "output_schema": self.output.schema if self.output else None,
            "nodes": list[JsonValue](sorted(self._graph.nodes)),
        }

    # -- the run ----------------------------------------------------------------------

    async def _begin(self, prompt: Prompt, thread_id: str | None) -> tuple[ThreadLog, GraphState]:
        # Checked before anything is journaled: a blocked input stores nothing.
        messages = screen_input(self.guardrail, prompt_messages(prompt))
        log = await self.saver.open(thread_id or "thread_" + secrets.token_hex(12))
        state = log.state
        check_startable(state)
        await log.append(UserInput(messages=messages, run_id="run_" + secrets.token_hex(8)))
        # As the built-in loop does when a run starts: the memory may condense or recall.
        events = memory_events(await self.memory.compact(log.state, self.model))
        if events:
            await log.append(*events)
        return log, GraphState(messages=list(messages))

    def _bounds(self, max_iterations: int | None, limits: UsageLimits | None) -> RunBounds:
        return RunBounds.of(max_iterations, limits, self.max_iterations, self.limits)
