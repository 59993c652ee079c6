"""Every error Tidemill raises, in one tree.

The tree is organised by what the caller can do about an error:

```text
TidemillError                  base: catch this to catch everything
├── ConfigurationError         the code or config is wrong; fix it and retry
│   ├── InvalidOption          an option's value is out of range (also a ValueError)
│   ├── MissingDependencyError an optional extra is missing; install it
│   └── MissingCredentialsError a provider's key, token or region is not set
├── ToolArgumentsError         arguments do not fit a tool's schema
├── SerializationError         data could not be encoded, decoded or stored
│   └── JournalConflict        another writer appended to the same thread first
├── AgentInterrupt             a run paused for human approval; resume it
├── AgentSuspended             tool calls wait for work done elsewhere; resume later
├── ToolSuspended              raised by a tool whose result is not ready yet
└── AgentError                 a run could not proceed
    ├── ApprovalError          a resume decision was invalid; nothing was stored
    ├── ThreadBusy             another process is working on the same thread
    ├── LimitExceeded          a usage limit would be crossed (carries the partial run)
    │   └── MaxIterationsExceeded  the reason/act budget ran out
    ├── OutputValidationError  the final answer kept failing its schema
    ├── ToolRetriesExceeded    the model kept making bad tool calls
    ├── MalformedToolCall      the provider could not parse a tool call
    ├── ScriptExhausted        the scripted test model ran out of answers
    └── GuardrailViolation     a guardrail blocked the run's input or output
```

Errors from LLM providers (HTTP status, network, broken streams):

```text
TidemillError
└── ProviderError              a provider refused or failed a call
    ├── RateLimitError         too many requests or tokens; wait and retry
    ├── AuthenticationError    the API key is missing, wrong or lacks access
    ├── ContextWindowExceeded  the request is longer than the model accepts
    └── ProviderTimeout        no answer within the timeout
```

Errors from flows, the store and the engine (`tidemill.flows`, `tidemill.store`,
`tidemill.engine`):

```text
TidemillError
├── ConfigurationError
│   ├── FlowValidationError    a flow is malformed; `problems` names each step and field
│   └── InvalidSchedule        a cron expression or time zone is not valid
├── FlowInputError             a run's input does not fit the flow's input schema
├── ExpressionError            an expression could not be parsed or evaluated
├── StoreError                 the store could not be opened, migrated or reached
│   └── SchemaVersionError     the database schema is older or newer than this code
└── EngineError                a run or approval could not be found or changed
    ├── RunNotFound            no run (or approval) with that id
    ├── RunStateError          the run's state does not allow it (retry a running run)
    ├── RunFailed              the run failed; carries the failed step and its error
    ├── RunTimeout             `wait(timeout=...)` elapsed before the run finished
    ├── ApprovalDecisionError  the decision came too late, twice, or from the wrong person
    └── LeaseLost              a worker lost its claim on a job; its late write is refused
```

Errors from the workspace (`tidemill.workspace`):

```text
TidemillError
└── WorkspaceError             a workspace operation could not be done; nothing changed
    ├── PermissionDenied       the acting principal may not do this
    ├── ItemNotFound           nothing the principal may see at that path
    ├── VersionConflict        the item changed since the version a write was based on
    ├── UnresolvedReference    a $var:/$res: reference the run's identity cannot read
    └── SignInFailed           the password or token signs no one in (wrong, expired, revoked)
        └── SignInThrottled    too many failed sign-ins: wait before trying again
```

Errors from MCP servers (`tidemill.tools.mcp`):

```text
TidemillError
├── ConfigurationError
│   └── MCPConnectionError     an MCP server could not be started, reached or initialised
└── MCPToolError               an MCP server failed a tool call, or the connection broke
```

Every error carries a `message`, an optional `hint` (what to do next) and a
`context` dict of JSON-safe facts. `str(error)` includes the hint.
"""

from tidemill.errors._agent import (
    AgentError,
    AgentInterrupt,
    AgentSuspended,
    ApprovalError,
    GuardrailViolation,
    LimitExceeded,
    MalformedToolCall,
    MaxIterationsExceeded,
    OutputValidationError,
    ScriptExhausted,
    ThreadBusy,
    ToolRetriesExceeded,
)
from tidemill.errors._base import (
    ConfigurationError,
    InvalidOption,
    MissingCredentialsError,
    MissingDependencyError,
    TidemillError,
)
from tidemill.errors._flows import (
    ApprovalDecisionError,
    EngineError,
    ExpressionError,
    FlowInputError,
    FlowValidationError,
    InvalidSchedule,
    LeaseLost,
    RunFailed,
    RunNotFound,
    RunStateError,
    RunTimeout,
)
from tidemill.errors._provider import (
    AuthenticationError,
    ContextWindowExceeded,
    ProviderError,
    ProviderTimeout,
    RateLimitError,
)
from tidemill.errors._store import (
    JournalConflict,
    SchemaVersionError,
    SerializationError,
    StoreError,
)
from tidemill.errors._tools import (
    MCPConnectionError,
    MCPToolError,
    ToolArgumentsError,
    ToolSuspended,
)
from tidemill.errors._workspace import (
    ItemNotFound,
    PermissionDenied,
    SignInFailed,
    SignInThrottled,
    UnresolvedReference,
    VersionConflict,
    WorkspaceError,
)

__all__ = [
    "AgentError",
    "AgentInterrupt",
    "AgentSuspended",
    "ApprovalDecisionError",
    "ApprovalError",
    "AuthenticationError",
    "ConfigurationError",
    "ContextWindowExceeded",
    "EngineError",
    "ExpressionError",
    "FlowInputError",
    "FlowValidationError",
    "GuardrailViolation",
    "InvalidOption",
    "InvalidSchedule",
    "ItemNotFound",
    "JournalConflict",
    "LeaseLost",
    "LimitExceeded",
    "MCPConnectionError",
    "MCPToolError",
    "MalformedToolCall",
    "MaxIterationsExceeded",
    "MissingCredentialsError",
    "MissingDependencyError",
    "OutputValidationError",
    "PermissionDenied",
    "ProviderError",
    "ProviderTimeout",
    "RateLimitError",
    "RunFailed",
    "RunNotFound",
    "RunStateError",
    "RunTimeout",
    "SchemaVersionError",
    "ScriptExhausted",
    "SerializationError",
    "SignInFailed",
    "SignInThrottled",
    "StoreError",
    "ThreadBusy",
    "TidemillError",
    "ToolArgumentsError",
    "ToolRetriesExceeded",
    "ToolSuspended",
    "UnresolvedReference",
    "VersionConflict",
    "WorkspaceError",
]

# The modules above are private: tracebacks, reprs and pickles name each error by its
# public path (`tidemill.errors.RunFailed`), as they did when the errors were one module.
for _name in __all__:
    globals()[_name].__module__ = __name__
del _name
