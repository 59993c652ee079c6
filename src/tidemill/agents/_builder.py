"""`AgentBuilder`: the fluent way to put an agent together."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, Self, Unpack

from pydantic import JsonValue

from tidemill._sync import LoopThread
from tidemill.agents._delegation import AgentTool, Delegation, Worker
from tidemill.agents._facade import AgentFacade, Prompt
from tidemill.agents._limits import UsageLimits
from tidemill.agents._output import OutputSpec
from tidemill.agents._runtime import AgentRuntime
from tidemill.agents.checkpoint import Checkpointer, MemoryCheckpointer, resolve_checkpointer
from tidemill.agents.guardrails import Guardrail, resolve_guardrail
from tidemill.agents.journal import JournalRecord, ThreadState
from tidemill.agents.memory import Memory, resolve_memory
from tidemill.agents.tracing import Tracer, resolve_tracer
from tidemill.errors import ConfigurationError
from tidemill.llm import Model, ModelSettings, resolve_model
from tidemill.tools import ToolLike, ToolRegistry
from tidemill.types import AgentResponse, Decision, StreamEvent, ToolCall

if TYPE_CHECKING:
    from tidemill.agents.graph import GraphRuntime
    from tidemill.tools.mcp import MCPServer, MCPServerOptions

__all__ = ["AgentBuilder", "agent"]


class _Closeable(Protocol):
    async def aclose(self) -> None: ...


def agent() -> AgentBuilder:
    """Start building an agent.

    Example:
        >>> from tidemill import agent
        >>> print(agent().llm("fake", responses=["Hello!"]).run("Say hello"))
        Hello!
    """
    return AgentBuilder()


class AgentBuilder(AgentFacade):
    """Fluent configuration for an agent; runs it too.

    Each method sets one thing and returns the builder. The agent is built on
    first use (or by `build()`) and rebuilt after a later change. Components
    given as strings (`"fake"`, `"sqlite"`) are created right away, so a
    mistake shows where it is made; components given as objects are used as
    they are and stay the caller's to close.

    Example:
        >>> from tidemill import agent, tool
        >>> @tool
        ... def now() -> str:
        ...     '''Return the current time.'''
        ...     return "12:00"
        >>> bot = (agent()
        ...        .llm("fake", responses=["It is 12:00."])
        ...        .tool(now)
        ...        .system("Answer briefly.")
        ...        .max_iterations(5))
        >>> bot.run("What time is it?").output
        'It is 12:00.'
    """

    def __init__(self) -> None:
        self._model: Model | None = None
        self._registry = ToolRegistry()
        self._system: str | None = None
        self._name = "agent"
        self._max_iterations = 10
        self._tool_call_retries = 2
        self._parallel = True
        self._max_parallel = 8
        self._approval = False
        self._checkpointer: Checkpointer | None = None
        self._limits = UsageLimits()
        self._output: OutputSpec | None = None
        self._memory: Memory | None = None
        self._specialists: dict[str, AgentTool] = {}
        self._delegation = Delegation()
        self._guardrail: Guardrail | None = None
        self._tracer: Tracer | None = None
        self._owned: list[_Closeable] = []
        self._runtime: AgentRuntime | GraphRuntime | None = None
        self._graph = False
        self._sync = LoopThread("tidemill-agent")

    # -- configuration -----------------------------------------------------------

    def llm(self, spec: str | Model | Sequence[str | Model], /, **config: Any) -> Self:
        """Choose the model.

        Args:
            spec: `"provider:model"` (`"openai:gpt-4o-mini"`), a bare model id,
                `"fake"` for the offline scripted model, a `Model`, or a list of
                them: the first answers, and the next takes over on rate limits,
                timeouts and provider outages.
            **config: Options for the model. The scripted model takes
                `responses=`, `tool_calls=`, `handler=` and `strict=`.

        Raises:
            ConfigurationError: For an unknown provider or option.

        Example:
            >>> from tidemill import agent
            >>> _ = agent().llm("fake", responses=["ok"], strict=True)
        """
        model = resolve_model(spec, **config)
        if not isinstance(spec, Model):
            self._owned.append(model)
        self._model = model
        return self._changed()

    def tool(self, *tools: ToolLike) -> Self:
        """Bind tools: `@tool` functions, `Tool` objects or plain functions.

        Raises:
            ConfigurationError: When something is not a tool, or a name is taken.
        """
        for item in tools:
            self._registry.add(item)
        return self._changed()

    def tools(self, tools: Iterable[ToolLike]) -> Self:
        """Bind a sequence of tools; see `tool`."""
        return self.tool(*tools)

    def mcp(self, server: MCPServer | None = None, /, **options: Unpack[MCPServerOptions]) -> Self:
        """Connect an MCP server and bind its tools, named `{server}__{tool}`.

        Call it once per server: `command=`/`args=`/`env=` start one as a
        subprocess (stdio), `url=`/`headers=` reach one that is running
        (streamable HTTP); `name=` sets the prefix of its tools. The
        connection is made now, on this builder's own event loop, so a
        server that cannot be reached fails here with `MCPConnectionError`,
        never as an empty tool list; `close()` shuts it down. Needs
        `pip install 'tidemill[mcp]'`.

        Raises:
            MCPConnectionError: When the server cannot be started, reached or initialised.
            MissingDependencyError: When the `mcp` extra is not installed.
        """
        from tidemill.tools.mcp import MCPConnection

        connection = MCPConnection(server, **options)
        self._sync.run(connection.aconnect())
        self._owned.append(connection)
        return self.tool(*connection.tools)

    def system(self, prompt: str) -> Self:
        """Set the instructions sent first on every model call."""
        self._system = prompt
        return self._changed()

    def name(self, value: str) -> Self:
        """Name the agent.

        Its run's trace span (`invoke_agent {name}`), `ToolContext.agent` and
        `describe()` carry the name. Specialists are named by `.agent(name, ...)`.
        """
        if not value:
            raise ConfigurationError("An agent's name must not be empty.")
        self._name = value
        return self._changed()

    def max_iterations(self, limit: int) -> Self:
        """Set how many model calls a run may make before `MaxIterationsExceeded`.

        Raises:
            ConfigurationError: If `limit` is less than 1.
        """
        if limit < 1:
            raise ConfigurationError(
                f"max_iterations must be at least 1, not {limit}.",
                hint="It bounds the model calls of one run.",
            )
        self._max_iterations = limit
        return self._changed()

    def tool_call_retries(self, limit: int) -> Self:
        """Set how many turns with a failing tool call a run may recover from.

        A failing call (an unknown tool, arguments that are not JSON or fail
        the schema, an exception in the tool, a call the provider could not
        parse) goes back to the model as an error it can correct. Each such
        turn uses one retry and one iteration; `0` fails on the first.

        Raises:
            ConfigurationError: If `limit` is negative.

        Example:
            >>> from tidemill import agent
            >>> _ = agent().llm("fake").tool_call_retries(3)
        """
        if limit < 0:
            raise ConfigurationError(f"tool_call_retries must not be negative, not {limit}.")
        self._tool_call_retries = limit
        return self._changed()

    def parallel_tools(self, enabled: bool = True, *, max_parallel: int | None = None) -> Self:
        """Run the tool calls of one turn concurrently, at most `max_parallel` at once.

        `False` runs them one after another, for tools that share state.
        """
        if max_parallel is not None:
            if max_parallel < 1:
                raise ConfigurationError("max_parallel must be at least 1.")
            self._max_parallel = max_parallel
        self._parallel = enabled
        return self._changed()

    def human_in_the_loop(self, enabled: bool = True) -> Self:
        """Pause for a human decision before every tool call.

        Single tools can ask for it with `@tool(requires_approval=True)`. A
        pause is stored by the checkpointer, in memory unless `checkpoint()`
        chose another.
        """
        self._approval = enabled
        return self._changed()

    def checkpoint(self, spec: str | Checkpointer | None = None, /, **config: Any) -> Self:
        """Choose where threads' journals are kept.

        Args:
            spec: `"memory"` (the default), `"sqlite"` (with `path=`), a
                `sqlite:///` or `postgresql://` URL, `"postgres"` (with `url=`),
                or a `Checkpointer`.
            **config: Options for the checkpointer (`path=`, `url=`, `schema=`).

        Example:
            >>> import pathlib, tempfile
            >>> from tidemill import agent
            >>> path = pathlib.Path(tempfile.mkdtemp()) / "agent.db"
            >>> _ = agent().llm("fake").checkpoint("sqlite", path=path)
        """
        checkpointer = resolve_checkpointer(spec, **config)
        if spec is None or isinstance(spec, str):
            self._owned.append(checkpointer)
        self._checkpointer = checkpointer
        return self._changed()

    def agent(self, name: str, worker: Worker, description: str = "") -> Self:
        """Add a specialist, making this agent a supervisor that can delegate to it.

        The specialist becomes a tool named `name` that takes a `task`; it runs
        on a thread of its own and sees only that task. Its answer comes back
        as the tool's result, and what it spent rolls up into this run's usage.

        Args:
            name: The name the supervisor delegates by.
            worker: An agent builder, a runtime, or anything with `arun` and `astate`.
            description: What the specialist is good at; the supervisor routes on it.

        Example:
            >>> from tidemill import agent
            >>> _ = (agent().llm("fake")
            ...      .agent("researcher", agent().llm("fake"),
            ...             "Finds and summarises source material."))
        """
        if name in self._specialists or name in self._registry:
            raise ConfigurationError(f"A tool or specialist is already named {name!r}.")
        self._specialists[name] = AgentTool(
            worker, name=name, description=description, delegation=self._delegation
        )
        return self._changed()

    def delegation(
        self,
        *,
        max_depth: int = 3,
        max_fan_out: int = 4,
        max_concurrency: int = 4,
        child_limits: UsageLimits | None = None,
    ) -> Self:
        """Bound delegation to specialists; see `Delegation`."""
        self._delegation = Delegation(
            max_depth=max_depth,
            max_fan_out=max_fan_out,
            max_concurrency=max_concurrency,
            child_limits=child_limits,
        )
        self._specialists = {
            name: AgentTool(
                tool.worker, name=name, description=tool.description, delegation=self._delegation
            )
            for name, tool in self._specialists.items()
        }
        return self._changed()

    def memory(self, spec: str | Memory = "window", /, **config: Any) -> Self:
        """Choose which part of a thread each model call sees.

        The journal keeps the whole thread whatever is chosen; a thread is
        keyed by the `thread_id` of `run`. Without a call to `memory`, the
        whole thread is sent.

        Args:
            spec: `"window"` (the last `size=` messages, 20 by default, never
                splitting a tool call from its result), `"buffer"` (everything),
                `"summary"` (older turns condensed by the model; `max_messages=`,
                `keep_last=`), `"off"` (only the current run), or a `Memory`.
            **config: Options of the chosen memory.

        Raises:
            ConfigurationError: For an unknown memory or option.

        Example:
            >>> from tidemill import agent
            >>> _ = agent().llm("fake").memory("window", size=10)
        """
        self._memory = resolve_memory(spec, **config)
        return self._changed()

    def guardrails(self, spec: str | Guardrail | None = None, /, **config: Any) -> Self:
        """Check what goes in and what comes out for personal data and secrets.

        Args:
            spec: `"rules"` (the default: the dependency-free `RuleGuardrail`)
                or a `Guardrail` of your own.
            **config: Options of the rule guardrail: `pii=`, `secrets=`,
                `on_violation="redact" | "block"`, `categories=`, `patterns=`.

        The user's input is checked before it is journaled; each model answer
        before it is journaled or streamed out (a streamed answer is held back
        only as much as a match could still need). Redacting replaces matches
        with placeholders such as `[EMAIL]`; blocking raises `GuardrailViolation`.

        Example:
            >>> from tidemill import agent
            >>> bot = agent().llm("fake", responses=["Write to ann@example.org."])
            >>> bot.guardrails(pii=True, on_violation="redact").run("Contact?").output
            'Write to [EMAIL].'
        """
        self._guardrail = resolve_guardrail(spec, **config)
        return self._changed()

    def observe(self, spec: str | Tracer | None = None, /, **config: Any) -> Self:
        """Trace runs, model calls and tool calls.

        Args:
            spec: `"console"` (the default), `"memory"` (for tests), `"otel"`
                (OpenTelemetry, GenAI semantic conventions; the `otel` extra),
                `"none"`, or a `Tracer`.
            **config: Tracer options, such as `capture_content=True` to record
                message text (off by default: prompts may hold secrets).
        """
        self._tracer = resolve_tracer(spec, **config)
        return self._changed()

    def limits(
        self,
        *,
        requests: int | None = None,
        tool_calls: int | None = None,
        input_tokens: int | None = None,
        output_tokens: int | None = None,
        total_tokens: int | None = None,
    ) -> Self:
        """Cap what one run may spend, across pauses and resumes.

        A limit is checked before the work that would cross it (a model call,
        a turn's whole batch of tool calls); token limits once a model has
        answered, before any of its tool calls runs. Crossing one raises
        `LimitExceeded` naming it, with the partial run.

        Raises:
            ConfigurationError: If a limit is less than 1.

        Example:
            >>> from tidemill import agent
            >>> _ = agent().llm("fake").limits(requests=5, total_tokens=20_000)
        """
        self._limits = UsageLimits(
            requests=requests,
            tool_calls=tool_calls,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            total_tokens=total_tokens,
        )
        return self._changed()

    def output(
        self,
        output: type[Any] | Mapping[str, JsonValue],
        /,
        *,
        retries: int = 2,
        strict: bool = False,
    ) -> Self:
        """Require the final answer to have a shape.

        Models that take a native output format get the schema in their
        provider's form (OpenAI's `json_schema`, Gemini's `responseSchema`, a
        forced tool on Anthropic and Bedrock); the answer is validated here
        whatever the model.

        Args:
            output: A pydantic model (or any type pydantic can validate), or a
                JSON Schema dict. `AgentResponse.output` is then the validated
                instance, or the validated JSON value for a schema.
            retries: Invalid answers the model may correct, seeing the
                validation errors, before `OutputValidationError`.
            strict: Ask for OpenAI's strict mode; the schema is rewritten to
                fit it (other providers ignore the flag).

        Raises:
            ConfigurationError: For a type without a schema, an invalid schema,
                or `strict` with a schema strict mode cannot express.

        Example:
            >>> from pydantic import BaseModel
            >>> from tidemill import agent
            >>> class Verdict(BaseModel):
            ...     approve: bool
            ...     reason: str
            >>> bot = agent().llm("fake", responses=['{"approve": true, "reason": "ok"}'])
            >>> bot.output(Verdict).run("Approve?").output
            Verdict(approve=True, reason='ok')
        """
        self._output = OutputSpec.of(output, retries=retries, strict=strict)
        return self._changed()

    def graph(self, enabled: bool = True) -> Self:
        """Run the agent as a LangGraph graph (`GraphRuntime`) instead of the built-in loop.

        The same tools, approvals, limits, tracing and checkpointer apply, and
        the graph's state goes through the checkpointer, so a graph thread
        survives a restart too. `native_graph()` returns the `StateGraph` to
        edit; `recompile()` applies the edits. Needs `pip install 'tidemill[graph]'`.
        Structured output, memory, guardrails and specialists are not
        supported by the graph runtime yet; building with them raises
        `ConfigurationError`.
        """
        self._graph = enabled
        return self._changed()

    def native_graph(self) -> Any:
        """Return the LangGraph `StateGraph` of a graph-backed agent, to add nodes and edges.

        Raises:
            ConfigurationError: When the agent was not built with `.graph()`.
        """
        return self._graph_runtime().native_graph()

    def recompile(self) -> None:
        """Compile the edited graph; later runs use it.

        Raises:
            ConfigurationError: When the agent was not built with `.graph()`.
        """
        self._graph_runtime().recompile()

    # -- building ----------------------------------------------------------------

    def build(self) -> AgentRuntime | GraphRuntime:
        """Build the agent, or return the one already built.

        Raises:
            ConfigurationError: When no model was chosen, or `.graph()` was
                combined with what the graph runtime does not support.
            MissingDependencyError: For `.graph()` without the `graph` extra.
        """
        if self._runtime is not None:
            return self._runtime
        if self._model is None:
            raise ConfigurationError(
                "The agent has no model.",
                hint="Choose one with .llm('provider:model'), or .llm('fake') offline.",
            )
        if self._checkpointer is None:
            # Kept across rebuilds, so a pause survives a later configuration change.
            self._checkpointer = MemoryCheckpointer()
        if self._graph:
            self._runtime = self._build_graph(self._model, self._checkpointer)
            return self._runtime
        self._runtime = AgentRuntime(
            model=self._model,
            tools=self._registry,
            system_prompt=self._system,
            name=self._name,
            max_iterations=self._max_iterations,
            tool_call_retries=self._tool_call_retries,
            parallel_tools=self._parallel,
            max_parallel=self._max_parallel,
            require_approval=self._approval,
            checkpointer=self._checkpointer,
            limits=self._limits,
            output=self._output,
            memory=self._memory,
            specialists=list(self._specialists.values()),
            delegation=self._delegation,
            guardrail=self._guardrail,
            tracer=self._tracer,
        )
        return self._runtime

    def _build_graph(self, model: Model, checkpointer: Checkpointer) -> GraphRuntime:
        unsupported = [
            name
            for name, used in (
                ("output()", self._output is not None),
                ("memory()", self._memory is not None),
                ("guardrails()", self._guardrail is not None),
                ("agent()", bool(self._specialists)),
            )
            if used
        ]
        if unsupported:
            raise ConfigurationError(
                "The graph runtime does not support " + ", ".join(unsupported) + " yet.",
                hint="Drop them, or build the agent without .graph().",
            )
        from tidemill.agents.graph import GraphRuntime

        return GraphRuntime(
            model=model,
            tools=self._registry,
            system_prompt=self._system,
            name=self._name,
            max_iterations=self._max_iterations,
            tool_call_retries=self._tool_call_retries,
            parallel_tools=self._parallel,
            max_parallel=self._max_parallel,
            require_approval=self._approval,
            checkpointer=checkpointer,
            limits=self._limits,
            tracer=self._tracer,
        )

    def _graph_runtime(self) -> GraphRuntime:
        runtime = self.build()
        if isinstance(runtime, AgentRuntime):
            raise ConfigurationError(
                "This agent runs the built-in loop, which has no graph.",
                hint="Build it with .graph() to get a LangGraph StateGraph to edit.",
            )
        return runtime

    def _loop_runtime(self) -> AgentRuntime:
        runtime = self.build()
        if not isinstance(runtime, AgentRuntime):
            raise ConfigurationError(
                "Specialists need the built-in loop; this agent was built with .graph()."
            )
        return runtime

    # -- running (see AgentRuntime for the details) ---------------------------------

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
        """Run the agent until it answers; see `AgentRuntime.arun`."""
        return await self.build().arun(
            prompt,
            thread_id=thread_id,
            max_iterations=max_iterations,
            limits=limits,
            deps=deps,
            **settings,
        )

    def astream(
        self,
        prompt: Prompt,
        *,
        thread_id: str | None = None,
        max_iterations: int | None = None,
        limits: UsageLimits | None = None,
        deps: object = None,
        **settings: Unpack[ModelSettings],
    ) -> AsyncIterator[StreamEvent]:
        """Run the agent, yielding events; see `AgentRuntime.astream`."""
        return self.build().astream(
            prompt,
            thread_id=thread_id,
            max_iterations=max_iterations,
            limits=limits,
            deps=deps,
            **settings,
        )

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
        """Continue a paused or interrupted run; see `AgentRuntime.aresume`."""
        return await self.build().aresume(
            thread_id,
            decisions,
            approved=approved,
            feedback=feedback,
            edited_arguments=edited_arguments,
            retry_in_flight=retry_in_flight,
            max_iterations=max_iterations,
            limits=limits,
            deps=deps,
            **settings,
        )

    async def abroadcast(self, task: str, *, deps: object = None) -> dict[str, AgentResponse]:
        """Run every specialist on the same task; see `AgentRuntime.abroadcast`."""
        return await self._loop_runtime().abroadcast(task, deps=deps)

    def broadcast(self, task: str, *, deps: object = None) -> dict[str, AgentResponse]:
        """Blocking `abroadcast`."""
        return self._sync.run(self.abroadcast(task, deps=deps))

    async def apipeline(
        self, task: str, order: Sequence[str], *, deps: object = None
    ) -> AgentResponse:
        """Chain specialists; see `AgentRuntime.apipeline`."""
        return await self._loop_runtime().apipeline(task, order, deps=deps)

    def pipeline(self, task: str, order: Sequence[str], *, deps: object = None) -> AgentResponse:
        """Blocking `apipeline`."""
        return self._sync.run(self.apipeline(task, order, deps=deps))

    async def astate(self, thread_id: str) -> ThreadState | None:
        """Return the thread's state, folded from its journal, or None."""
        return await self.build().astate(thread_id)

    async def apending_approvals(self, thread_id: str) -> list[ToolCall]:
        """Return the calls waiting for a decision on the thread."""
        return await self.build().apending_approvals(thread_id)

    async def ahistory(self, thread_id: str, limit: int | None = None) -> list[JournalRecord]:
        """Return the thread's journal, oldest first: the audit trail."""
        return await self.build().ahistory(thread_id, limit)

    def describe(self) -> dict[str, JsonValue]:
        """Return a JSON-safe description of the agent."""
        return self.build().describe()

    async def aclose(self) -> None:
        """Close the components this builder created from strings.

        Objects passed in (a `Model`, a `Checkpointer`) stay open; they are
        the caller's to close.
        """
        owned, self._owned = self._owned, []
        for component in owned:
            await component.aclose()
        if self._runtime is not None:
            self._runtime.close()
            self._runtime = None

    def close(self) -> None:
        """Blocking `aclose`; also stops the thread behind the blocking methods."""
        self._sync.run(self.aclose())
        self._sync.close()

    def _changed(self) -> Self:
        self._runtime = None
        return self
