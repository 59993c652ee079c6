"""`ComponentMethods`: the builder methods that choose a component.

Each takes a name, an object of its kind, or a factory, and resolves it the
same way, through the builder's `Components` (`_components`): the model,
the checkpointer, the memory, the guardrails, the tracer and MCP clients.
What the builder makes this way is its to close.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from tidemill._sync import LoopThread
from tidemill.agents import _slots
from tidemill.agents._blueprint import Blueprint
from tidemill.agents._components import Components, Slot
from tidemill.agents._facade import Closeable
from tidemill.agents._slots import default_model_spec
from tidemill.agents.checkpoint import Checkpointer
from tidemill.agents.guardrails import Guardrail
from tidemill.agents.memory import Memory
from tidemill.agents.tracing import Tracer
from tidemill.llm import Model
from tidemill.tools import ToolLike

if TYPE_CHECKING:
    from tidemill.agents._runtime import AgentRuntime
    from tidemill.agents.graph import GraphRuntime
    from tidemill.tools.mcp import MCPClientSpec

__all__ = ["ComponentMethods"]

T = TypeVar("T")


class ComponentMethods:
    """The component-choosing half of `AgentBuilder`; see there."""

    _blueprint: Blueprint
    _components: Components
    _owned: list[Closeable]
    _sync: LoopThread

    @abstractmethod
    def build(self) -> AgentRuntime | GraphRuntime:
        """Build the agent, or return the one already built."""

    @abstractmethod
    def tool(self, *tools: ToolLike | str | None) -> Self:
        """Bind tools."""

    @abstractmethod
    def _changed(self) -> Self:
        """Note a change: the next use rebuilds the agent."""

    def llm(
        self,
        spec: str | Model | Sequence[str | Model] | Callable[..., Model] | None = None,
        /,
        **config: Any,
    ) -> Self:
        """Choose the model.

        Without a call to `llm`, the agent uses the model named by the
        `TIDEMILL_DEFAULT_MODEL` environment variable; `llm()` with no spec
        chooses that model now.

        Args:
            spec: `"provider:model"` (`"openai:gpt-4o-mini"`), a bare model id,
                `"fake"` for the offline scripted model, a name bound with
                `bind()` or registered by a plugin, a `Model`, a factory
                returning one, or a list of specs: the first answers, and the
                next takes over on rate limits, timeouts and provider outages.
            **config: Options for the model. The scripted model takes
                `responses=`, `tool_calls=`, `handler=` and `strict=`.

        Raises:
            ConfigurationError: For an unknown provider or option, or no spec
                and no `TIDEMILL_DEFAULT_MODEL`.

        Examples:
            >>> from tidemill import agent
            >>> _ = agent().llm("fake", responses=["ok"], strict=True)
            >>> from tidemill.llm import ScriptedModel
            >>> agent().llm(ScriptedModel, responses=["made"]).run("Hi").output
            'made'
        """
        if spec is None:
            spec = default_model_spec()
        self._blueprint.model = self._make(_slots.MODEL, spec, config)
        return self._changed()

    def native_llm(self) -> Model:
        """Return the `Model` the agent calls: Tidemill's adapter for its provider.

        Raises:
            ConfigurationError: When no model was chosen and `TIDEMILL_DEFAULT_MODEL` is unset.

        Examples:
            >>> from tidemill import agent
            >>> agent().llm("fake").native_llm().provider
            'scripted'
        """
        self.build()
        assert self._blueprint.model is not None  # build() chose one or raised
        return self._blueprint.model

    def bind(self, name: str, factory: Callable[..., Any]) -> Self:
        """Make `name` usable as a string spec on this builder only.

        `factory` is called with the method's options when a method is given
        `name`: `.llm("mycorp")`, `.memory("mine", size=3)`, `.guardrails(...)`,
        `.observe(...)`, `.checkpoint(...)`, `.mcp(...)`. For `.tool(name)`,
        bind the tool itself. A bound name wins over Tidemill's own names and
        over plugins; `.llm("mycorp:big")` calls the factory with `model="big"`.
        Installed packages add names for every builder through entry points:
        see `tidemill.agents.GROUPS`.

        Raises:
            ConfigurationError: For an empty name, a name bound already, or a
                factory that is not callable.

        Examples:
            >>> from tidemill import agent
            >>> from tidemill.agents.memory import WindowMemory
            >>> bot = agent().llm("fake").bind("short", lambda: WindowMemory(size=2))
            >>> bot.memory("short").describe()["memory"]
            {'kind': 'window', 'size': 2}
        """
        self._components.bind(name, factory)
        return self

    def mcp(self, spec: MCPClientSpec | None = None, /, **options: Any) -> Self:
        """Connect an MCP server and bind its tools, named `{server}__{tool}`.

        Call it once per server. Without `spec` (or with `"fastmcp"`), the
        client is Tidemill's `MCPConnection` over the official SDK:
        `command=`/`args=`/`env=` start a server as a subprocess (stdio),
        `url=`/`headers=` reach one that is running (streamable HTTP), and
        `server=` (or `name=`) sets the prefix of its tools. `"static"` with
        `tools=[...]` serves in-process tools as a server's (`StaticMCPClient`),
        for tests and for giving tools a server's names. `spec` may also be
        an `MCPServer`, any `MCPClient` object, a factory returning one
        (called with the options), or a name bound with `bind()`.

        A client that is not open is opened now, on this builder's own event
        loop, so a server that cannot be reached fails here with
        `MCPConnectionError`, never as an empty tool list. The builder closes
        the clients it made or opened; a client passed in already open stays
        the caller's to close. `"fastmcp"` needs `pip install 'tidemill[mcp]'`.

        Raises:
            ConfigurationError: For an unknown name (with a did-you-mean),
                `"static"` without `tools=`, `server=` and `name=` that
                differ, options a client does not take, or an object that is
                not an MCP client.
            MCPConnectionError: When the server cannot be started, reached or initialised.
            MissingDependencyError: When the `mcp` extra is not installed.

        Examples:
            >>> from tidemill import ToolCall, agent, tool
            >>> @tool
            ... def read_file(path: str) -> str:
            ...     '''Read a file.'''
            ...     return f"contents of {path}"
            >>> call = ToolCall(name="fs__read_file", arguments={"path": "a.txt"})
            >>> bot = (agent()
            ...        .llm("fake", responses=["", "Done."], tool_calls=[[call], []])
            ...        .mcp("static", server="fs", tools=[read_file]))
            >>> bot.run("Read a.txt").steps[0].tool_results[0].content
            'contents of a.txt'
            >>> bot.close()
        """
        from tidemill.tools.mcp import MCPClient, is_mcp_client, resolve_client

        slot: Slot[MCPClient] = Slot("MCP client", is_mcp_client, resolve_client, article="an")
        made = self._components.make(slot, spec, dict(options))
        client = made.component
        owned = made.owned
        if not client.is_open:
            # Opened on this builder's loop, the client lives as long as that loop: ours to close.
            self._sync.run(client.aconnect())
            owned = True
        if owned:
            self._owned.append(client)
        return self.tool(*client.tools)

    def checkpoint(
        self, spec: str | Checkpointer | Callable[..., Checkpointer] | None = None, /, **config: Any
    ) -> Self:
        """Choose where threads' journals are kept.

        Args:
            spec: `"memory"` (the default), `"sqlite"` (with `path=`), a
                `sqlite:///` or `postgresql://` URL, `"postgres"` (with `url=`),
                or a `Checkpointer`.
            **config: Options for the checkpointer (`path=`, `url=`, `schema=`,
                `max_history=`: the most records a thread keeps, its older ones
                compacted into one snapshot; see `docs/agents/threads.md`).

        Examples:
            >>> import pathlib, tempfile
            >>> from tidemill import agent
            >>> path = pathlib.Path(tempfile.mkdtemp()) / "agent.db"
            >>> _ = agent().llm("fake").checkpoint("sqlite", path=path)
        """
        self._blueprint.checkpointer = self._make(_slots.CHECKPOINTER, spec, config)
        return self._changed()

    def memory(
        self, spec: str | Memory | Callable[..., Memory] = "window", /, **config: Any
    ) -> Self:
        """Choose which part of a thread each model call sees.

        The journal keeps the whole thread whatever is chosen; a thread is
        keyed by the `thread_id` of `run`. Without a call to `memory`, the
        whole thread is sent.

        Args:
            spec: `"window"` (the last `size=` messages, 20 by default, never
                splitting a tool call from its result), `"buffer"` (everything),
                `"summary"` (older turns condensed by the model; `max_messages=`,
                `keep_last=`), `"vector"` (earlier messages recalled by meaning;
                `embedder=`, `k=`), `"composite"` (`window=`, `summary={...}`,
                `vector={...}` together), `"off"` (only the current run), or a `Memory`.
            **config: Options of the chosen memory.

        Raises:
            ConfigurationError: For an unknown memory or option.

        Examples:
            >>> from tidemill import agent
            >>> _ = agent().llm("fake").memory("window", size=10)
        """
        self._blueprint.memory = self._make(_slots.MEMORY, spec, config)
        return self._changed()

    def guardrails(
        self, spec: str | Guardrail | Callable[..., Guardrail] | None = None, /, **config: Any
    ) -> Self:
        """Check what goes in and what comes out for personal data and secrets.

        Args:
            spec: `"rules"` (the default: the dependency-free `RuleGuardrail`),
                `"nemo"` (`NemoGuardrail`: NeMo Guardrails rails, the `nemo` extra)
                or a `Guardrail` of your own.
            **config: The guardrail's options: for `"rules"`, `pii=`, `secrets=`,
                `on_violation="redact" | "block"`, `categories=`, `patterns=`; for
                `"nemo"`, `config=` (a rails directory) or `yaml=`/`colang=`, `actions=`, `llm=`.

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
        self._blueprint.guardrail = self._make(_slots.GUARDRAIL, spec, config)
        return self._changed()

    def observe(
        self, spec: str | Tracer | Callable[..., Tracer] | None = None, /, **config: Any
    ) -> Self:
        """Trace runs, model calls and tool calls.

        Args:
            spec: `"console"` (the default), `"memory"` (for tests), `"otel"`
                (OpenTelemetry, GenAI semantic conventions; the `otel` extra),
                `"langfuse"`, `"langsmith"` (keys from `LANGFUSE_*`, `LANGSMITH_*`;
                spans flushed when the agent closes), `"otlp"`, `"none"`, or a `Tracer`.
            **config: Tracer options, such as `capture_content=True` to record
                message text (off by default: prompts may hold secrets), or keys.
        """
        self._blueprint.tracer = self._make(_slots.TRACER, spec, config)
        return self._changed()

    def _make(self, slot: Slot[T], spec: object, config: dict[str, Any]) -> T:
        """Resolve a component; one the builder made, and that has `aclose`, is closed with it."""
        made = self._components.make(slot, spec, config)
        component = made.component
        if made.owned and callable(getattr(component, "aclose", None)):
            self._owned.append(cast(Closeable, component))
        return component
