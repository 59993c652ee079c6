"""What an agent run reports: its steps and its response."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from tidemill.types._approvals import ApprovalRecord
from tidemill.types._messages import Message, ToolCall, ToolResult
from tidemill.types._usage import Usage

__all__ = ["AgentResponse", "AgentStep"]


class AgentStep(BaseModel):
    """One reason/act cycle: the model's turn and the tool calls it led to."""

    model_config = ConfigDict(extra="forbid")

    index: int
    """The step's position in the run, from 0."""
    thought: str = ""
    """The text the model wrote alongside its tool calls, or its answer."""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    """The calls the model made, as it made them."""
    tool_results: list[ToolResult] = Field(default_factory=list)
    """The results, in the order they finished."""
    approvals: list[ApprovalRecord] = Field(default_factory=list)
    """Every approval decision taken on this step's calls."""
    usage: Usage = Field(default_factory=Usage)
    """What the step spent: its model call, the summary it wrote, or a pipeline stage's run."""
    model: str | None = None
    """The model that answered, as the provider names it; None if it did not say."""
    note: str | None = None
    """Set when the step is not a plain model turn (a correction, a summary, a pipeline stage)."""


class AgentResponse(BaseModel):
    """The outcome of an agent run.

    `str(response)` is the output, so `print(agent.run(...))` prints the answer.
    """

    model_config = ConfigDict(extra="forbid")

    schema_version: int = 1
    """The version of this response's format."""
    output: Any = None
    """The answer: the model's final text, or a value of the agent's output type if it has one."""
    messages: list[Message] = Field(default_factory=list)
    """The thread's whole transcript, the answer included."""
    steps: list[AgentStep] = Field(default_factory=list)
    """This run's reason/act cycles, across approval pauses and resumes."""
    usage: Usage = Field(default_factory=Usage)
    """What this run spent, across resumes."""
    thread_id: str = ""
    """The thread the run belongs to; empty for a `pipeline` or a failed `broadcast` entry."""
    latency_ms: float = 0.0
    """Wall time of the call that produced this response."""
    metadata: dict[str, JsonValue] = Field(default_factory=dict)
    """Facts about the run: `run_id` for a thread's run, `error` for a failed `broadcast` entry."""

    def __str__(self) -> str:
        return str(self.output)
