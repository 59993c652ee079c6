"""`AIAction` and `AIAgent`: steps that call a model once, or run an agent.

Both name their model with the agent library's spec strings
(`openai:gpt-4o-mini`, `anthropic:claude-sonnet-4-5`, `fake`, ...). A key
in a flow file is never written out: `api_key: env:NAME` reads the
environment variable `NAME` on the worker when the step runs.
"""

from __future__ import annotations

import re
from typing import Any

from jsonschema import SchemaError
from jsonschema.validators import validator_for
from pydantic import Field, field_validator

from tidemill.errors import ExpressionError
from tidemill.flows._base import FlowModel, StepKind
from tidemill.flows._duration import Duration
from tidemill.flows._expr import compile_expression

__all__ = ["AIAction", "AIAgent", "AgentLimits", "AgentToolSpec", "placeholders"]

_PLACEHOLDER = re.compile(r"\{\{(.*?)\}\}", re.DOTALL)


def placeholders(template: str) -> list[str]:
    """The expressions inside `{{ ... }}` in a prompt template, stripped.

    Example:
        >>> placeholders("Classify: {{ ticket.text }} ({{ lang }})")
        ['ticket.text', 'lang']
    """
    return [match.strip() for match in _PLACEHOLDER.findall(template)]


def _check_template(template: str) -> str:
    for text in placeholders(template):
        try:
            compile_expression(text)
        except ExpressionError as exc:
            raise ValueError(f"invalid placeholder {{{{ {text} }}}}: {exc.reason}") from None
    return template


def _check_schema(schema: dict[str, Any] | None) -> dict[str, Any] | None:
    if schema is not None:
        try:
            validator_for(schema).check_schema(schema)
        except SchemaError as exc:
            raise ValueError(f"not a valid JSON Schema: {exc.message}") from None
    return schema


class _ModelSettings(FlowModel):
    model: str = Field(min_length=1)
    """The model spec, e.g. `openai:gpt-4o-mini` or `anthropic:claude-sonnet-4-5`."""

    base_url: str | None = None
    """Another endpoint for the provider (an OpenAI-compatible server, a proxy)."""

    api_key: str | None = None
    """`env:NAME` to read the key from the worker's environment variable `NAME`."""

    temperature: float | None = Field(default=None, ge=0, le=2)
    """Sampling temperature, when the model accepts one."""

    max_tokens: int | None = Field(default=None, ge=1)
    """The most tokens one answer may have."""

    metadata: dict[str, str] = Field(default_factory=dict)
    """Inference metadata recorded with the usage, e.g. `experiment_id`, `exposure_id`."""

    @field_validator("api_key")
    @classmethod
    def _no_plain_keys(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith("env:"):
            raise ValueError(
                "write `env:NAME` to read the key from an environment variable; "
                "keys are not stored in flows"
            )
        return value


class AIAction(_ModelSettings, StepKind):
    """One model call: render `prompt`, ask the model, validate the answer.

    The prompt's `{{ ... }}` placeholders are expressions over the step's
    evaluated inputs (and `flow_input`, `results`, `previous_result`). With
    `output_schema`, the answer must be JSON matching it; a mismatch is shown
    to the model, up to `output_retries` times, and the step's result is the
    parsed object. Without it, the result is the answer's text.

    Example:
        >>> AIAction(model="fake", prompt="Classify: {{ text }}").output_retries
        2
    """

    prompt: str = Field(min_length=1)
    """The user message, with `{{ expression }}` placeholders."""

    system: str = ""
    """The system prompt (placeholders allowed too)."""

    output_schema: dict[str, Any] | None = None
    """A JSON Schema the answer must match; the result is then the parsed JSON."""

    output_retries: int = Field(default=2, ge=0)
    """How many times a schema mismatch is sent back to the model before the step fails."""

    _check_prompt = field_validator("prompt", "system")(_check_template)
    _check_output = field_validator("output_schema")(_check_schema)


class AgentToolSpec(FlowModel):
    """A tool of an `ai_agent` step: inline Python whose `main(...)` parameters are its arguments.

    The `inputs` bind arguments from the flow; the model fills the rest.
    """

    name: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$")
    """The tool's name, as the model sees it."""

    description: str = ""
    """What the tool does, for the model (default: `main`'s docstring)."""

    script: str | None = None
    """Inline Python defining `main(...)`; its parameters (with type hints) are the arguments."""

    function: str | None = None
    """Or a `module:function` importable on the worker."""

    requires_approval: bool = False
    """Ask a person before each call; the step waits (durably) until they decide."""

    approvers: list[str] = Field(default_factory=list)
    """Who may decide its calls; empty means anyone."""

    inputs: dict[str, Any] = Field(default_factory=dict)
    """Arguments bound by the flow (static values), hidden from the model."""


class AgentLimits(FlowModel):
    """Execution bounds of an `ai_agent` step; crossing one fails the step, naming it."""

    max_tool_calls: int | None = Field(default=None, ge=1)
    max_requests: int | None = Field(default=None, ge=1)
    max_input_tokens: int | None = Field(default=None, ge=1)
    max_output_tokens: int | None = Field(default=None, ge=1)
    max_total_tokens: int | None = Field(default=None, ge=1)
    max_duration: Duration | None = None
    """Wall time for the whole step, across resumes (seconds, or `5m`)."""


class AIAgent(_ModelSettings, StepKind):
    """An agent as a durable step: the model calls tools until it answers.

    The user message is the step's input `user_message`. The agent's journal
    is kept in the store, so another worker continues it after a crash
    without asking the model again for turns it answered or re-running tools
    that finished.

    Example:
        >>> agent = AIAgent(model="fake", tools=[{"name": "lookup", "script": "def main(q): ..."}])
        >>> agent.max_iterations, agent.tools[0].requires_approval
        (10, False)
    """

    system: str = ""
    """The system prompt."""

    max_iterations: int = Field(default=10, ge=1)
    """The most model calls before the step fails (a bound, recorded as such)."""

    tools: list[AgentToolSpec] = Field(default_factory=list)
    """The tools the agent may call."""

    output_schema: dict[str, Any] | None = None
    """A JSON Schema the final answer must match; the result is then the parsed object."""

    limits: AgentLimits = Field(default_factory=AgentLimits)
    """Execution bounds besides `max_iterations`."""

    approval_timeout: Duration | None = None
    """How long a tool call waits for a decision before it is rejected; None waits forever."""

    _check_output = field_validator("output_schema")(_check_schema)
    _check_system = field_validator("system")(_check_template)

    @field_validator("tools")
    @classmethod
    def _unique_tools(cls, tools: list[AgentToolSpec]) -> list[AgentToolSpec]:
        names = [tool.name for tool in tools]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ValueError(f"tool names must be unique; repeated: {', '.join(duplicates)}")
        for tool in tools:
            if (tool.script is None) == (tool.function is None):
                raise ValueError(f"tool {tool.name!r} needs exactly one of script and function")
        return tools
