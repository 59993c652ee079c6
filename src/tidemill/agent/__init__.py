"""The agent library: the builder, the reason/act runtime and its journal.

Start with `tidemill.agent()`; see `AgentBuilder` and `AgentRuntime`.
Checkpointers live in `tidemill.agent.checkpoint`, journal events in
`tidemill.agent.journal`.
"""

from tidemill.agent._builder import AgentBuilder, agent
from tidemill.agent._delegation import AgentTool, Delegation, Worker
from tidemill.agent._limits import UsageLimits
from tidemill.agent._output import OutputSpec
from tidemill.agent._runtime import AgentRuntime, Prompt
from tidemill.agent.checkpoint import (
    Checkpointer,
    MemoryCheckpointer,
    PostgresCheckpointer,
    SQLiteCheckpointer,
)
from tidemill.agent.journal import JournalRecord, ThreadState, ThreadStatus

__all__ = [
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
    "ThreadState",
    "ThreadStatus",
    "UsageLimits",
    "Worker",
    "agent",
]
