"""`AgentBuilder`: the fluent way to put an agent together.

Its methods fill in a `Blueprint` (`_blueprint`), which builds the runtime;
the runs themselves go to that runtime through `RuntimeFront` (`_front`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, Self, Unpack

from pydantic import JsonValue

from tidemill._sync import LoopThread
from tidemill.agents._blueprint import Blueprint
from tidemill.agents._delegation import AgentTool, Delegation, Worker
from tidemill.agents._front import RuntimeFront
from tidemill.agents._limits import UsageLimits
from tidemill.agents._output import OutputSpec
from tidemill.agents._runtime import AgentRuntime
from tidemill.agents.checkpoint import Checkpointer, resolve_checkpointer
from tidemill.agents.guardrails import Guardrail, resolve_guardrail
from tidemill.agents.memory import Memory, resolve_memory
from tidemill.agents.tracing import Tracer, resolve_tracer
from tidemill.errors import ConfigurationError
from tidemill.llm import Model, resolve_model
from tidemill.tools import ToolLike

if TYPE_CHECKING:
    from tidemill.agents.graph import GraphRuntime
    from tidemill.tools.mcp import MCPServer, MCPServerOptions

__all__ = ["AgentBuilder", "agent"]


class _Closeable(Protocol):
    async def aclose(self) -> None: ...


def agent() -> AgentBuilder:
    """Start building an agent.

    Examples:
        >>> from tidemill import agent
        >>> print(agent().llm("fake", responses=["Hello!"]).run("Say hello"))
        Hello!
    """
    return AgentBuilder()


class AgentBuilder(RuntimeFront):
    """Fluent configuration for an agent; runs it too.

    Each method sets one thing and returns the builder. The agent is built on
    first use (or by `build()`) and rebuilt after a later change. Components
    given as strings (`"fake"`, `"sqlite"`) are created right away, so a
    mistake shows where it is made; components given as objects are used as
    they are and stay the caller's to close.

    Examples:
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
        self._blueprint = Blueprint()
        self._owned: list[_Closeable] = []
        self._runtime: AgentRuntime | GraphRuntime | None = None
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

        Examples:
            >>> from tidemill import agent
            >>> _ = agent().llm("fake", responses=["ok"], strict=True)
        """
        model = resolve_model(spec, **config)
        if not isinstance(spec, Model):
            self._owned.append(model)
        self._blueprint.model = model
        return self._changed()

    def tool(self, *tools: ToolLike) -> Self:
        """Bind tools: `@tool` functions, `Tool` objects or plain functions.

        Raises:
            ConfigurationError: When something is not a tool, or a name is taken.
        """
        for item in tools:
            self._blueprint.registry.add(item)
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
        self._blueprint.system = prompt
        return self._changed()

    def name(self, value: str) -> Self:
        """Name the agent.

        Its run's trace span (`invoke_agent {name}`), `ToolContext.agent` and
        `describe()` carry the name. Specialists are named by `.agent(name, ...)`.
        """
        if not value:
            raise ConfigurationError("An agent's name must not be empty.")
        self._blueprint.name = value
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
        self._blueprint.max_iterations = limit
        return self._changed()

    def tool_call_retries(self, limit: int) -> Self:
        """Set how many turns with a failing tool call a run may recover from.

        A failing call (an unknown tool, arguments that are not JSON or fail
        the schema, an exception in the tool, a call the provider could not
        parse) goes back to the model as an error it can correct. Each such
        turn uses one retry and one iteration; `0` fails on the first.

        Raises:
            ConfigurationError: If `limit` is negative.

        Examples:
            >>> from tidemill import agent
            >>> _ = agent().llm("fake").tool_call_retries(3)
        """
        if limit < 0:
            raise ConfigurationError(f"tool_call_retries must not be negative, not {limit}.")
        self._blueprint.tool_call_retries = limit
        return self._changed()

    def parallel_tools(self, enabled: bool = True, *, max_parallel: int | None = None) -> Self:
        """Run the tool calls of one turn concurrently, at most `max_parallel` at once.

        `False` runs them one after another, for tools that share state.
        """
        if max_parallel is not None:
            if max_parallel < 1:
                raise ConfigurationError("max_parallel must be at least 1.")
            self._blueprint.max_parallel = max_parallel
        self._blueprint.parallel = enabled
        return self._changed()

    def human_in_the_loop(self, enabled: bool = True) -> Self:
        """Pause for a human decision before every tool call.

        Single tools can ask for it with `@tool(requires_approval=True)`. A
        pause is stored by the checkpointer, in memory unless `checkpoint()`
        chose another.
        """
        self._blueprint.approval = enabled
        return self._changed()

    def checkpoint(self, spec: str | Checkpointer | None = None, /, **config: Any) -> Self:
        """Choose where threads' journals are kept.

        Args:
            spec: `"memory"` (the default), `"sqlite"` (with `path=`), a
                `sqlite:///` or `postgresql://` URL, `"postgres"` (with `url=`),
                or a `Checkpointer`.
            **config: Options for the checkpointer (`path=`, `url=`, `schema=`).

        Examples:
            >>> import pathlib, tempfile
            >>> from tidemill import agent
            >>> path = pathlib.Path(tempfile.mkdtemp()) / "agent.db"
            >>> _ = agent().llm("fake").checkpoint("sqlite", path=path)
        """
        checkpointer = resolve_checkpointer(spec, **config)
        if spec is None or isinstance(spec, str):
            self._owned.append(checkpointer)
        self._blueprint.checkpointer = checkpointer
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

        Examples:
            >>> from tidemill import agent
            >>> _ = (agent().llm("fake")
            ...      .agent("researcher", agent().llm("fake"),
            ...             "Finds and summarises source material."))
        """
        if name in self._blueprint.specialists or name in self._blueprint.registry:
            raise ConfigurationError(f"A tool or specialist is already named {name!r}.")
        self._blueprint.specialists[name] = AgentTool(
            worker, name=name, description=description, delegation=self._blueprint.delegation
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
        self._blueprint.delegation = Delegation(
            max_depth=max_depth,
            max_fan_out=max_fan_out,
            max_concurrency=max_concurrency,
            child_limits=child_limits,
        )
        self._blueprint.specialists = {
            name: AgentTool(
                tool.worker,
                name=name,
                description=tool.description,
                delegation=self._blueprint.delegation,
            )
            for name, tool in self._blueprint.specialists.items()
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

        Examples:
            >>> from tidemill import agent
            >>> _ = agent().llm("fake").memory("window", size=10)
        """
        self._blueprint.memory = resolve_memory(spec, **config)
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

        Examples:
            >>> from tidemill import agent
            >>> bot = agent().llm("fake", responses=["Write to ann@example.org."])
            >>> bot.guardrails(pii=True, on_violation="redact").run("Contact?").output
            'Write to [EMAIL].'
        """
        self._blueprint.guardrail = resolve_guardrail(spec, **config)
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
        self._blueprint.tracer = resolve_tracer(spec, **config)
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

        Examples:
            >>> from tidemill import agent
            >>> _ = agent().llm("fake").limits(requests=5, total_tokens=20_000)
        """
        self._blueprint.limits = UsageLimits(
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

        Examples:
            >>> from pydantic import BaseModel
            >>> from tidemill import agent
            >>> class Verdict(BaseModel):
            ...     approve: bool
            ...     reason: str
            >>> bot = agent().llm("fake", responses=['{"approve": true, "reason": "ok"}'])
            >>> bot.output(Verdict).run("Approve?").output
            Verdict(approve=True, reason='ok')
        """
        self._blueprint.output = OutputSpec.of(output, retries=retries, strict=strict)
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
        self._blueprint.graph = enabled
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
        if self._runtime is None:
            self._runtime = self._blueprint.build()
        return self._runtime

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
