"""Tidemill: run AI agents as durable steps of workflows.

Example:
    >>> import tidemill
    >>> print(tidemill.agent().llm("fake", responses=["Hello!"]).run("Say hello"))
    Hello!
"""

from tidemill.agent import (
    AgentBuilder,
    AgentRuntime,
    Checkpointer,
    MemoryCheckpointer,
    PostgresCheckpointer,
    SQLiteCheckpointer,
    ThreadState,
    agent,
)
from tidemill.errors import (
    AgentError,
    AgentInterrupt,
    ApprovalError,
    AuthenticationError,
    ConfigurationError,
    ContextWindowExceeded,
    JournalConflict,
    LimitExceeded,
    MalformedToolCall,
    MaxIterationsExceeded,
    MCPConnectionError,
    MCPToolError,
    MissingDependencyError,
    OutputValidationError,
    ProviderError,
    ProviderTimeout,
    RateLimitError,
    ScriptExhausted,
    SerializationError,
    ThreadBusy,
    TidemillError,
    ToolArgumentsError,
    ToolRetriesExceeded,
)
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

__version__ = "0.1.0"

__all__ = [
    "AgentBuilder",
    "AgentError",
    "AgentInterrupt",
    "AgentResponse",
    "AgentRuntime",
    "AgentStep",
    "ApprovalError",
    "AuthenticationError",
    "Checkpointer",
    "ConfigurationError",
    "ContextWindowExceeded",
    "Decision",
    "JournalConflict",
    "LimitExceeded",
    "MCPConnectionError",
    "MCPToolError",
    "MalformedToolCall",
    "MaxIterationsExceeded",
    "MemoryCheckpointer",
    "Message",
    "MissingDependencyError",
    "Model",
    "OutputValidationError",
    "PostgresCheckpointer",
    "ProviderError",
    "ProviderTimeout",
    "RateLimitError",
    "Role",
    "SQLiteCheckpointer",
    "ScriptExhausted",
    "ScriptedModel",
    "SerializationError",
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
    "Usage",
    "__version__",
    "agent",
    "tool",
]
