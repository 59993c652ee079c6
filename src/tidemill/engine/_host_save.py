r"""Saving an agent builder as a workspace `ai_agent` resource: `save_agent`.

What is written is the builder's brain (model spec, system prompt: a loaded
agent's as the resource wrote it, its `{{ }}` placeholders unrendered;
temperature, output schema, memory window, limits, max iterations) and the
tools a resource can hold: those of an agent loaded with `load_agent`
(`_host`), as the resource wrote them. A Python function tool, a specialist
or an MCP client of the builder's own cannot be saved: the save is refused,
naming them, and nothing is written. The value reads back with
`load_agent(path, ...)` into the same agent.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import JsonValue

from tidemill.agents import AgentBuilder
from tidemill.engine._host import LIMIT_FIELDS, AnyWorkspace, HostedAgent, workspace_core
from tidemill.errors import ConfigurationError
from tidemill.llm import Model, ModelSettings
from tidemill.workspace import AGENT_TYPE, Workspace, agent_definition

if TYPE_CHECKING:
    from tidemill.agents._runtime import AgentRuntime
    from tidemill.agents.graph import GraphRuntime
    from tidemill.workspace import Item

__all__ = ["agent_value", "asave_agent", "save_agent"]


def _model_spec(model: Model) -> str:
    provider, name = model.provider, model.model_name
    if provider == "scripted":
        return "fake"
    if provider in ("fallback", "unknown"):
        raise ConfigurationError(
            f"The agent's model ({type(model).__name__}) has no one model spec to save.",
            hint="Choose one model with .llm('provider:model') before saving.",
        )
    return f"{provider}:{name}"


def _memory(described: JsonValue) -> dict[str, Any] | None:
    kind = described.get("kind") if isinstance(described, dict) else None
    if kind in (None, "buffer"):
        return None
    if kind == "off":
        return {"kind": "off"}
    if kind == "window" and isinstance(described, dict):
        return {"kind": "window", "context_length": described.get("size")}
    raise ConfigurationError(
        f"The agent's {kind} memory cannot be saved: an ai_agent resource keeps a window "
        "of messages, or none.",
        hint="Use .memory('window', size=N) or .memory('off') before saving.",
    )


def _tools(builder: AgentBuilder, runtime: AgentRuntime | GraphRuntime) -> list[dict[str, Any]]:
    hosted = builder if isinstance(builder, HostedAgent) else None
    tools: dict[str, dict[str, Any]] = {}
    refused: list[str] = []
    for tool in runtime.tools:
        made = hosted._made.get(tool.name) if hosted is not None else None
        if hosted is not None and made is not None and made[0] is tool:
            tools.setdefault(made[1], hosted._written[made[1]])
        else:
            refused.append(tool.name)
    if refused:
        raise ConfigurationError(
            f"The tools {', '.join(map(repr, refused))} are Python objects (functions, "
            "specialists, MCP clients), which an ai_agent resource cannot hold.",
            hint="Save them as tools a resource holds (a script tool {name, script}, a "
            "workspace flow, an mcp server, a nested agent by path) and add them to the "
            "resource, or build the agent without them before saving.",
            context={"tools": refused},
        )
    return list(tools.values())


def agent_value(builder: AgentBuilder, *, temperature: float | None = None) -> dict[str, Any]:
    """The value of the `ai_agent` resource `builder` saves as; see `save_agent`.

    Raises:
        ConfigurationError: A tool a resource cannot hold (a Python function,
            a specialist, an MCP client of the builder's own), a memory other
            than a window, or a model with no one spec (a fallback list).

    Examples:
        >>> from tidemill import agent
        >>> bot = agent().llm("fake").system("Be brief.").max_iterations(3).limits(requests=5)
        >>> agent_value(bot, temperature=0.2)
        {'model': 'fake', 'system': 'Be brief.', 'max_iterations': 3, 'limits': {'max_requests': 5}, 'temperature': 0.2}
    """  # noqa: E501
    runtime = builder.build()
    hosted = builder if isinstance(builder, HostedAgent) else None
    value: dict[str, Any] = (
        dict(hosted._brain)
        if hosted is not None and hosted._brain is not None
        else {"model": _model_spec(runtime.model)}
    )
    if hosted is not None and hosted._system is not None:
        value["system"] = hosted._system  # as the resource wrote it: its placeholders kept
    elif runtime.system_prompt:
        value["system"] = runtime.system_prompt
    if runtime.max_iterations != 10:
        value["max_iterations"] = runtime.max_iterations
    limits = {
        name: bound
        for field, name in LIMIT_FIELDS.items()
        if (bound := getattr(runtime.limits, field)) is not None
    }
    if limits:
        value["limits"] = limits
    if runtime.output is not None:
        value["output_schema"] = runtime.output.schema
    memory = _memory(runtime.memory.describe() if runtime.memory is not None else None)
    if memory is not None:
        value["memory"] = memory
    settings = hosted.settings if hosted is not None else ModelSettings()
    chosen = temperature if temperature is not None else settings.get("temperature")
    if chosen is not None:
        value["temperature"] = chosen
    if "max_tokens" in settings:
        value["max_tokens"] = settings["max_tokens"]
    tools = _tools(builder, runtime)
    if tools:
        value["tools"] = tools
    agent_definition(value)  # the value reads back as an agent, or nothing is written
    return value


async def asave_agent(
    workspace: AnyWorkspace,
    path: str,
    builder: AgentBuilder,
    *,
    message: str = "",
    temperature: float | None = None,
) -> Item:
    """The async twin of `save_agent`."""
    value = agent_value(builder, temperature=temperature)
    return await workspace_core(workspace).write(
        path, "resource", value, resource_type=AGENT_TYPE, message=message
    )


def save_agent(
    workspace: AnyWorkspace,
    path: str,
    builder: AgentBuilder,
    *,
    message: str = "",
    temperature: float | None = None,
) -> Item:
    """Save an agent builder as the `ai_agent` resource at `path` (a new version).

    What is written is the builder's brain (model spec, system prompt,
    output schema, memory window, limits, max iterations; `temperature`, or
    a loaded agent's own) and its tools, where a resource can hold them: the
    tools of an agent loaded with `load_agent`, as written in the resource
    (a flow by path stays a path). A Python function tool cannot be saved.
    The resource reads back with `load_agent(path, ...)` into the same agent.

    Raises:
        ConfigurationError: See `agent_value` (nothing is written).
        PermissionDenied: The principal may not write `path`.

    Examples:
        >>> import tempfile
        >>> from tidemill import Workspace, agent
        >>> with Workspace(f"sqlite:///{tempfile.mkdtemp()}/t.db", user="ada") as ws:
        ...     _ = ws.add_folder("x")
        ...     item = save_agent(ws, "f/x/brief", agent().llm("fake").system("Be brief."),
        ...                       message="first")
        ...     print(item.version, item.resource_type, ws.get("f/x/brief").value)
        1 ai_agent {'model': 'fake', 'system': 'Be brief.'}
    """
    value = agent_value(builder, temperature=temperature)
    if isinstance(workspace, Workspace):
        return workspace.write(path, "resource", value, resource_type=AGENT_TYPE, message=message)
    return builder._sync.run(
        workspace.write(path, "resource", value, resource_type=AGENT_TYPE, message=message)
    )
