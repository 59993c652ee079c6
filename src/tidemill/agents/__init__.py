"""The agent library: the builder, the reason/act runtime and its journal.

Start with `tidemill.agent()`; see `AgentBuilder` and `AgentRuntime`.
Checkpointers live in `tidemill.agents.checkpoint`, journal events in
`tidemill.agents.journal`.
"""

from tidemill.agents._builder import AgentBuilder, agent
from tidemill.agents._components import GROUPS
from tidemill.agents._delegation import AgentTool, Delegation, Worker
from tidemill.agents._facade import Prompt
from tidemill.agents._limits import UsageLimits
from tidemill.agents._output import OutputSpec
from tidemill.agents._runtime import AgentRuntime
from tidemill.agents._supervisor import SupervisorRuntime
from tidemill.agents.checkpoint import (
    Checkpointer,
    MemoryCheckpointer,
    PostgresCheckpointer,
    SQLiteCheckpointer,
)
from tidemill.agents.journal import JournalRecord, ThreadState, ThreadStatus

__all__ = [
    "GROUPS",
    "AgentBuilder",
    "AgentRuntime",
    "AgentTool",
    "Checkpointer",
    "Delegation",
    "JournalRecord",
    "MemoryCheckpointer",
    "OutputSpec",
    "PostgresCheckpointer",
    "Prompt",
    "SQLiteCheckpointer",
    "SupervisorRuntime",
    "ThreadState",
    "ThreadStatus",
    "UsageLimits",
    "Worker",
    "agent",
]
