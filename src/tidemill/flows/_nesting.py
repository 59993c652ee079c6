"""The kinds that nest: branch, parallel, for_each, sub-flows and ai_agent.

Branch, parallel and for_each hold steps; a sub-flow holds a whole flow; the
tools of an `ai_agent` step may be flows or agents. These kinds, `Step` and
`Flow` (in `_flow`) refer to each other, so the two modules import each
other; the rest of the package sits below them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, field_validator, model_validator

from tidemill.errors import ExpressionError
from tidemill.flows._ai import (
    _WORKSPACE_PATH,
    AgentDelegation,
    AgentLimits,
    AgentMemory,
    AgentQuestions,
    MCPTools,
    Specialist,
    SpecialistBudget,
    ToolScript,
    _check_schema,
    _check_template,
    _ModelSettings,
)
from tidemill.flows._base import Expr, ExpressionText, FlowModel, ItemsValue, StepKind
from tidemill.flows._duration import Duration
from tidemill.flows._expr import Expression, compile_expression
from tidemill.flows._problems import problem_error

if TYPE_CHECKING:
    from tidemill.flows._flow import Flow, Step

__all__ = [
    "AIAgent",
    "AgentToolSpec",
    "Body",
    "Branch",
    "Case",
    "ForEach",
    "Parallel",
    "SubFlow",
]


class Case(FlowModel):
    """One case of a `branch`: its steps run when `when` is true."""

    when: ExpressionText
    """The condition, e.g. `results.classify.label == 'refund'`."""

    summary: str = ""
    """What the case is for."""

    steps: list[Step] = Field(min_length=1)
    """The steps to run; the case's result is the last one's."""


class Branch(StepKind):
    """Run the steps of the first case whose `when` is true, else `default`.

    The branch step's result is the result of the last step that ran.
    """

    branches: list[Case] = Field(min_length=1)
    """The cases, tried in order."""

    default: list[Step] = Field(default_factory=list)
    """The steps to run when no case matches (none: the result is null)."""

    def bodies(self) -> tuple[tuple[str, Sequence[Step]], ...]:
        """Each case's steps, then the default steps."""
        cases = tuple((f"branches[{i}].steps", case.steps) for i, case in enumerate(self.branches))
        return (*cases, ("default", self.default)) if self.default else cases

    def expressions(self) -> dict[str, Expression]:
        """Each case's `when`."""
        return {
            f"branches[{i}].when": compile_expression(case.when)
            for i, case in enumerate(self.branches)
        }


class Body(FlowModel):
    """One branch of a `parallel` step."""

    summary: str = ""
    """What the branch does."""

    steps: list[Step] = Field(min_length=1)
    """The steps of the branch; its result is the last one's."""


class Parallel(StepKind):
    """Run every branch at the same time; the result is the list of the branches' results."""

    branches: list[Body] = Field(min_length=1)
    """The branches."""

    def bodies(self) -> tuple[tuple[str, Sequence[Step]], ...]:
        """Each branch's steps."""
        return tuple((f"branches[{i}].steps", body.steps) for i, body in enumerate(self.branches))


class ForEach(StepKind):
    """Run `steps` once per item; the result is the list of each run's result, in item order.

    Inside the steps, the name `iter` is `{"value": item, "index": i}`.
    """

    items: ItemsValue
    """A static list, or `{expr: ...}` giving a list."""

    parallelism: int = Field(default=1, ge=1)
    """How many items run at the same time."""

    steps: list[Step] = Field(min_length=1)
    """The steps run for each item; each run's result is the last one's."""

    def bodies(self) -> tuple[tuple[str, Sequence[Step]], ...]:
        """The steps run per item."""
        return (("steps", self.steps),)

    def expressions(self) -> dict[str, Expression]:
        """`items`, when it is an expression."""
        return {"items": self.items.compiled} if isinstance(self.items, Expr) else {}


class SubFlow(StepKind):
    """Run another flow with the step's inputs as its `flow_input`.

    `flow: child.yaml` is short for `flow: {path: child.yaml}`. `Flow.load`
    reads the file (relative to the parent flow's file) and stores the flow
    inline, so a loaded flow needs no files.
    """

    path: str | None = None
    """The flow file, relative to this flow's file; `Flow.load` inlines it into `flow`."""

    flow: Flow | None = None
    """The sub-flow itself."""

    source_path: str | None = None
    """The file `flow` was read from, for display; set by `Flow.load`."""

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        return {"path": data} if isinstance(data, str) else data

    @model_validator(mode="after")
    def _check(self) -> SubFlow:
        if (self.path is None) == (self.flow is None):
            raise problem_error("", "set exactly one of path and flow")
        if self.source_path is not None and self.flow is None:
            raise problem_error("source_path", "source_path is only allowed with flow")
        return self


class AgentToolSpec(FlowModel):
    """A tool of an `ai_agent` step: exactly one of `script`, `function`, `flow`, `agent`, `mcp`.

    - `script` (inline Python, or `{path: f/...}`, a workspace script) and
      `function` (`module:function`) run in the worker's script pool;
      `main`'s parameters are the tool's arguments.
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

    script: str | ToolScript | None = None
    """Inline Python defining `main(...)`, or `{path: f/<folder>/<name>}`, a workspace script
    (read as the run's identity when the run starts); `main`'s parameters (with type hints)
    are the arguments."""

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

    @property
    def code(self) -> str | None:
        """A `script` tool's Python: inline, or read from the workspace (None until then)."""
        return self.script.code if isinstance(self.script, ToolScript) else self.script


_BOUNDS = (
    "max_requests",
    "max_tool_calls",
    "max_input_tokens",
    "max_output_tokens",
    "max_total_tokens",
)
"""The bounds a specialist's budget shares with its parent's: what it spends counts there too."""


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


def _default(model: type[AIAgent], name: str) -> Any:
    """A field's default value (made by its factory, for the fields that have one)."""
    field = model.model_fields[name]
    return field.get_default(call_default_factory=True)


_AGENT_REFERENCE = re.compile(rf"^{_WORKSPACE_PATH}(?:@[1-9][0-9]*)?\Z")
"""A linked step's `agent`: a workspace path, optionally pinned to a version (`f/x/y@7`)."""

LINKED_STEP_KEYS = frozenset({"agent", "tool_inputs", "enabled_tools", "metadata"})
"""The keys a linked `ai_agent` step may write; the brain and the tools live in the agent."""


class AIAgent(_ModelSettings, StepKind):
    """An agent as a durable step: the model calls tools until it answers.

    The user message is the step's input `user_message`; with `memory`, the
    input `memory_id` names the conversation to recall and extend. The agent's journal
    is kept in the store, so another worker continues it after a crash
    without asking the model again for turns it answered or re-running tools
    that finished.

    A linked step (`agent: f/support/triage`) writes only `agent`,
    `tool_inputs`, `enabled_tools` (and `metadata`): its brain and its tools
    are those of the workspace resource of type `ai_agent` it names, read
    when the step starts.

    Examples:
        >>> agent = AIAgent(model="fake", tools=[{"name": "lookup", "script": "def main(q): ..."}])
        >>> agent.max_iterations, agent.tools[0].requires_approval
        (10, False)
        >>> AIAgent(agent="f/support/triage@3", enabled_tools=["lookup"]).agent
        'f/support/triage@3'
    """

    model: str = ""
    """The model spec, e.g. `openai:gpt-4o-mini` (an inline step needs one; a linked
    step takes its agent's)."""

    agent: str | None = None
    """A linked step: the workspace path of an `ai_agent` resource (`f/support/triage`),
    optionally pinned to one of its versions (`f/support/triage@7`); unpinned, the
    step runs the agent as it is when the step starts."""

    tool_inputs: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """A linked step's per-tool input overrides, keyed by tool name: values or
    `{expr: ...}`, overlaid on the agent's own bindings of that tool (a diff)."""

    enabled_tools: list[str] | None = None
    """The tools this step may call: absent, every tool; a list, the ones it names;
    `[]`, none."""

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
    """Managed memory (`{kind: window, context_length: N}`); None or `{kind: off}` keeps none,
    and the step's input `previous_messages` then supplies the history."""

    questions: AgentQuestions | None = None
    """Let the model ask a person with the tool `ask_person`; None gives it no such tool."""

    _check_output = field_validator("output_schema")(_check_schema)
    _check_system = field_validator("system")(_check_template)

    @property
    def linked(self) -> bool:
        """Whether the step links a workspace agent (`agent` is set)."""
        return self.agent is not None

    @property
    def agent_path(self) -> str | None:
        """The linked agent's workspace path, without its `@version` pin."""
        return None if self.agent is None else self.agent.partition("@")[0]

    @property
    def agent_version(self) -> int | None:
        """The version a linked step pins (`f/x/y@7` -> 7), or None."""
        if self.agent is None or "@" not in self.agent:
            return None
        return int(self.agent.partition("@")[2])

    def templates(self) -> dict[str, str]:
        """`system`, when it is set (the user message is the input `user_message`)."""
        return {"system": self.system} if self.system else {}

    def model_problems(self) -> list[tuple[str, str]]:
        """Its model specs the provider layer cannot read, as (field path, message).

        Its own, its specialists', and those of the agents its tools run.
        """
        found = [] if self.linked else super().model_problems()
        for index, specialist in enumerate(self.specialists):
            found.extend(
                (f"specialists[{index}].{field}", message)
                for field, message in specialist.model_problems()
            )
        for index, tool in enumerate(self.tools):
            if tool.agent is not None:
                found.extend(
                    (f"tools[{index}].agent.{field}", message)
                    for field, message in tool.agent.model_problems()
                )
        return found

    def expressions(self) -> dict[str, Expression]:
        """The `{expr: ...}` inputs its tools bind, evaluated over the step's values."""
        found: dict[str, Expression] = {}
        for index, tool in enumerate(self.tools):
            for name, value in tool.inputs.items():
                if isinstance(value, dict) and set(value) == {"expr"}:
                    text = value["expr"]
                    if isinstance(text, str):
                        found[f"tools[{index}].inputs.{name}"] = compile_expression(text)
        for tool_name, bound in self.tool_inputs.items():
            for name, value in bound.items():
                if isinstance(value, dict) and set(value) == {"expr"}:
                    text = value["expr"]
                    if isinstance(text, str):
                        found[f"tool_inputs.{tool_name}.{name}"] = compile_expression(text)
        return found

    @field_validator("tool_inputs")
    @classmethod
    def _check_tool_inputs(cls, value: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        for tool_name, bound in value.items():
            for name, binding in bound.items():
                if isinstance(binding, dict) and set(binding) == {"expr"}:
                    text = binding["expr"]
                    if not isinstance(text, str):
                        raise ValueError(f"{tool_name}.{name}: an expression is text")
                    try:
                        compile_expression(text)
                    except ExpressionError as exc:
                        raise ValueError(f"{tool_name}.{name}: {exc.message}") from None
        return value

    @model_validator(mode="after")
    def _check_link(self) -> AIAgent:
        if self.agent is None:
            if self.tool_inputs:
                raise problem_error(
                    "tool_inputs",
                    "tool_inputs overrides the tool inputs of a linked agent; "
                    "it needs `agent` (an inline step binds its tools' `inputs` itself)",
                )
            if not self.model:
                raise problem_error("model", "an inline ai_agent step needs a model")
            if self.enabled_tools is not None:
                have = [tool.name for tool in self.tools]
                unknown = [name for name in self.enabled_tools if name not in have]
                if unknown:
                    raise problem_error(
                        "enabled_tools",
                        f"enabled_tools names {', '.join(map(repr, unknown))}, which the step "
                        f"does not have; its tools: {', '.join(have) or 'none'}",
                    )
            return self
        if not _AGENT_REFERENCE.match(self.agent):
            raise problem_error(
                "agent",
                f"write the workspace path of an ai_agent resource (f/<folder>/<name>), "
                f"optionally pinned to a version (f/<folder>/<name>@7), not {self.agent!r}",
            )
        # What was written and differs from its default: a stored definition writes
        # every field (`model_dump_json`), with the defaults, and must read back.
        written = sorted(
            name
            for name in set(self.model_fields_set) - LINKED_STEP_KEYS
            if getattr(self, name) != _default(type(self), name)
        )
        if written:
            raise problem_error(
                "agent",
                f"a linked ai_agent step writes only agent, tool_inputs and enabled_tools; "
                f"{', '.join(written)} live in the agent resource {self.agent_path} "
                "(edit the agent, or unlink the step)",
            )
        return self

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
