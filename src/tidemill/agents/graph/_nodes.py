"""The agent graph: an `agent` node that thinks, a `tools` node that acts.

    START → agent ─┬─ tool calls ──→ tools → agent
                   ├─ a correction → agent
                   └─ an answer ───→ END

Each node journals what it does as Tidemill events before its effect, the
same events `AgentRuntime` writes: the model turn with the calls it refused
or sent for approval, each tool call's start and result, an answer the
output schema rejected. Limits are checked where the built-in loop checks
them; the memory chooses what of the graph's conversation each model call
sees (`_view`), and the output guardrail screens each answer before it is
journaled or streamed out. The `tools` node pauses with LangGraph's
`interrupt()` while calls wait for a decision; the decisions themselves are
journaled by `GraphRuntime.aresume`, so a call runs as it was authorised and
only once, whichever process resumes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import aclosing
from dataclasses import dataclass, field

from langgraph.config import get_stream_writer
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.types import interrupt

from tidemill.agents._output import OutputSpec
from tidemill.agents._tool_runner import ToolRunner
from tidemill.agents.graph._state import GraphRun, GraphState
from tidemill.agents.graph._view import thread_view
from tidemill.agents.guardrails import Guardrail
from tidemill.agents.guardrails._screen import screen_response, screened_stream
from tidemill.agents.journal import (
    ApprovalRequested,
    Correction,
    JournalEvent,
    ModelTurn,
    OutputRejected,
    RunFailed,
    ThreadState,
    ToolFinished,
)
from tidemill.agents.memory import BufferMemory, Memory
from tidemill.agents.tracing import NullTracer, Tracer
from tidemill.errors import (
    AgentError,
    GuardrailViolation,
    LimitExceeded,
    MalformedToolCall,
    MaxIterationsExceeded,
    OutputValidationError,
    ToolRetriesExceeded,
)
from tidemill.llm import Model, ModelRequest, OutputFormat
from tidemill.types import (
    Message,
    ModelResponse,
    StreamEvent,
    ToolCall,
    ToolResult,
)

__all__ = ["AgentNodes", "agent_graph", "route"]

Update = dict[str, list[Message]]
"""What a node returns: messages to append."""


def agent_graph(nodes: AgentNodes) -> StateGraph[GraphState, GraphRun, GraphState, GraphState]:
    """The uncompiled agent graph, with `nodes` as its `agent` and `tools` nodes."""
    graph = StateGraph(GraphState, context_schema=GraphRun)
    graph.add_node("agent", nodes.agent)
    graph.add_node("tools", nodes.tools)
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", route, ["agent", "tools", END])
    graph.add_edge("tools", "agent")
    return graph


def route(state: GraphState) -> str:
    """Where the graph goes after `agent`: its tool calls, another turn, or the end."""
    messages = state["messages"]
    last = messages[-1] if messages else None
    if last is None or last.role != "assistant":
        return "agent"  # the model was told how to correct its last turn
    return "tools" if last.tool_calls else END


@dataclass(frozen=True)
class AgentNodes:
    """The `agent` and `tools` nodes of one agent configuration; per-run state is in `GraphRun`."""

    model: Model
    runner: ToolRunner
    system_prompt: str | None = None
    tool_call_retries: int = 2
    output: OutputSpec | None = None
    memory: Memory = field(default_factory=BufferMemory)
    guardrail: Guardrail | None = None
    tracer: Tracer = field(default_factory=NullTracer)
    _system: str = field(init=False, repr=False)
    _output_format: OutputFormat | None = field(init=False, repr=False)

    def __post_init__(self) -> None:
        # As the built-in loop does: the schema in the instructions, and natively
        # to models that take it, on every request that may bring the answer.
        parts = [p for p in (self.system_prompt, self.output and self.output.instructions) if p]
        object.__setattr__(self, "_system", "\n\n".join(parts))
        native = self.output is not None and self.model.supports_output_format
        fmt = self.output.format if native and self.output is not None else None
        object.__setattr__(self, "_output_format", fmt)

    # -- agent -------------------------------------------------------------------------

    async def agent(self, state: GraphState, runtime: Runtime[GraphRun]) -> Update:
        """Ask the model for the next turn and journal it with its calls' admission."""
        run = runtime.context
        log, journal = run.log, run.log.state
        if journal.open_calls and (journaled := _unapplied_turn(journal, state["messages"])):
            return {"messages": [journaled]}  # journaled, then the process stopped: not asked again
        await self._check_bounds(run)
        request = ModelRequest(
            self._context(journal, state["messages"]),
            self.runner.tools.definitions(),
            run.settings,
            self._output_format,
        )
        limits = run.bounds.limits
        if limits.tokens:
            request = await self._fit(request, run)
        try:
            with self.tracer.model_span(
                self.model.model_name,
                provider=self.model.provider,
                settings=request.settings,
                messages=request.messages,
                parent=log.writer.span,
            ) as span:
                response = await self._ask(request, run)
                span.record_response(response)
        except MalformedToolCall as exc:
            await log.append(Correction(error=str(exc), feedback=exc.feedback))
            return {"messages": [Message.user(exc.feedback)]}
        except GuardrailViolation as exc:
            await log.append(RunFailed(reason="guardrail", message=exc.message))
            exc.response = run.response()
            raise
        turn, message = ModelTurn(response=response), response.message
        if limits.tokens and (crossed := limits.after_turn(journal.usage, request, response)):
            await self._stop(run, crossed, turn)
        if not message.tool_calls:
            return await self._answer(run, turn)
        admission = self.runner.admit(log.writer, message.tool_calls)
        batch = len(admission.pending) + len(admission.runnable)
        if crossed := limits.before_tools(journal.tool_calls, batch):
            await self._stop(run, crossed, turn)
        events: list[JournalEvent] = [turn, *(ToolFinished(result=r) for r in admission.refused)]
        if admission.pending:
            events.append(ApprovalRequested(calls=tuple(admission.pending)))
        await log.append(*events)
        return {"messages": [message]}

    def _context(self, journal: ThreadState, messages: list[Message]) -> tuple[Message, ...]:
        """The system prompt, then the part of the graph's conversation the memory chooses."""
        if type(self.memory) is BufferMemory:
            view_messages, context = messages, None  # everything: no positions to move
        else:
            view = self.memory.view(thread_view(journal, messages))
            view_messages, context = list(view.messages), view.context
        system = "\n\n".join(p for p in (self._system, context) if p)
        return (*((Message.system(system),) if system else ()), *view_messages)

    async def _answer(self, run: GraphRun, turn: ModelTurn) -> Update:
        """Journal an answer; one the output schema rejects goes back to the model, corrected."""
        message = turn.response.message
        if self.output is not None:
            _, errors = self.output.parse(message.content)
            if errors:
                feedback = self.output.feedback(errors)
                await run.log.append(turn, OutputRejected(errors=tuple(errors), feedback=feedback))
                return {"messages": [message, Message.user(feedback)]}
        await run.log.append(turn)
        return {"messages": [message]}

    async def _ask(self, request: ModelRequest, run: GraphRun) -> ModelResponse:
        """One model call, its answer screened by the output guardrail.

        When streaming, the model's events go out through LangGraph's custom
        stream as they arrive, text only once the guardrail has let it pass.

        Raises:
            GuardrailViolation: The guardrail blocks the answer; nothing of it was journaled.
        """
        if not run.streaming:
            return screen_response(self.guardrail, await self.model.request(request))
        emit = get_stream_writer()
        response: ModelResponse | None = None
        async with aclosing(screened_stream(self.model, request, self.guardrail)) as chunks:
            async for chunk in chunks:
                if chunk.type == "response":
                    response = chunk.response
                emit(chunk)
        if response is None:
            raise AgentError("The model's stream ended without its final response.")
        return response

    async def _fit(self, request: ModelRequest, run: GraphRun) -> ModelRequest:
        """The call made to fit the token limits, as the built-in loop does (`fit`).

        Raises:
            LimitExceeded: When the call would cross a limit; the run fails, journaled.
        """
        try:
            return run.bounds.limits.fit_model(request, run.log.state.usage, self.model)
        except LimitExceeded as exc:
            await run.log.append(RunFailed(reason="limit", limit=exc.limit, message=exc.message))
            exc.response = run.response()
            raise

    async def _check_bounds(self, run: GraphRun) -> None:
        """Fail the run before the next model call when a bound says so."""
        journal = run.log.state
        if journal.corrections > self.tool_call_retries:
            detail = journal.last_error or "unknown error"
            await run.log.append(RunFailed(reason="tool_call_retries", message=detail))
            raise ToolRetriesExceeded(self.tool_call_retries, detail, response=run.response())
        if self.output is not None and journal.output_retries > self.output.retries:
            detail = journal.last_error or "invalid output"
            await run.log.append(RunFailed(reason="output_validation", message=detail))
            raw = journal.messages[-2].content if len(journal.messages) > 1 else ""
            raise OutputValidationError(raw, detail.split("; "), response=run.response())
        budget = run.bounds.max_iterations
        if journal.iterations >= budget:
            await run.log.append(
                RunFailed(
                    reason="limit", limit="max_iterations", message=f"{budget} iteration(s) used"
                )
            )
            raise MaxIterationsExceeded(budget, response=run.response())
        limits = run.bounds.limits
        if limits.requests is not None and (crossed := limits.before_request(journal.usage)):
            await self._stop(run, crossed)

    async def _stop(
        self, run: GraphRun, crossed: tuple[str, int], turn: ModelTurn | None = None
    ) -> None:
        """End the run at a limit. A turn that crossed it is kept, its calls answered unrun."""
        name, value = crossed
        events: list[JournalEvent] = []
        added: list[Message] = []
        if turn is not None:
            note = f"Not run: the run reached its {name} limit of {value}."
            results = [
                ToolResult(call_id=c.id, name=c.name, content=note, is_error=True)
                for c in turn.response.message.tool_calls
            ]
            events += [turn, *(ToolFinished(result=r) for r in results)]
            added += [turn.response.message, *map(Message.tool, results)]
        events.append(RunFailed(reason="limit", limit=name, message=f"{name} limit of {value}"))
        await run.log.append(*events)
        raise LimitExceeded(name, value, response=run.response(*added))

    # -- tools -------------------------------------------------------------------------

    async def tools(self, state: GraphState, runtime: Runtime[GraphRun]) -> Update:
        """Run the last turn's calls that may run; pause while others wait for a decision.

        Decided calls run as soon as they are decided, as in the built-in
        loop. Each pass of `interrupt()` is answered by one resume, so after a
        partial decision the node runs what was approved and pauses again.
        """
        run = runtime.context
        journal = run.log.state
        while True:
            runnable = [
                journal.approved.get(call_id, call)
                for call_id, call in journal.open_calls.items()
                if call_id not in journal.pending
            ]
            async for event in self._act(run, runnable):
                get_stream_writer()(event)
            if not journal.pending:
                break
            interrupt(
                {
                    "thread_id": run.log.thread_id,
                    "calls": [call.model_dump(mode="json") for call in journal.pending.values()],
                }
            )
        return {"messages": _results(journal, state["messages"])}

    def _act(self, run: GraphRun, calls: list[ToolCall]) -> AsyncIterator[StreamEvent]:
        return self.runner.act(run.log.writer, calls, run.started, streaming=run.streaming)


def _unapplied_turn(journal: ThreadState, messages: list[Message]) -> Message | None:
    """The journal's last model turn, when the graph's state does not have it yet."""
    turn = next((m for m in reversed(journal.messages) if m.role == "assistant"), None)
    if turn is None or not turn.tool_calls or any(m == turn for m in reversed(messages)):
        return None
    return turn


def _results(journal: ThreadState, messages: list[Message]) -> list[Message]:
    """The tool messages answering the graph's last turn, in the order of its calls."""
    turn = next((m for m in reversed(messages) if m.role == "assistant" and m.tool_calls), None)
    if turn is None:
        return []
    wanted = {call.id for call in turn.tool_calls}
    found: dict[str, Message] = {}
    for message in reversed(journal.messages):
        if len(found) == len(wanted):
            break
        call_id = message.tool_call_id
        if message.role == "tool" and call_id is not None and call_id in wanted:
            found.setdefault(call_id, message)
    return [found[call.id] for call in turn.tool_calls if call.id in found]
