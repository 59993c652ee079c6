"""`AgentBuilder`: the fluent way to put an agent together.

Its methods fill in a `Blueprint` (`_blueprint`), which builds the runtime;
the runs themselves go to that runtime through `RuntimeFront` (`_front`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from pydantic import JsonValue

from tidemill._sync import LoopThread
from tidemill.agents import _slots
from tidemill.agents._blueprint import Blueprint
from tidemill.agents._builder_components import ComponentMethods
from tidemill.agents._components import Components
from tidemill.agents._delegation import AgentTool, Delegation, Worker
from tidemill.agents._facade import Closeable
from tidemill.agents._front import RuntimeFront
from tidemill.agents._limits import UsageLimits
from tidemill.agents._output import OutputSpec
from tidemill.agents._runtime import AgentRuntime
from tidemill.agents._slots import default_model_spec
from tidemill.errors import ConfigurationError, InvalidOption
from tidemill.tools import ToolLike

if TYPE_CHECKING:
    from tidemill.agents.graph import GraphRuntime

__all__ = ["AgentBuilder", "agent"]

T = TypeVar("T")


def agent() -> AgentBuilder:
    """Start building an agent.

    Examples:
        >>> from tidemill import agent
        >>> print(agent().llm("fake", responses=["Hello!"]).run("Say hello"))
        Hello!
    """
    return AgentBuilder()


class AgentBuilder(ComponentMethods, RuntimeFront):
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
        self._components = Components()
        self._owned: list[Closeable] = []
        self._runtime: AgentRuntime | GraphRuntime | None = None
        self._sync = LoopThread("tidemill-agent")

    # -- configuration -----------------------------------------------------------

    def tool(self, *tools: ToolLike | str | None) -> Self:
        """Bind tools: `@tool` functions, `Tool` objects, plain functions, or names.

        A name is one bound with `bind(name, tool)` or registered by a plugin
        in the `tidemill.tools` entry point group. `None` is skipped, so a
        tool can be left out by a condition: `.tool(search if online else None)`.

        Raises:
            ConfigurationError: When something is not a tool, a name is
                unknown, or a tool's name is taken.
        """
        for item in tools:
            if item is None:
                continue
            if isinstance(item, str):
                item = cast(ToolLike, self._components.make(_slots.TOOL, item, {}).component)
            self._blueprint.registry.add(item)
        return self._changed()

    def tools(self, tools: Iterable[ToolLike]) -> Self:
        """Bind a sequence of tools; see `tool`."""
        return self.tool(*tools)

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

    def description(self, text: str) -> Self:
        """Say what the agent is good at, for a supervisor that delegates to it.

        A specialist added with `.agent(name, worker)` and no description of
        its own is described by this; without it, by the first line of the
        worker's system prompt.

        Examples:
            >>> from tidemill import agent
            >>> editor = agent().llm("fake").description("Fixes grammar and style.")
            >>> boss = agent().llm("fake").agent("editor", editor)
            >>> boss.describe()["team"]
            {'editor': 'Fixes grammar and style.'}
        """
        self._blueprint.description = text.strip() or None
        return self._changed()

    def routing(self, prompt: str) -> Self:
        r"""Replace a supervisor's routing instructions.

        They follow `.system()` in the supervisor's system prompt; `{roster}`
        in `prompt` becomes one line per specialist (`- name: description`).

        Raises:
            ConfigurationError: For an empty prompt.

        Examples:
            >>> from tidemill import agent
            >>> boss = (agent().llm("fake")
            ...         .agent("maths", agent().llm("fake"), "Does sums.")
            ...         .routing("Send sums to the right colleague:\n{roster}"))
            >>> boss.describe()["system_prompt"] is None
            True
        """
        if not prompt.strip():
            raise ConfigurationError(
                "The routing prompt is empty.",
                hint="Give the instructions, with {roster} where the specialists are listed.",
            )
        self._blueprint.routing_prompt = prompt
        return self._changed()

    def max_iterations(self, limit: int) -> Self:
        """Set how many model calls a run may make before `MaxIterationsExceeded`.

        Raises:
            ConfigurationError: If `limit` is less than 1.
        """
        if limit < 1:
            raise InvalidOption(
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
            InvalidOption: If `limit` is negative (a `ValueError`).

        Examples:
            >>> from tidemill import agent
            >>> _ = agent().llm("fake").tool_call_retries(3)
        """
        if limit < 0:
            raise InvalidOption(
                f"tool_call_retries must not be negative, not {limit}.",
                hint="0 fails a run on its first bad tool call.",
            )
        self._blueprint.tool_call_retries = limit
        return self._changed()

    def parallel_tools(self, enabled: bool = True, *, max_parallel: int | None = None) -> Self:
        """Run the tool calls of one turn concurrently, at most `max_parallel` at once.

        `False` runs them one after another, for tools that share state.
        """
        if max_parallel is not None:
            if max_parallel < 1:
                raise InvalidOption(f"max_parallel must be at least 1, not {max_parallel}.")
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

    def agent(self, name: str, worker: Worker, description: str = "") -> Self:
        """Add a specialist, making this agent a supervisor that can delegate to it.

        The specialist becomes a tool named `name` that takes a `task`; it runs
        on a thread of its own and sees only that task. Its answer comes back
        as the tool's result, and what it spent rolls up into this run's usage.

        `build()` then returns a `SupervisorRuntime`, named `"supervisor"`
        unless `.name()` says otherwise; `.routing()` replaces its routing
        instructions.

        Args:
            name: The name the supervisor delegates by.
            worker: An agent builder, a runtime, or anything with `arun` and `astate`.
            description: What the specialist is good at; the supervisor routes
                on it. Without one, the worker's own (see `.description()`).

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
        Structured output, memory, guardrails and specialists work as in the
        built-in loop.
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

    @property
    def runtime(self) -> AgentRuntime | GraphRuntime:
        """The built agent, built on first access; the same as `build()`."""
        return self.build()

    def build(self) -> AgentRuntime | GraphRuntime:
        """Build the agent, or return the one already built.

        Raises:
            ConfigurationError: When no model was chosen and
                `TIDEMILL_DEFAULT_MODEL` is unset.
            MissingDependencyError: For `.graph()` without the `graph` extra.
        """
        if self._runtime is None:
            if self._blueprint.model is None:
                self.llm(default_model_spec())
            self._runtime = self._blueprint.build(owned=self._owned)
        return self._runtime

    async def aclose(self) -> None:
        """Close the components this builder made: from names, factories and `mcp()`.

        Objects passed in (a `Model`, a `Checkpointer`) stay open; they are
        the caller's to close. The runtime built last shares the list, so
        closing either one closes each component once.
        """
        while self._owned:
            await self._owned.pop(0).aclose()
        if self._runtime is not None:
            self._runtime.close()
            self._runtime = None

    def _changed(self) -> Self:
        self._runtime = None
        return self
