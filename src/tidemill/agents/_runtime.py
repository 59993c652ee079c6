"""`AgentRuntime`: the reason/act loop over a journaled thread.

The loop is: think (one model call), then act (run the tool calls), until the
model answers without tool calls or a bound is crossed. Each step is appended
to the thread's journal before its effect: a model turn and the tool calls it
starts are written together, each tool's result as it finishes. A run that
stops (an approval pause, a crash) continues from the journal, in this
process or another, without repeating a finished call.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import (
    AsyncIterator,
    Iterable,
    Mapping,
    Sequence,
)
from contextlib import aclosing
from typing import Unpack

from pydantic import JsonValue

from tidemill._sync import LoopThread
from tidemill.agents._decisions import check_flags
from tidemill.agents._delegation import (
    AgentTool,
    Delegation,
    delegate_broadcast,
    delegate_pipeline,
    first_line,
    with_roster,
)
from tidemill.agents._facade import AgentFacade, Closeable, Prompt, prompt_messages
from tidemill.agents._limits import UsageLimits
from tidemill.agents._loop import (
    RUN_STOPS,
    AgentLoop,
    RunBounds,
    check_loop_options,
    run_stopped,
)
from tidemill.agents._output import OutputSpec
from tidemill.agents._thread import (
    ThreadWriter,
    check_resumable,
    check_startable,
    load_state,
    record_decisions,
)
from tidemill.agents._tool_runner import ToolRunner, tool_registry
from tidemill.agents.checkpoint import Checkpointer, MemoryCheckpointer, fork_thread
from tidemill.agents.guardrails import Guardrail
from tidemill.agents.guardrails._screen import screen_input
from tidemill.agents.journal import (
    JournalRecord,
    ThreadState,
    UserInput,
)
from tidemill.agents.memory import BufferMemory, Memory
from tidemill.agents.tracing import NullTracer, Tracer
from tidemill.errors import (
    AgentInterrupt,
    ConfigurationError,
)
from tidemill.llm import Model, ModelSettings
from tidemill.tools import ToolLike, ToolRegistry
from tidemill.types import (
    AgentResponse,
    Decision,
    StreamEvent,
    ToolCall,
)

__all__ = ["AgentRuntime", "Prompt"]

_log = logging.getLogger("tidemill.agents")


class AgentRuntime(AgentFacade):
    """A tool-calling agent: the reason/act loop, journaled.

    Usually built by `tidemill.agent()`; construct it directly to pass every
    component as an argument.

    Args:
        model: The reasoning model.
        tools: The tools it may call.
        system_prompt: Instructions sent first on every model call.
        name: The agent's name, for logs, tool contexts and delegation.
        max_iterations: Model calls allowed per run before `MaxIterationsExceeded`.
        tool_call_retries: Model turns with a failing tool call (bad arguments,
            an unknown tool, an exception) a run may recover from before
            `ToolRetriesExceeded`. Each also costs an iteration.
        parallel_tools: Run the calls of one turn concurrently.
        max_parallel: At most this many of them at once.
        require_approval: Pause before every tool call, not only those whose
            tool asks for approval.
        checkpointer: Where journals are kept; in memory by default, so
            approval pauses work without configuring anything.
        limits: Usage budgets per run, beside `max_iterations`.
        output: The shape the final answer must have; `AgentResponse.output`
            is then the validated value.
        memory: Which part of a thread each model call sees; the whole thread
            (`BufferMemory`) by default.
        specialists: Agents this one may delegate to, as tools; with any,
            the system prompt gains the roster.
        delegation: Bounds on delegation: nesting depth, fan-out per turn,
            concurrency, and each child's limits.
        guardrail: An input and output policy: what the user sends is
            checked before it is journaled, what the model answers before it
            is journaled or streamed out.
        tracer: Where spans for the run, each model call and each tool call go.
        description: What the agent is good at, for a supervisor that
            delegates to it; its system prompt's first line when not given.
        owned: Components `aclose()` closes with the runtime: those its
            builder made. What else is passed in stays the caller's to close.

    Examples:
        >>> from tidemill.llm import ScriptedModel
        >>> runtime = AgentRuntime(model=ScriptedModel(["Done."]))
        >>> runtime.run("Say done.").output
        'Done.'
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
        self.guardrail = guardrail
        self.tracer: Tracer = tracer or NullTracer()
        self.specialists = {tool.name: tool for tool in specialists}
        for specialist in specialists:
            self.tools.add(specialist)
        self._loop = AgentLoop(
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
        self._sync = LoopThread(f"tidemill-{name}")

    # -- running ---------------------------------------------------------------

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
        """Run the agent until it answers.

        Args:
            prompt: A user's text, a message, or a transcript to start from.
            thread_id: The conversation to continue; a new one when omitted.
                A thread keeps its history across runs.
            max_iterations: This run's budget, instead of the agent's.
            limits: This run's usage limits, instead of the agent's.
            deps: Anything the tools need for this run (a database handle,
                the current user), handed to them as `ToolContext.deps`.
                Never journaled: a resume passes it again.
            **settings: Model settings for this run (`temperature`, ...).

        Returns:
            The answer, the transcript, this run's steps and usage.

        Raises:
            AgentInterrupt: A tool call needs approval; continue with `aresume`.
            MaxIterationsExceeded: The budget ran out; carries the partial run.
            ToolRetriesExceeded: The model kept making failing tool calls.
            ApprovalError: The thread is paused for approval.
            ThreadBusy: The thread has an unfinished run, or another process
                wrote to it meanwhile.
        """
        writer = await self._begin(prompt, thread_id, deps)
        return await self._complete(writer, self._bounds(max_iterations, limits), settings)

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
        """Run the agent, yielding what happens as it happens.

        Yields text and reasoning deltas as the model writes, `ResponseDone`
        after each model call, `ToolCallStart`/`ToolCallEnd` around each tool
        call, then `RunDone` with the response; or `ApprovalRequired` when the
        run pauses, after which the stream ends. A streamed run journals
        exactly what `arun` journals.

        Raises:
            MaxIterationsExceeded: As in `arun`.
            ToolRetriesExceeded: As in `arun`.
        """
        bounds = self._bounds(max_iterations, limits)
        writer = await self._begin(prompt, thread_id, deps)
        try:
            async for event in self._loop.drive(writer, bounds, settings, streaming=True):
                yield event
        except RUN_STOPS as stop:
            yield run_stopped(stop, lambda: self._loop.response(writer))
            raise

    # -- approvals and recovery --------------------------------------------------

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
        """Continue a paused or interrupted run.

        For a run paused for approval, give a decision per pending call,
        keyed by call id: `Decision.approve()`, `Decision.approve(arguments=...)`
        or `Decision.reject(feedback)`. Decisions may cover only some of the
        calls; the run then pauses again for the rest. `approved=True` (with
        optional `edited_arguments` by call id) or `approved=False` (with
        `feedback`) decides every pending call at once.

        A run whose process died (its journal ends mid-run) is continued
        with no decisions: model turns already answered are not asked again
        and tool calls already finished are not run again. A call that was
        started but has no result may still be running in another process,
        so resuming stops with `ThreadBusy` unless `retry_in_flight=True`
        says it is not; it then runs again, with the same
        `ToolContext.idempotency_key` and a higher `attempt`.

        Returns:
            The completed run, its steps across the pause included.

        Raises:
            ApprovalError: The decisions do not fit the thread; nothing is stored.
            ThreadBusy: Another process resumed the thread first, or a call
                is in flight and `retry_in_flight` is False.
            AgentInterrupt: Calls still wait for a decision.

        Examples:
            >>> from tidemill import agent, tool, AgentInterrupt, ToolCall
            >>> @tool(requires_approval=True)
            ... def deploy(env: str) -> str:
            ...     '''Deploy to an environment.'''
            ...     return f"deployed to {env}"
            >>> bot = (agent()
            ...        .llm("fake", responses=["", "Deployed."],
            ...             tool_calls=[[ToolCall(name="deploy", arguments={"env": "prod"})], []])
            ...        .tool(deploy).checkpoint())
            >>> try:
            ...     bot.run("Deploy to prod", thread_id="t1")
            ... except AgentInterrupt as pause:
            ...     resumed = bot.resume("t1", approved=True)
            >>> resumed.output
            'Deployed.'
        """
        check_flags(decisions, approved)
        writer = await record_decisions(
            self.checkpointer,
            self.tools,
            thread_id,
            decisions,
            approved,
            feedback=feedback,
            edited_arguments=edited_arguments,
        )
        state = writer.state
        check_resumable(
            state,
            thread_id,
            decided=decisions is not None or approved is not None,
            retry_in_flight=retry_in_flight,
        )
        writer.retry_in_flight = retry_in_flight
        writer.deps = deps
        return await self._complete(writer, self._bounds(max_iterations, limits), settings)

    # -- specialists ------------------------------------------------------------

    async def abroadcast(self, task: str, *, deps: object = None) -> dict[str, AgentResponse]:
        """Run every specialist on the same task, concurrently; see `broadcast`.

        `deps` goes to every specialist's run, as in `arun`.

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
        """Chain specialists in `order`, each working on the previous answer.

        `deps` goes to every specialist's run, as in `arun`.

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
        return with_roster(self.system_prompt, self.specialists)

    # -- inspection --------------------------------------------------------------

    def native_llm(self) -> Model:
        """Return the `Model` the agent calls.

        Examples:
            >>> from tidemill.llm import ScriptedModel
            >>> AgentRuntime(model=ScriptedModel()).native_llm().provider
            'scripted'
        """
        return self.model

    def native_graph(self) -> object:
        """Refused: the built-in loop has no graph.

        Raises:
            ConfigurationError: Always; build the agent with `.graph()` for one.
        """
        raise ConfigurationError(
            f"The agent {self.name!r} runs the built-in loop, which has no graph.",
            hint="Build it with agent()....graph() to get a LangGraph StateGraph to edit.",
        )

    async def aclose(self) -> None:
        """Close what the runtime owns (what its builder made), once.

        Objects passed in by the caller stay open. The blocking methods stay
        usable; `close()` also stops their thread.
        """
        while self._owned:
            await self._owned.pop().aclose()

    async def astate(self, thread_id: str) -> ThreadState | None:
        """Return the thread's state, folded from its journal, or None if it has none."""
        state = await load_state(self.checkpointer, thread_id)
        return state if state.seq else None

    async def apending_approvals(self, thread_id: str) -> list[ToolCall]:
        """Return the calls waiting for a decision on the thread, or `[]`."""
        state = await load_state(self.checkpointer, thread_id)
        return list(state.pending.values())

    async def ahistory(self, thread_id: str, limit: int | None = 20) -> list[JournalRecord]:
        """Return the thread's last `limit` journal records (all with None), oldest first.

        This is the audit trail: every model turn, tool call, approval
        request and decision, with when it was written. A thread compacted
        by `max_history` starts with its `snapshot` record. Any record's
        `seq` can be passed to `afork`.
        """
        records = await self.checkpointer.read(thread_id)
        return records[-limit:] if limit else records

    async def afork(self, thread_id: str, *, at: int, new_thread_id: str | None = None) -> str:
        """Start a new thread from the state of `thread_id` as of its record `at`; return its id.

        Time travel: the new thread holds the conversation, usage and pending
        approvals as they were at that record, and runs (or resumes)
        independently of the original. See `tidemill.agents.checkpoint.fork_thread`.

        Raises:
            HistoryUnavailable: When `at` is not a stored record (compacted, or not yet written).
            InvalidOption: When `new_thread_id` already has records.
        """
        return await fork_thread(self.checkpointer, thread_id, at=at, new_thread_id=new_thread_id)

    def describe(self) -> dict[str, JsonValue]:
        """Return a JSON-safe description of the agent's configuration."""
        return {
            "name": self.name,
            "runtime": "builtin",
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
        }

    # -- the loop ----------------------------------------------------------------

    async def _begin(self, prompt: Prompt, thread_id: str | None, deps: object) -> ThreadWriter:
        # Checked before anything is journaled: a blocked input stores nothing.
        messages = screen_input(self.guardrail, prompt_messages(prompt))
        if thread_id is None:
            state = ThreadState("thread_" + secrets.token_hex(12))
        else:
            state = await load_state(self.checkpointer, thread_id)
        check_startable(state)
        writer = ThreadWriter(self.checkpointer, state)
        writer.deps = deps
        run_id = "run_" + secrets.token_hex(8)
        await writer.append(UserInput(messages=messages, run_id=run_id))
        await self._loop.remember(writer)
        return writer

    async def _complete(
        self, writer: ThreadWriter, bounds: RunBounds, settings: ModelSettings
    ) -> AgentResponse:
        done: AgentResponse | None = None
        async with aclosing(self._loop.drive(writer, bounds, settings, streaming=False)) as events:
            # Read to the end rather than returning at `done`: a generator that
            # finishes on its own is cheaper to close than one that is interrupted.
            async for event in events:
                if event.type == "done":
                    done = event.response
                elif event.type == "approval_required":
                    raise AgentInterrupt(
                        thread_id=writer.thread_id,
                        pending=event.calls,
                        response=self._loop.response(writer),
                    )
        if done is None:  # pragma: no cover
            raise AssertionError("the loop ended without an outcome")
        return done

    def _bounds(self, max_iterations: int | None, limits: UsageLimits | None) -> RunBounds:
        return RunBounds.of(max_iterations, limits, self.max_iterations, self.limits)
