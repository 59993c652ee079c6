"""The event model every Tidemill layer speaks.

Messages, tool calls and results, usage, model responses, stream events and
agent responses. Provider adapters parse into these, the agent runtime
journals them, and the proxy and server serialise them back out.
"""

from tidemill.types._agent import AgentResponse, AgentStep
from tidemill.types._approvals import ApprovalRecord, Decision
from tidemill.types._events import (
    STREAM_EVENT,
    ApprovalRequired,
    ReasoningDelta,
    ResponseDone,
    RunDone,
    RunStopped,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
)
from tidemill.types._messages import (
    ImageRef,
    Message,
    Reasoning,
    Role,
    ToolCall,
    ToolDefinition,
    ToolResult,
    new_call_id,
)
from tidemill.types._model import FinishReason, ModelResponse
from tidemill.types._usage import Usage

__all__ = [
    "STREAM_EVENT",
    "AgentResponse",
    "AgentStep",
    "ApprovalRecord",
    "ApprovalRequired",
    "Decision",
    "FinishReason",
    "ImageRef",
    "Message",
    "ModelResponse",
    "Reasoning",
    "ReasoningDelta",
    "ResponseDone",
    "Role",
    "RunDone",
    "RunStopped",
    "StreamEvent",
    "TextDelta",
    "ToolCall",
    "ToolCallDelta",
    "ToolCallEnd",
    "ToolCallStart",
    "ToolDefinition",
    "ToolResult",
    "Usage",
    "new_call_id",
]
