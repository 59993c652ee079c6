"""`AIAction` and `AIAgent`: steps that call a model once, or run an agent.

Both name their model with the agent library's spec strings
(`openai:gpt-4o-mini`, `anthropic:claude-sonnet-4-5`, `fake`, ...). A key
in a flow file is never written out: `api_key: env:NAME` reads the
environment variable `NAME` on the worker when the step runs.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Literal

from jsonschema import SchemaError
from jsonschema.validators import validator_for
from pydantic import Field, field_validator, model_validator

from tidemill.errors import ExpressionError
from tidemill.flows._base import FlowModel, StepKind
from tidemill.flows._duration import Duration
from tidemill.flows._expr import Expression, compile_expression

if TYPE_CHECKING:
    from tidemill.flows._step import SubFlow

__all__ = [
    "AIAction",
    "AIAgent",
    "AgentDelegation",
    "AgentLimits",
    "AgentMemory",
    "AgentQuestions",
    "AgentToolSpec",
    "MCPTools",
    "Specialist",
    "SpecialistBudget",
    "placeholders",
]

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


def _env_only(value: str | None) -> str | None:
    if value is not None and not value.startswith("env:"):
        raise ValueError(
            "write `env:NAME` to read the key from an environment variable; "
            "keys are not stored in flows"
        )
    return value


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

    _no_plain_keys = field_validator("api_key")(_env_only)


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


class MCPTools(FlowModel):
    """An MCP server whose tools an `ai_agent` step may call, named `<tool name>__<server tool>`.

    The step connects when it starts (a `command` run as a subprocess over
    stdio, or a streamable HTTP `url`) and disconnects when it ends. Values
    of `env` and `headers` written `env:NAME` are read from the worker's
    environment variable `NAME`, so keys stay out of flow files.

    Example:
        >>> MCPTools(command="uvx", args=["mcp-server-fetch"]).call_timeout
        300.0
    """

    command: str | None = None
    """The program that runs the server (stdio)."""

    args: list[str] = Field(default_factory=list)
    """Its arguments."""

    env: dict[str, str] = Field(default_factory=dict)
    """Variables for the server process (`env:NAME` reads the worker's `NAME`)."""

    url: str | None = None
    """Or the endpoint of a running streamable HTTP server."""

    headers: dict[str, str] = Field(default_factory=dict)
    """HTTP headers for every request (`env:NAME` reads the worker's `NAME`)."""

    tools: list[str] | None = None
    """The server's tools the model may call (their names on the server); None: all of them."""

    connect_timeout: float = Field(default=10.0, gt=0)
    """Seconds to start or reach the server and list its tools."""

    call_timeout: float = Field(default=300.0, gt=0)
    """Seconds one call may take."""

    @model_validator(mode="after")
    def _one_transport(self) -> MCPTools:
        if (self.command is None) == (self.url is None):
            raise ValueError("an MCP server needs exactly one of command (stdio) and url (HTTP)")
        return self


class AgentToolSpec(FlowModel):
    """A tool of an `ai_agent` step: exactly one of `script`, `function`, `flow`, `agent`, `mcp`.

    - `script` (inline Python) and `function` (`module:function`) run in the
      worker's script pool; `main`'s parameters are the tool's arguments.
    - `flow` runs a sub-flow as a child run per call: the sub-flow's
      `inputs` schema is the tool's arguments, its result the tool's result.
    - `agent` runs a nested agent as a child run per call: the model gives
      it a `message`, its answer is the result.
    - `mcp` gives the model the tools of an MCP server.

    A child run's id is derived from (run, step, call), so a step that
    resumes after a crash finds the child its call started instead of
    starting another; while children run, the step waits without holding
    a worker. The `inputs` bind arguments from the flow; the model fills
    the rest.
    """

    name: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$")
    """The tool's name, as the model sees it (for `mcp`: the prefix of its tools' names)."""

    description: str = ""
    """What the tool does, for the model (default: `main`'s docstring, the flow's summary)."""

    script: str | None = None
    """Inline Python defining `main(...)`; its parameters (with type hints) are the arguments."""

    function: str | None = None
    """Or a `module:function` importable on the worker."""

    flow: SubFlow | None = None
    """Or a sub-flow (`flow: file.yaml`, read by `Flow.load`, or inline), run per call."""

    agent: AIAgent | None = None
    """Or a nested agent, run per call with the model's `message` as its user message."""

    mcp: MCPTools | None = None
    """Or an MCP server, whose tools the model may call."""

    run: Literal["pool", "child", "in_process"] = "pool"
    """Where a `script` or `function` tool's calls run: `pool`, the worker's script pool
    (isolated; a call cut short by a crash runs again with the same idempotency key);
    `child`, a child run per call like a `flow` tool's (any worker runs it, the agent
    waits without holding a worker, and a re-dispatch finds it instead of running it
    again; it costs a job's round trip per call); or `in_process` (`function` only), in
    the worker itself: fastest, not isolated (a crash or a hang in it is the worker's;
    a plain function runs on the worker's event loop, so keep it short or make it async);
    it reads its idempotency key with `tidemill.engine.current_step()`."""

    requires_approval: bool = False
    """Ask a person before each call; the step waits (durably) until they decide."""

    approvers: list[str] = Field(default_factory=list)
    """Who may decide its calls (and confirm a call cut short by a crash); empty means anyone."""

    inputs: dict[str, Any] = Field(default_factory=dict)
    """Arguments bound by the flow (static values), hidden from the model."""

    idempotent: bool = True
    """Whether a call may safely run twice with the same idempotency key.

    A call cut short by a crash runs again with the same key. A tool that
    cannot be safely run twice sets `idempotent: false`: the step then waits
    for a person to confirm whether the call took effect (an approval of
    kind `reconcile`) instead of running it again.
    """


class AgentLimits(FlowModel):
    """Execution bounds of an `ai_agent` step; crossing one fails the step, naming it."""

    max_tool_calls: int | None = Field(default=None, ge=1)
    max_requests: int | None = Field(default=None, ge=1)
    max_input_tokens: int | None = Field(default=None, ge=1)
    max_output_tokens: int | None = Field(default=None, ge=1)
    max_total_tokens: int | None = Field(default=None, ge=1)
    max_duration: Duration | None = None
    """Wall time for the whole step, across resumes (seconds, or `5m`)."""
    on_exceeded: Literal["fail", "ask"] = "fail"
    """`ask`: when `max_requests`, `max_tool_calls`, a token bound or `max_duration` is used
    up, park the step with an approval of kind `budget` (approvers: the tools' approvers, or
    anyone) that extends the bound or stops; `max_iterations` always fails."""


class AgentQuestions(FlowModel):
    """Questions an `ai_agent` step may ask a person, with the built-in tool `ask_person`.

    A call of `ask_person(question)` parks the step with an approval row of
    kind `question`; the person's answer (`tidemill approvals answer`) is the
    call's result. A question waits `approval_timeout` (the agent's); when it
    expires, the model is told no answer came and goes on.
    """

    approvers: list[str] = Field(default_factory=list)
    """Who may answer; empty means anyone."""


class AgentMemory(FlowModel):
    """Conversation memory of an `ai_agent` step, kept per (memory id, step).

    The memory id is the step's input `memory_id` (an expression like any
    input, e.g. `flow_input.customer`); without one the step neither recalls
    nor stores anything. A successful step appends its exchange (the user
    message and the final answer) in the transaction that records its result.
    A fresh agent run recalls the newest `turns` exchanges as one user-role
    message, framed as untrusted information, before the new user message.

    Example:
        >>> AgentMemory().turns
        10
    """

    turns: int = Field(default=10, ge=1)
    """The most earlier exchanges (a user message and its answer) recalled."""


_BOUNDS = (
    "max_requests",
    "max_tool_calls",
    "max_input_tokens",
    "max_output_tokens",
    "max_total_tokens",
)
"""The bounds a specialist's budget shares with its parent's: what it spends counts there too."""


class SpecialistBudget(FlowModel):
    """What one delegated task may spend; crossing a bound fails that task, not the step.

    Where the delegating agent is bounded (the step's `limits`, or the
    enclosing specialist's budget), the budget must set the same bound, no
    larger. When the model delegates, the budgets of the tasks must fit in
    what the delegating agent has left, or nothing starts.
    """

    max_iterations: int = Field(default=10, ge=1)
    """Model calls of the task's agent run before it fails."""

    max_requests: int | None = Field(default=None, ge=1)
    max_tool_calls: int | None = Field(default=None, ge=1)
    max_input_tokens: int | None = Field(default=None, ge=1)
    max_output_tokens: int | None = Field(default=None, ge=1)
    max_total_tokens: int | None = Field(default=None, ge=1)


class Specialist(FlowModel):
    """An agent an `ai_agent` step may delegate tasks to; it sees only its task and lineage.

    Example:
        >>> Specialist(name="researcher", tools=["search"]).budget.max_iterations
        10
    """

    name: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$")
    """How the delegating model names it."""

    description: str = ""
    """What it is good at, for the delegating model."""

    system: str = ""
    """Its system prompt."""

    model: str | None = Field(default=None, min_length=1)
    """Its model spec; the step's model (and endpoint, key) when unset."""

    base_url: str | None = None
    """Another endpoint for its own `model`."""

    api_key: str | None = None
    """`env:NAME` for its own `model`."""

    tools: list[str] = Field(default_factory=list)
    """Tools it may use: only those its parent has and `delegation.allow` lists too."""

    output_schema: dict[str, Any] | None = None
    """A JSON Schema its answer must match; a mismatch is its task's error."""

    budget: SpecialistBudget = Field(default_factory=SpecialistBudget)
    """What each of its tasks may spend."""

    specialists: list[Specialist] = Field(default_factory=list)
    """Specialists it may delegate to in turn (within `delegation.max_depth`)."""

    _check_output = field_validator("output_schema")(_check_schema)
    _no_plain_keys = field_validator("api_key")(_env_only)


class AgentDelegation(FlowModel):
    """Bounds on an `ai_agent` step's delegation to its specialists."""

    allow: list[str] = Field(default_factory=list)
    """Tools specialists may be given at all (a specialist gets those it lists, too)."""

    max_depth: int = Field(default=1, ge=1)
    """How deep delegations may nest: 1 lets the step's agent delegate, not its specialists."""

    max_fanout: int = Field(default=4, ge=1)
    """Tasks one delegation may start (one delegation per model turn)."""

    max_concurrency: int = Field(default=2, ge=1)
    """Tasks of one delegating agent running at once."""


def _bounds_of(source: AgentLimits | SpecialistBudget) -> dict[str, int]:
    return {name: value for name in _BOUNDS if (value := getattr(source, name)) is not None}


def _check_team(
    where: str,
    specialists: list[Specialist],
    tools: dict[str, AgentToolSpec],
    bounds: dict[str, int],
) -> None:
    """Raise ValueError for the first problem of `specialists` under a parent `where`."""
    names = [specialist.name for specialist in specialists]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ValueError(
            f"specialist names of {where} must be unique; repeated: {', '.join(repeated)}"
        )
    for specialist in specialists:
        label = f"specialist {specialist.name!r}"
        for name in specialist.tools:
            tool = tools.get(name)
            if tool is None:
                raise ValueError(f"{label} names the tool {name!r}, which {where} does not have")
            if (tool.script is None and tool.function is None) or tool.run == "child":
                raise ValueError(
                    f"{label} names the tool {name!r}; specialists may use script and "
                    "function tools that do not run as child runs"
                )
            if tool.requires_approval or not tool.idempotent:
                raise ValueError(
                    f"{label} names the tool {name!r}, which needs a person "
                    "(requires_approval or idempotent: false); specialists run unattended"
                )
        own = _bounds_of(specialist.budget)
        for name, limit in bounds.items():
            if name not in own:
                raise ValueError(f"{label} needs budget.{name}: {where} is bounded to {limit}")
            if own[name] > limit:
                raise ValueError(
                    f"{label} has budget.{name} {own[name]}, more than the {limit} of {where}"
                )
        mine = {name: tools[name] for name in specialist.tools}
        _check_team(label, specialist.specialists, mine, own)


class AIAgent(_ModelSettings, StepKind):
    """An agent as a durable step: the model calls tools until it answers.

    The user message is the step's input `user_message`; with `memory`, the
    input `memory_id` names the conversation to recall and extend. The agent's journal
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

    specialists: list[Specialist] = Field(default_factory=list)
    """Agents it may delegate tasks to, with the tool `delegate`."""

    delegation: AgentDelegation = Field(default_factory=AgentDelegation)
    """Bounds on delegation: allowed tools, depth, fan-out, concurrency."""

    memory: AgentMemory | None = None
    """Conversation memory keyed by the step's input `memory_id`; None keeps none."""

    questions: AgentQuestions | None = None
    """Let the model ask a person with the tool `ask_person`; None gives it no such tool."""

    _check_output = field_validator("output_schema")(_check_schema)
    _check_system = field_validator("system")(_check_template)

    def expressions(self) -> dict[str, Expression]:
        """The `{expr: ...}` inputs its tools bind, evaluated over the step's values."""
        found: dict[str, Expression] = {}
        for index, tool in enumerate(self.tools):
            for name, value in tool.inputs.items():
                if isinstance(value, dict) and set(value) == {"expr"}:
                    text = value["expr"]
                    if isinstance(text, str):
                        found[f"tools[{index}].inputs.{name}"] = compile_expression(text)
        return found

    @model_validator(mode="after")
    def _check_specialists(self) -> AIAgent:
        if not self.specialists:
            return self
        tools = {tool.name: tool for tool in self.tools}
        if "delegate" in tools:
            raise ValueError("a tool may not be named 'delegate' when the agent has specialists")
        unknown = [name for name in self.delegation.allow if name not in tools]
        if unknown:
            raise ValueError(f"delegation.allow names unknown tools: {', '.join(unknown)}")
        _check_team("the step's agent", self.specialists, tools, _bounds_of(self.limits))
        return self

    @field_validator("tools")
    @classmethod
    def _unique_tools(cls, tools: list[AgentToolSpec]) -> list[AgentToolSpec]:
        names = [tool.name for tool in tools]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ValueError(f"tool names must be unique; repeated: {', '.join(duplicates)}")
        for tool in tools:
            if tool.name == "ask_person":
                raise ValueError("the tool name 'ask_person' is reserved (see `questions`)")
            _check_tool(tool)
        return tools


_TOOL_KINDS = ("script", "function", "flow", "agent", "mcp")


def _check_tool(tool: AgentToolSpec) -> None:
    """Raise ValueError unless a tool spec is one kind and asks only what that kind can do."""
    kinds = [kind for kind in _TOOL_KINDS if getattr(tool, kind) is not None]
    if len(kinds) != 1:
        given = f"; it has {' and '.join(kinds)}" if kinds else ""
        raise ValueError(f"tool {tool.name!r} needs exactly one of {', '.join(_TOOL_KINDS)}{given}")
    kind = kinds[0]
    if tool.run == "child" and kind not in ("script", "function"):
        raise ValueError(f"tool {tool.name!r}: `run` applies to script and function tools")
    if tool.run == "in_process" and kind != "function":
        raise ValueError(f"tool {tool.name!r}: `run: in_process` applies to function tools")
    if (kind in ("flow", "agent") or tool.run == "child") and not tool.idempotent:
        raise ValueError(
            f"tool {tool.name!r}: a {kind} tool runs as a child run whose id is derived from "
            "its call, so it never runs twice; `idempotent: false` does not apply"
        )
    if kind == "agent":
        odd = [name for name in tool.inputs if not name.isidentifier() or name == "message"]
        if odd:
            raise ValueError(
                f"tool {tool.name!r}: an agent tool binds step inputs of its agent by name "
                f"(such as memory_id); not {', '.join(map(repr, odd))}"
            )
    if kind == "mcp" and tool.inputs:
        raise ValueError(f"tool {tool.name!r}: an mcp tool takes no inputs (bind them in env)")
