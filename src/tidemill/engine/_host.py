r"""One agent, two hosts: a workspace `ai_agent` resource run from Python, and saved from it.

A flow links a reusable agent (`ai_agent: {agent: f/support/triage}`); a
script runs the same agent with `load_agent` (`tidemill.agent(path,
workspace=ws)`): a `HostedAgent`, an `AgentBuilder` configured with the
agent's brain and tools, which runs, streams, pauses and resumes like any
builder and takes a checkpointer like any. It is built by what a linked step
uses: the resource is read as the workspace's principal (`f/x/y@7` pins a
version) with the flows its tools name read in (`AsyncWorkspace.inline_agent`),
`tool_inputs` and `enabled_tools` applied (`effective_agent`), the brain's
`provider: $res:` and `api_key: $var:` resolved (`_credentials`), and each tool
made by its kind: `script`/`function` tools by `pool_tool` (in a script pool
the agent starts on its first call), `mcp` tools by `mcp_tools`, nested
`agent` tools as hosted agents of their own, `flow` tools as runs of an
engine (`engine=`; without one, loading an agent with flow tools fails).

`save_agent` (`_host_save`) goes the other way: it writes a builder's brain
and the tools a resource can hold as an `ai_agent` resource.

What only a flow step has: `limits.max_duration` (not applied: loading
warns), `on_exceeded: ask` (a bound crossed here fails, as with `fail`),
`specialists` and `questions` (refused when loading, naming them), and child
runs per call (a `flow` tool's call is a run of the engine, started again if
the agent resumes before it finished). `save_agent` writes a loaded agent's
system prompt as the resource holds it, its `{{ }}` placeholders unrendered.

Examples:
    >>> import tempfile
    >>> from tidemill import Workspace
    >>> ws = Workspace(f"sqlite:///{tempfile.mkdtemp()}/t.db", user="ada")
    >>> _ = ws.add_folder("support")
    >>> _ = ws.write("f/support/triage", "resource",
    ...              {"model": "fake", "system": "Triage tickets."}, resource_type="ai_agent")
    >>> bot = load_agent("f/support/triage", workspace=ws)
    >>> bot.llm("fake", responses=["Billing."]).run("My invoice is wrong").output
    'Billing.'
    >>> bot.close(); ws.close()
"""

from __future__ import annotations

import asyncio
import contextlib
import warnings
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Self, Unpack

from pydantic import JsonValue, ValidationError

from tidemill.agents import AgentBuilder, AgentTool, UsageLimits
from tidemill.agents.checkpoint import Checkpointer
from tidemill.engine._engine import AsyncEngine
from tidemill.engine._facade import Engine
from tidemill.engine._models import ModelChoice, ModelResolver, default_models
from tidemill.engine._step_env import Secrets
from tidemill.engine.ai._action import render, step_settings
from tidemill.engine.ai._child_tools import child_tool_schema
from tidemill.engine.ai._mcp import mcp_tools
from tidemill.engine.ai._tools import SpecTool, ToolSite, bind_inputs, pool_tool
from tidemill.engine.scripts._pool import ScriptPool
from tidemill.engine.workers._linked import effective_agent
from tidemill.engine.workers._references import _credentials, _model_references
from tidemill.errors import ConfigurationError, FlowInputError, RunFailed
from tidemill.flows import AgentToolSpec, AIAgent, Flow
from tidemill.llm import ModelSettings
from tidemill.tools import Tool, ToolContext, ToolReturn
from tidemill.types import AgentResponse, Decision, StreamEvent
from tidemill.workspace import (
    AGENT_TYPE,
    AsyncWorkspace,
    InvalidValue,
    Workspace,
    unlink,
)

if TYPE_CHECKING:
    from tidemill.agents import Prompt
    from tidemill.agents._runtime import AgentRuntime
    from tidemill.agents.graph import GraphRuntime

__all__ = [
    "LIMIT_FIELDS",
    "AnyEngine",
    "AnyWorkspace",
    "HostedAgent",
    "aload_agent",
    "load_agent",
    "workspace_core",
]

AnyWorkspace = AsyncWorkspace | Workspace
"""A workspace from async code or from blocking code."""

AnyEngine = AsyncEngine | Engine
"""An engine from async code or from blocking code."""

_POOL_SIZE = 2
"""Processes of the script pool a hosted agent starts on its first script tool call."""

LIMIT_FIELDS = {
    "requests": "max_requests",
    "tool_calls": "max_tool_calls",
    "input_tokens": "max_input_tokens",
    "output_tokens": "max_output_tokens",
    "total_tokens": "max_total_tokens",
}
"""`UsageLimits` fields and the `AgentLimits` fields they are saved as."""


def workspace_core(workspace: AnyWorkspace) -> AsyncWorkspace:
    """The async workspace behind `workspace`."""
    # The store runs transactions on threads of its own: any event loop may use it.
    return workspace.core if isinstance(workspace, Workspace) else workspace


class HostedAgent(AgentBuilder):
    """An `AgentBuilder` configured from a workspace `ai_agent` resource; see `load_agent`.

    Every builder method still applies (a later `.llm("fake", ...)` replaces
    the saved model, `.checkpoint(...)` chooses where threads are kept), and
    the agent's `temperature` and `max_tokens` apply to each run unless the
    run sets its own. Close it (`close()`, `aclose()`) to stop its MCP
    servers and its script processes.
    """

    def __init__(self) -> None:
        super().__init__()
        self.path: str | None = None
        """The resource's path (None: an agent nested inline in another's tools)."""
        self.version: int | None = None
        """The version read (None for an inline nested agent)."""
        self.definition: AIAgent | None = None
        """The agent as it was read: its brain and its tools."""
        self.settings = ModelSettings()
        """Model settings of every run: the agent's `temperature` and `max_tokens`."""
        self._brain: dict[str, Any] | None = None
        self._system: str | None = None
        """The system prompt as the resource holds it, `{{ }}` placeholders unrendered
        (what `save_agent` writes back); None once `.system(...)` sets another."""
        self._written: dict[str, dict[str, Any]] = {}
        self._made: dict[str, tuple[Tool, str]] = {}
        self._nested: list[HostedAgent] = []
        self._stack = contextlib.AsyncExitStack()
        self._pool: ScriptPool | None = None

    # -- what differs from a plain builder ---------------------------------------

    def llm(self, spec: Any = None, /, **config: Any) -> Self:
        """Choose the model, replacing the agent's; see `AgentBuilder.llm`."""
        self._brain = None  # saved again, the builder's model is written, not the agent's
        return super().llm(spec, **config)

    def system(self, prompt: str) -> Self:
        """Set the system prompt, replacing the agent's; see `AgentBuilder.system`."""
        self._system = None  # saved again, this prompt is written, not the agent's template
        return super().system(prompt)

    def build(self) -> AgentRuntime | GraphRuntime:
        """Build the agent; its nested agents keep their threads in its checkpointer."""
        runtime = super().build()
        checkpointer = self._blueprint.checkpointer
        assert checkpointer is not None  # `Blueprint.build` chose one
        for child in self._nested:
            child._inherit(checkpointer)
        return runtime

    def _inherit(self, checkpointer: Checkpointer) -> None:
        if self._blueprint.checkpointer is not checkpointer:
            self.checkpoint(checkpointer)

    def _with_settings(self, settings: ModelSettings) -> ModelSettings:
        merged = ModelSettings()
        merged.update(self.settings)
        merged.update(settings)
        return merged

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
        return await super().arun(
            prompt, thread_id=thread_id, max_iterations=max_iterations, limits=limits,
            deps=deps, **self._with_settings(settings),
        )  # fmt: skip

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
        return super().astream(
            prompt, thread_id=thread_id, max_iterations=max_iterations, limits=limits,
            deps=deps, **self._with_settings(settings),
        )  # fmt: skip

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
        return await super().aresume(
            thread_id, decisions, approved=approved, feedback=feedback,
            edited_arguments=edited_arguments, retry_in_flight=retry_in_flight,
            max_iterations=max_iterations, limits=limits, deps=deps,
            **self._with_settings(settings),
        )  # fmt: skip

    async def aclose(self) -> None:
        """Close what the agent started (MCP servers, script processes, nested agents)."""
        for child in self._nested:
            await child.aclose()
        await self._stack.aclose()
        if self._pool is not None:
            pool, self._pool = self._pool, None
            await pool.close()
        await super().aclose()

    def _script_pool(self) -> ScriptPool:
        if self._pool is None:
            self._pool = ScriptPool(size=_POOL_SIZE)
        return self._pool


class _FlowTool(SpecTool):
    """A `flow` tool of a hosted agent: each call is a run of the engine, as the principal."""

    def __init__(
        self, spec: AgentToolSpec, bound: dict[str, Any], site: ToolSite, host: _Host, agent: str
    ) -> None:
        parameters, description = child_tool_schema(spec)
        super().__init__(spec, parameters, description, bound, site)
        self._host = host
        self._agent = agent

    async def acall(self, arguments: dict[str, Any], context: ToolContext) -> object:
        """Run the flow and wait for its result; a failed run is an error the model sees."""
        spec, site, host = self._spec, self._site, self._host
        bound = await site.bound(self._bound)
        if isinstance(bound, ToolReturn):
            return bound
        assert spec.flow is not None
        assert spec.flow.flow is not None
        flow, flow_input = spec.flow.flow, {**arguments, **bound}
        try:
            flow.validate_input(flow_input)
        except FlowInputError as exc:
            return ToolReturn(f"FlowInputError: {exc.message}", is_error=True)
        try:
            result = await host.run_flow(flow, flow_input, agent=self._agent, tool=spec.name)
        except RunFailed as exc:
            return ToolReturn(site.mask(f"RunFailed: {exc.message}"), is_error=True)
        return site.mask(result)


class _AgentCall(AgentTool):
    """A nested `agent` tool: the model gives a `message`, the nested agent answers it."""

    def __init__(self, worker: HostedAgent, spec: AgentToolSpec) -> None:
        parameters, description = child_tool_schema(spec)
        super().__init__(worker, name=spec.name, description=description)
        self.parameters = parameters
        self.requires_approval = spec.requires_approval

    async def acall(self, arguments: dict[str, Any], context: ToolContext) -> object:
        """Run the nested agent on the message, on a thread of the call's own."""
        return await super().acall({"task": arguments.get("message", "")}, context)


class _Host:
    """What loading one agent (and the agents nested in it) shares."""

    def __init__(
        self,
        workspace: AsyncWorkspace,
        engine: AnyEngine | None,
        models: ModelResolver | None,
        values: Mapping[str, Any],
    ) -> None:
        self.workspace = workspace
        self.engine = engine
        self.models = models
        self.values = dict(values)
        self.secrets = Secrets()
        self.reading: list[str] = []

    async def resolve(self, value: Any) -> tuple[Any, set[str]]:
        resolved = await self.workspace.resolve(value, purpose="an agent run from Python")
        return resolved.value, set(resolved.secrets)

    async def run_flow(
        self, flow: Flow, flow_input: dict[str, Any], *, agent: str, tool: str
    ) -> Any:
        engine = self.engine
        assert engine is not None  # `_check_flows` refused flow tools without one
        workspace = self.workspace
        source = {"workspace": workspace.name, "agent": agent, "tool": tool}
        if isinstance(engine, Engine):
            return await asyncio.to_thread(
                lambda: engine.submit(flow, flow_input, run_as=workspace.user, source=source).wait()
            )
        run_id = await engine.submit(flow, flow_input, run_as=workspace.user, source=source)
        return await engine.wait(run_id)


async def _read(
    host: _Host,
    reference: str,
    tool_inputs: Mapping[str, Mapping[str, Any]],
    enabled_tools: Sequence[str] | None,
) -> tuple[AIAgent, int, dict[str, Any]]:
    """The agent at `reference`, read as the principal, with the caller's choices applied."""
    try:
        link = AIAgent(
            agent=reference,
            tool_inputs={name: dict(bound) for name, bound in tool_inputs.items()},
            enabled_tools=None if enabled_tools is None else list(enabled_tools),
        )
    except ValidationError as exc:
        raise ConfigurationError(
            f"{reference!r} names no agent: {exc.errors()[0]['msg']}",
            hint="Write the path of an ai_agent resource, f/<folder>/<name>, or "
            "f/<folder>/<name>@7 for one of its versions.",
        ) from None
    path, pin = link.agent_path, link.agent_version
    assert path is not None
    if path in host.reading:
        raise ConfigurationError(
            f"The agent {path} names itself among its tools' agents "
            f"({' -> '.join([*host.reading, path])}).",
            hint="An agent tool may not run the agent that holds it.",
        )
    item = await host.workspace.get(path, version=pin)  # ItemNotFound, PermissionDenied
    if item.kind != "resource" or item.resource_type != AGENT_TYPE:
        what = item.kind if item.kind != "resource" else f"resource of type {item.resource_type}"
        raise ConfigurationError(
            f"{path} is a {what}, not an {AGENT_TYPE} resource.",
            hint=f"Load a resource of the type {AGENT_TYPE}.",
            context={"path": path},
        )
    if not isinstance(item.value, Mapping):
        raise InvalidValue(f"{path}: an ai_agent resource's value must be an object.")
    written = unlink(item.value, tool_inputs=link.tool_inputs, enabled_tools=enabled_tools)
    value = await host.workspace.inline_agent(item.value)
    return effective_agent(link, value, path=path), item.version, written


async def _configure(
    hosted: HostedAgent,
    definition: AIAgent,
    written: Mapping[str, Any],
    host: _Host,
    label: str | None = None,
) -> None:
    """Give `hosted` the brain and the tools of `definition` (its value as `written`)."""
    label = hosted.path or label or "the nested agent"
    refused = [
        what for what, present in (("specialists", definition.specialists),
                                   ("questions", definition.questions)) if present
    ]  # fmt: skip
    if refused:
        named = [
            f"specialists ({', '.join(repr(s.name) for s in definition.specialists)})"
            if what == "specialists" else "questions (ask_person)" for what in refused
        ]  # fmt: skip
        where = hosted.path or (host.reading[-1] if host.reading else "f/<folder>/<name>")
        raise ConfigurationError(
            f"The agent {label} has {' and '.join(named)}, which only an ai_agent step of a "
            "flow runs: tidemill.agent() does not run it from Python.",
            hint=f"Run it from a flow that links it (ai_agent: {{agent: {where}}}), or load "
            f"a version without them ({where}@N; tidemill ws history {where} lists them).",
            context={"path": hosted.path, "keys": refused},
        )
    duration = definition.limits.max_duration
    if duration is not None:
        warnings.warn(
            f"The agent {label} has limits.max_duration ({duration}s), which only an ai_agent "
            "step of a flow applies: run from Python, it is not bounded in time (its other "
            "limits apply).",
            UserWarning,
            stacklevel=2,
        )
    flows = [spec.name for spec in definition.tools if spec.flow is not None]
    if flows and host.engine is None:
        raise ConfigurationError(
            f"The agent {label} has the flow tools {', '.join(map(repr, flows))}: each call "
            "runs the flow, which needs an engine.",
            hint="Pass engine= (an Engine or AsyncEngine whose workers run the flows), or "
            "leave them out with enabled_tools=[...].",
            context={"path": hosted.path, "tools": flows},
        )
    hosted.definition = definition
    _brain(hosted, definition, await _model_credentials(definition, host, label), host)
    tools = [tool for tool in written.get("tools") or [] if isinstance(tool, Mapping)]
    hosted._written = {str(tool.get("name")): dict(tool) for tool in tools}
    site = ToolSite(
        hosted.path or "agent", "agent", 1, hosted._script_pool,
        resolve=host.resolve, secrets=host.secrets,
    )  # fmt: skip
    for spec in definition.tools:
        made: list[Tool]
        if spec.agent is not None:
            made = [_AgentCall(await _nested(hosted, spec, host), spec)]
        elif spec.flow is not None:
            bound = bind_inputs(spec, host.values)
            made = [_FlowTool(spec, bound, site, host, hosted.path or "agent")]
        elif spec.mcp is not None:
            made = await mcp_tools(spec, hosted._stack)
        else:
            made = [pool_tool(spec, host.values, site)]
        for tool in made:
            hosted._made[tool.name] = (tool, spec.name)
        hosted.tool(*made)


async def _model_credentials(definition: AIAgent, host: _Host, label: str) -> dict[str, Any]:
    if not _model_references(definition):
        return {}
    secrets: set[str] = set()
    found = await _credentials(host.workspace, definition, f"the agent {label}", secrets)
    host.secrets.add(secrets)
    return found


def _brain(
    hosted: HostedAgent, definition: AIAgent, credentials: dict[str, Any], host: _Host
) -> None:
    key = definition.api_key
    env_key = key if key is not None and key.startswith("env:") else None
    choice = ModelChoice(
        definition.model, definition.base_url, env_key, hosted.path or "agent",
        credentials=credentials or None,
    )  # fmt: skip
    if host.models is not None:
        hosted.llm(host.models(choice))  # the resolver's model: the caller's to close
    else:
        model = default_models(choice)
        hosted.llm(lambda: model)  # made here: the builder closes it
    hosted._brain = {
        name: value
        for name in ("model", "provider", "api_key", "base_url")
        if (value := getattr(definition, name))
    }
    hosted.settings = step_settings(definition)
    if definition.system:
        hosted.system(render(definition.system, host.values, field="system"))
        hosted._system = definition.system  # rendered to run, saved as written
    hosted.max_iterations(definition.max_iterations)
    limits = {field: getattr(definition.limits, name) for field, name in LIMIT_FIELDS.items()}
    if any(value is not None for value in limits.values()):
        hosted.limits(**limits)
    if definition.output_schema is not None:
        hosted.output(definition.output_schema)
    memory = definition.memory
    if memory is not None and memory.kind_read == "window" and memory.context_length:
        hosted.memory("window", size=memory.context_length)
    elif memory is not None and memory.kind_read == "off":
        hosted.memory("off")


async def _nested(parent: HostedAgent, spec: AgentToolSpec, host: _Host) -> HostedAgent:
    """The hosted agent a nested `agent` tool runs: linked by path, or written inline."""
    nested = spec.agent
    assert nested is not None
    child = HostedAgent()
    parent._nested.append(child)
    if nested.agent is not None:
        await _load(child, nested.agent, host, nested.tool_inputs, nested.enabled_tools)
    else:
        written = parent._written.get(spec.name, {}).get("agent")
        label = f"nested in {parent.path or 'the agent'} as the tool {spec.name!r}"
        inline = written if isinstance(written, Mapping) else {}
        await _configure(child, nested, inline, host, label)
    child.name(spec.name)
    return child


async def _load(
    hosted: HostedAgent,
    reference: str,
    host: _Host,
    tool_inputs: Mapping[str, Mapping[str, Any]],
    enabled_tools: Sequence[str] | None,
) -> None:
    definition, version, written = await _read(host, reference, tool_inputs, enabled_tools)
    hosted.path, hosted.version = reference.partition("@")[0], version
    host.reading.append(hosted.path)
    try:
        await _configure(hosted, definition, written, host)
    finally:
        host.reading.pop()


async def aload_agent(
    path: str,
    *,
    workspace: AnyWorkspace,
    engine: AnyEngine | None = None,
    models: ModelResolver | None = None,
    inputs: Mapping[str, Any] | None = None,
    tool_inputs: Mapping[str, Mapping[str, Any]] | None = None,
    enabled_tools: Sequence[str] | None = None,
) -> HostedAgent:
    """The async twin of `load_agent`: its MCP servers connect on the calling loop.

    Run it with the async methods (`arun`, `astream`, `aresume`) on the same loop.
    """
    hosted = HostedAgent()
    host = _Host(workspace_core(workspace), engine, models, inputs or {})
    try:
        await _load(hosted, path, host, tool_inputs or {}, enabled_tools)
    except BaseException:
        await hosted.aclose()
        raise
    return hosted


def load_agent(
    path: str,
    *,
    workspace: AnyWorkspace,
    engine: AnyEngine | None = None,
    models: ModelResolver | None = None,
    inputs: Mapping[str, Any] | None = None,
    tool_inputs: Mapping[str, Mapping[str, Any]] | None = None,
    enabled_tools: Sequence[str] | None = None,
) -> HostedAgent:
    """A workspace `ai_agent` resource as an agent builder; `tidemill.agent(path, ...)`.

    The resource is read as the workspace's principal, who needs the viewer
    role on it (and on the flows its tools name, and on a `provider:
    $res:` credential); a tool's `$var:`/`$res:` inputs are resolved as the
    principal when a call of it runs.

    Args:
        path: `f/<folder>/<name>`, or `f/<folder>/<name>@7` for version 7.
        workspace: The workspace, and the principal the agent is read as.
        engine: Runs the agent's `flow` tools (a worker must be running on it).
        models: Builds the model from the brain's settings, as a worker's
            resolver does (`ModelChoice` in, `Model` out); by default, from its spec.
        inputs: The values the system prompt's `{{ ... }}` placeholders and the
            tools' `{expr: ...}` bindings read (a linked step's inputs).
        tool_inputs: Per tool, bindings laid over the agent's (as a linked step's).
        enabled_tools: The tools to keep (all when None), as a linked step's.

    Raises:
        ItemNotFound: Nothing at `path` (or at that version) the principal may read.
        PermissionDenied: The principal may not read it.
        UnresolvedReference: The brain's credential cannot be read as the principal.
        ConfigurationError: Not an `ai_agent` resource; flow tools without an
            engine; specialists or questions (flow steps only).
        InvalidValue: The resource is no valid agent, or a tool named in
            `tool_inputs` or `enabled_tools` is not one of its tools.

    Examples:
        >>> import tempfile
        >>> from tidemill import Workspace
        >>> with Workspace(f"sqlite:///{tempfile.mkdtemp()}/t.db", user="ada") as ws:
        ...     _ = ws.add_folder("x")
        ...     _ = ws.write("f/x/a", "resource", {"model": "fake", "system": "v1"},
        ...                  resource_type="ai_agent")
        ...     _ = ws.write("f/x/a", "resource", {"model": "fake", "system": "v2"},
        ...                  resource_type="ai_agent")
        ...     bot = load_agent("f/x/a@1", workspace=ws)
        ...     print(bot.version, bot.describe()["system_prompt"])
        ...     bot.close()
        1 v1
    """
    hosted = HostedAgent()
    host = _Host(workspace_core(workspace), engine, models, inputs or {})
    try:
        # On the builder's own loop: MCP sessions opened now serve its blocking runs.
        hosted._sync.run(_load(hosted, path, host, tool_inputs or {}, enabled_tools))
    except BaseException:
        hosted.close()
        raise
    return hosted
