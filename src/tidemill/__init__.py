"""Tidemill: run AI agents as durable steps of workflows.

Examples:
    >>> import tidemill
    >>> print(tidemill.agent().llm("fake", responses=["Hello!"]).run("Say hello"))
    Hello!
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, overload

from tidemill._version import __version__
from tidemill.agents import (
    AgentBuilder,
    AgentRuntime,
    Checkpointer,
    MemoryCheckpointer,
    PostgresCheckpointer,
    SQLiteCheckpointer,
    ThreadState,
)
from tidemill.agents import agent as _builder
from tidemill.engine import AsyncEngine, Engine, ModelResolver, Run, save_agent
from tidemill.engine import HostedAgent as _HostedAgent
from tidemill.engine import load_agent as _load_agent
from tidemill.errors import (
    AgentError,
    AgentInterrupt,
    AgentSuspended,
    ApprovalDecisionError,
    ApprovalError,
    AuthenticationError,
    ConfigurationError,
    ContextWindowExceeded,
    EngineError,
    ExpressionError,
    FlowInputError,
    FlowValidationError,
    GuardrailViolation,
    InvalidOption,
    JournalConflict,
    LeaseLost,
    LimitExceeded,
    MalformedToolCall,
    MaxIterationsExceeded,
    MCPConnectionError,
    MCPToolError,
    MissingCredentialsError,
    MissingDependencyError,
    OutputValidationError,
    ProviderError,
    ProviderTimeout,
    RateLimitError,
    RunFailed,
    RunNotFound,
    RunStateError,
    RunTimeout,
    SchemaVersionError,
    ScriptExhausted,
    SerializationError,
    StoreError,
    ThreadBusy,
    TidemillError,
    ToolArgumentsError,
    ToolRetriesExceeded,
    ToolSuspended,
)
from tidemill.flows import Flow
from tidemill.llm import Model, ScriptedModel
from tidemill.tools import Tool, ToolContext, ToolRegistry, tool
from tidemill.types import (
    AgentResponse,
    AgentStep,
    Decision,
    Message,
    Role,
    StreamEvent,
    ToolCall,
    ToolResult,
    Usage,
)
from tidemill.workspace import AsyncWorkspace, Workspace

__all__ = [
    "AgentBuilder",
    "AgentError",
    "AgentInterrupt",
    "AgentResponse",
    "AgentRuntime",
    "AgentStep",
    "AgentSuspended",
    "ApprovalDecisionError",
    "ApprovalError",
    "AsyncEngine",
    "AsyncWorkspace",
    "AuthenticationError",
    "Checkpointer",
    "ConfigurationError",
    "ContextWindowExceeded",
    "Decision",
    "Engine",
    "EngineError",
    "ExpressionError",
    "Flow",
    "FlowInputError",
    "FlowValidationError",
    "GuardrailViolation",
    "InvalidOption",
    "JournalConflict",
    "LeaseLost",
    "LimitExceeded",
    "MCPConnectionError",
    "MCPToolError",
    "MalformedToolCall",
    "MaxIterationsExceeded",
    "MemoryCheckpointer",
    "Message",
    "MissingCredentialsError",
    "MissingDependencyError",
    "Model",
    "OutputValidationError",
    "PostgresCheckpointer",
    "ProviderError",
    "ProviderTimeout",
    "RateLimitError",
    "Role",
    "Run",
    "RunFailed",
    "RunNotFound",
    "RunStateError",
    "RunTimeout",
    "SQLiteCheckpointer",
    "SchemaVersionError",
    "ScriptExhausted",
    "ScriptedModel",
    "SerializationError",
    "StoreError",
    "StreamEvent",
    "ThreadBusy",
    "ThreadState",
    "TidemillError",
    "Tool",
    "ToolArgumentsError",
    "ToolCall",
    "ToolContext",
    "ToolRegistry",
    "ToolResult",
    "ToolRetriesExceeded",
    "ToolSuspended",
    "Usage",
    "Workspace",
    "__version__",
    "agent",
    "save_agent",
    "tool",
]


@overload
def agent() -> AgentBuilder: ...
@overload
def agent(
    path: str,
    *,
    workspace: AsyncWorkspace | Workspace,
    engine: AsyncEngine | Engine | None = None,
    models: ModelResolver | None = None,
    inputs: Mapping[str, Any] | None = None,
    tool_inputs: Mapping[str, Mapping[str, Any]] | None = None,
    enabled_tools: Sequence[str] | None = None,
) -> _HostedAgent: ...
@overload
def agent(
    path: str | None = None,
    *,
    workspace: AsyncWorkspace | Workspace | None = None,
    engine: AsyncEngine | Engine | None = None,
    models: ModelResolver | None = None,
    inputs: Mapping[str, Any] | None = None,
    tool_inputs: Mapping[str, Mapping[str, Any]] | None = None,
    enabled_tools: Sequence[str] | None = None,
) -> AgentBuilder: ...
def agent(
    path: str | None = None,
    *,
    workspace: AsyncWorkspace | Workspace | None = None,
    engine: AsyncEngine | Engine | None = None,
    models: ModelResolver | None = None,
    inputs: Mapping[str, Any] | None = None,
    tool_inputs: Mapping[str, Mapping[str, Any]] | None = None,
    enabled_tools: Sequence[str] | None = None,
) -> AgentBuilder:
    """Start building an agent; with a `path`, the workspace agent saved there.

    `agent()` is an empty `AgentBuilder`. `agent("f/support/triage",
    workspace=ws)` is the `ai_agent` resource at that path (`@7` pins a
    version), read as the workspace's principal, as a builder configured with
    its brain and its tools (`tidemill.engine.load_agent`, which describes the
    other arguments). Save a builder as such a resource with `save_agent`.

    Raises:
        ConfigurationError: A `path` without a `workspace`, or workspace
            options without a `path`; see `load_agent` for the rest.

    Examples:
        >>> import tempfile
        >>> import tidemill
        >>> with tidemill.Workspace(f"sqlite:///{tempfile.mkdtemp()}/t.db", user="ada") as ws:
        ...     _ = ws.add_folder("support")
        ...     _ = tidemill.save_agent(ws, "f/support/triage",
        ...                             tidemill.agent().llm("fake").system("Triage."))
        ...     bot = tidemill.agent("f/support/triage", workspace=ws)
        ...     print(bot.describe()["system_prompt"], bot.run("Refund me").output)
        ...     bot.close()
        Triage. Refund me
    """
    if path is None:
        given = [
            name
            for name, value in (
                ("workspace", workspace), ("engine", engine), ("models", models),
                ("inputs", inputs), ("tool_inputs", tool_inputs),
                ("enabled_tools", enabled_tools),
            )
            if value is not None
        ]  # fmt: skip
        if given:
            raise ConfigurationError(
                f"agent() got {', '.join(given)} but no path: they choose how a saved "
                "agent is loaded.",
                hint="Name the agent: tidemill.agent('f/<folder>/<name>', workspace=ws).",
            )
        return _builder()
    if workspace is None:
        raise ConfigurationError(
            f"agent({path!r}) needs the workspace the agent is saved in.",
            hint=f"tidemill.agent({path!r}, workspace=tidemill.Workspace(url, user=...)).",
        )
    return _load_agent(
        path,
        workspace=workspace,
        engine=engine,
        models=models,
        inputs=inputs,
        tool_inputs=tool_inputs,
        enabled_tools=enabled_tools,
    )
