"""The copilot: build and change workspace flows by asking, as the user who asks.

`Copilot` is a Tidemill agent (built with `tidemill.agent()`, journaled like
any other) whose tools read and write through the asking user's
`AsyncWorkspace`: it searches the workspace's flows and scripts before it
writes, proposes flows as the user's drafts (validated, never deployed), and
test-runs a draft only once the user approves. `start_turn` runs a turn of
a conversation as a durable engine run instead (the server's chat API). See
`docs/copilot.md`.
"""

from tidemill.copilot._chat import (
    Conversation,
    conversation,
    conversation_id,
    forget,
    start_turn,
    turn_flow,
)
from tidemill.copilot._copilot import APPROVAL_TOOLS, TOOLS, Copilot
from tidemill.copilot._prompt import SYSTEM_PROMPT, system_prompt
from tidemill.copilot._session import CopilotSession

__all__ = [
    "APPROVAL_TOOLS",
    "SYSTEM_PROMPT",
    "TOOLS",
    "Conversation",
    "Copilot",
    "CopilotSession",
    "conversation",
    "conversation_id",
    "forget",
    "start_turn",
    "system_prompt",
    "turn_flow",
]
