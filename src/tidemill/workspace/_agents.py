"""Reusable agents: a resource of type `ai_agent`, linked from `ai_agent` steps.

An agent resource holds the same keys as an inline `ai_agent` step (its
brain: model or provider, system prompt, temperature, output schema,
memory, limits, ...; and its tools), minus what belongs to one use of it
in one flow (`agent`, `tool_inputs`, `enabled_tools`). Its tools' `inputs`
bindings are kept exactly as written: static values, `{expr: ...}`
expressions, and (absent) the ones the model fills.

A linked step (`ai_agent: {agent: f/support/triage}`) narrows the agent's
tools with `enabled_tools` (`select_tools`) and overrides their bindings
with `tool_inputs` (`overlay_tool_inputs`); `unlink` forks that resolved
configuration back into an inline step, and `save_as_agent` turns an
inline step into an agent resource's value. `agent_diff` and
`closure` (in `_agent_closure`) compare two versions and list what a flow
needs elsewhere.

Examples:
    >>> value = {"model": "fake", "tools": [
    ...     {"name": "lookup", "script": "def main(order_id, region): ...",
    ...      "inputs": {"region": "eu"}}]}
    >>> agent_definition(value, path="f/support/triage").tools[0].inputs
    {'region': 'eu'}
    >>> unlink(value, tool_inputs={"lookup": {"region": {"expr": "flow_input.region"}}},
    ...        enabled_tools=None)["tools"][0]["inputs"]
    {'region': {'expr': 'flow_input.region'}}
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any, overload

from pydantic import ValidationError

from tidemill.errors import ExpressionError
from tidemill.flows import AgentToolSpec, AIAgent
from tidemill.flows._expr import compile_expression
from tidemill.flows._problems import PROBLEM_ERROR
from tidemill.workspace._values import InvalidValue

__all__ = [
    "AGENT_TYPE",
    "FLOW_LOCAL_KEYS",
    "agent_definition",
    "agent_diff",
    "linked_agent",
    "overlay_tool_inputs",
    "save_as_agent",
    "select_tools",
    "unlink",
]

AGENT_TYPE = "ai_agent"
"""The built-in resource type of a reusable agent."""

FLOW_LOCAL_KEYS = ("agent", "tool_inputs", "enabled_tools")
"""The keys of an `ai_agent` step that belong to one use of an agent, never to the agent."""

_FLOW_NAMES = frozenset({"flow_input", "results", "previous_result", "iter"})
"""What an expression reads from the flow around the step; an agent has no such context."""


def _where(location: Sequence[int | str]) -> str:
    text = ""
    for part in location:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _problems(exc: ValidationError) -> list[str]:
    """Each problem of a validation error, as `at <field>: <message>`."""
    found: list[str] = []
    for error in exc.errors():
        location = list(error["loc"])
        if error["type"] == PROBLEM_ERROR:
            field = str((error.get("ctx") or {}).get("field", ""))
            location.extend(part for part in field.split(".") if part)
        where = _where(location) or "$"
        found.append(f"at {where}: {error['msg']}")
    return found


def agent_definition(value: Any, *, path: str = "an ai_agent resource") -> AIAgent:
    """Validate the value of an `ai_agent` resource as the agent it defines.

    Args:
        value: The resource's value: the keys of an inline `ai_agent` step.
        path: The resource's path, named in the error.

    Raises:
        InvalidValue: Listing every problem as `at <field>: <message>`.

    Examples:
        >>> agent_definition({"model": "fake", "system": "Be brief."}).system
        'Be brief.'
        >>> try:
        ...     agent_definition({"system": "x", "tool_inputs": {}}, path="f/a/b")
        ... except InvalidValue as exc:
        ...     print(exc.problems)
        ['at tool_inputs: tool_inputs belongs to a step that links the agent, not to the agent']
    """
    if not isinstance(value, Mapping):
        raise InvalidValue(
            f"{path}: an agent is a mapping (the keys of an inline ai_agent step).",
            problems=["at $: an agent is a mapping"],
        )
    local = [
        f"at {key}: {key} belongs to a step that links the agent, not to the agent"
        for key in FLOW_LOCAL_KEYS
        if key in value
    ]
    if local:
        raise _invalid(path, local)
    try:
        return AIAgent.model_validate(dict(value))
    except ValidationError as exc:
        raise _invalid(path, _problems(exc)) from None


def _invalid(path: str, problems: list[str]) -> InvalidValue:
    return InvalidValue(
        f"{path} is not a valid agent: {'; '.join(problems)}",
        problems=problems,
        hint="An agent holds the keys of an inline ai_agent step (see docs/ai-steps.md).",
        context={"path": path, "problems": problems},
    )


def _reads_the_flow(binding: Any) -> bool:
    """Whether a tool input binding is an expression over the flow around the step."""
    if not (isinstance(binding, dict) and set(binding) == {"expr"}):
        return False
    text = binding["expr"]
    if not isinstance(text, str):
        return False
    try:
        names = compile_expression(text).names
    except ExpressionError:
        return True
    return bool(names & _FLOW_NAMES)


def _agent_value(agent: Mapping[str, Any]) -> dict[str, Any]:
    """An agent mapping with its tools' flow expressions dropped (model-filled)."""
    value = {key: item for key, item in agent.items() if key not in FLOW_LOCAL_KEYS}
    tools = value.get("tools")
    if isinstance(tools, list):
        value["tools"] = [_tool_value(tool) if isinstance(tool, dict) else tool for tool in tools]
    return value


def _tool_value(tool: dict[str, Any]) -> dict[str, Any]:
    """A top-level tool with its bindings over the flow dropped.

    A nested agent's tools are kept as written: each call of an agent tool
    is a child run, whose `flow_input` is the call's `message` and the agent
    tool's bound inputs, so a binding there reads the agent's own inputs,
    never the flow around the step (there is nothing to move to `tool_inputs`).
    """
    value = dict(tool)
    inputs = value.get("inputs")
    if isinstance(inputs, dict):
        kept = {name: item for name, item in inputs.items() if not _reads_the_flow(item)}
        if kept:
            value["inputs"] = kept
        else:
            del value["inputs"]
    return value


def save_as_agent(step: AIAgent | Mapping[str, Any]) -> dict[str, Any]:
    """An inline `ai_agent` step's configuration as the value of an agent resource.

    The keys written on the step are kept as written; its tools' bindings
    that read the flow (`{expr: ...}` naming `flow_input`, `results`,
    `previous_result` or `iter`) become model-filled (they are dropped),
    static values and other expressions are kept. A nested agent tool's own
    tools are kept whole: their `flow_input` is the nested agent's child
    run's input (its `message` and the agent tool's bound inputs), which
    the agent carries. `enabled_tools` is a choice of the step, not of the
    agent: it is dropped too.

    Args:
        step: The step's `ai_agent` settings, as a model or as written.

    Raises:
        InvalidValue: The step is linked (it has no configuration of its own).

    Examples:
        >>> save_as_agent({"model": "fake", "tools": [{"name": "t", "function": "m:f",
        ...     "inputs": {"a": 1, "b": {"expr": "flow_input.b"}}}]})
        {'model': 'fake', 'tools': [{'name': 't', 'function': 'm:f', 'inputs': {'a': 1}}]}
    """
    if isinstance(step, AIAgent):
        if step.agent is not None:
            raise InvalidValue(f"the step links {step.agent}: unlink it first, or edit the agent.")
        written: dict[str, Any] = step.model_dump(mode="json", exclude_unset=True)
    else:
        if step.get("agent") is not None:
            raise InvalidValue(
                f"the step links {step['agent']}: unlink it first, or edit the agent."
            )
        written = copy.deepcopy(dict(step))
    return _agent_value(written)


_Tools = Sequence[AgentToolSpec] | Sequence[Mapping[str, Any]]


def _name(tool: AgentToolSpec | Mapping[str, Any]) -> str:
    return tool.name if isinstance(tool, AgentToolSpec) else str(tool.get("name"))


def _names(tools: _Tools) -> list[str]:
    return [_name(tool) for tool in tools]


def _copy(tool: AgentToolSpec | Mapping[str, Any]) -> Any:
    return tool if isinstance(tool, AgentToolSpec) else dict(tool)


def _unknown(agent_path: str, what: str, unknown: Sequence[str], have: list[str]) -> InvalidValue:
    return InvalidValue(
        f"{what} names {', '.join(map(repr, unknown))}, which the agent {agent_path} does not "
        f"have; its tools: {', '.join(have) or 'none'}",
        problems=[f"at {what}: unknown tool {name!r}" for name in unknown],
        context={"agent": agent_path, "tools": have, "unknown": list(unknown)},
    )


@overload
def select_tools(
    tools: Sequence[AgentToolSpec], enabled_tools: Sequence[str] | None, *, agent_path: str
) -> list[AgentToolSpec]: ...
@overload
def select_tools(
    tools: Sequence[Mapping[str, Any]], enabled_tools: Sequence[str] | None, *, agent_path: str
) -> list[dict[str, Any]]: ...
def select_tools(tools: _Tools, enabled_tools: Sequence[str] | None, *, agent_path: str) -> Any:
    """The tools a step may call: every one (None), the ones named, or none (`[]`).

    The agent's order is kept. The tools are `AgentToolSpec`s or mappings
    (a resource's value, as written); the result is of the same sort.

    Raises:
        InvalidValue: A name the agent does not have (naming the agent's tools).

    Examples:
        >>> tools = [{"name": "a"}, {"name": "b"}]
        >>> [tool["name"] for tool in select_tools(tools, ["b"], agent_path="f/x/y")]
        ['b']
        >>> select_tools(tools, [], agent_path="f/x/y")
        []
    """
    if enabled_tools is None:
        return [_copy(tool) for tool in tools]
    have = _names(tools)
    unknown = [name for name in dict.fromkeys(enabled_tools) if name not in have]
    if unknown:
        raise _unknown(agent_path, "enabled_tools", unknown, have)
    wanted = set(enabled_tools)
    return [_copy(tool) for tool in tools if _name(tool) in wanted]


@overload
def overlay_tool_inputs(
    tools: Sequence[AgentToolSpec],
    tool_inputs: Mapping[str, Mapping[str, Any]],
    *,
    agent_path: str = ...,
) -> list[AgentToolSpec]: ...
@overload
def overlay_tool_inputs(
    tools: Sequence[Mapping[str, Any]],
    tool_inputs: Mapping[str, Mapping[str, Any]],
    *,
    agent_path: str = ...,
) -> list[dict[str, Any]]: ...
def overlay_tool_inputs(
    tools: _Tools,
    tool_inputs: Mapping[str, Mapping[str, Any]],
    *,
    agent_path: str = "the agent",
) -> Any:
    """The tools with each one's `inputs` overlaid by `tool_inputs[name]` (its keys win).

    The tools are `AgentToolSpec`s or mappings; the result is of the same sort.

    Raises:
        InvalidValue: `tool_inputs` names a tool the agent does not have, or
            binds inputs of an `mcp` tool (which takes none).

    Examples:
        >>> tools = [{"name": "a", "function": "m:f", "inputs": {"x": 1, "y": 2}}]
        >>> overlay_tool_inputs(tools, {"a": {"y": {"expr": "flow_input.y"}}})[0]["inputs"]
        {'x': 1, 'y': {'expr': 'flow_input.y'}}
    """
    have = _names(tools)
    unknown = [name for name in tool_inputs if name not in have]
    if unknown:
        raise _unknown(agent_path, "tool_inputs", unknown, have)
    overlaid: list[Any] = []
    for tool in tools:
        name = _name(tool)
        overrides = tool_inputs.get(name)
        if not overrides:
            overlaid.append(_copy(tool))
            continue
        if isinstance(tool, AgentToolSpec):
            mcp, inputs = tool.mcp is not None, dict(tool.inputs)
        else:
            mcp, inputs = tool.get("mcp") is not None, dict(tool.get("inputs") or {})
        if mcp:
            raise InvalidValue(
                f"tool_inputs binds inputs of {name!r}, an mcp tool of "
                f"{agent_path}: an mcp tool takes no inputs",
                context={"agent": agent_path, "tool": name},
            )
        inputs.update(overrides)
        if isinstance(tool, AgentToolSpec):
            overlaid.append(tool.model_copy(update={"inputs": inputs}))
        else:
            overlaid.append({**tool, "inputs": inputs})
    return overlaid


def _prune(team: Any, kept: set[str]) -> Any:
    """Specialists with the tools that are no longer there taken out of their lists."""
    if not isinstance(team, list):
        return team
    pruned: list[Any] = []
    for specialist in team:
        if isinstance(specialist, dict):
            specialist = dict(specialist)
            if isinstance(specialist.get("tools"), list):
                specialist["tools"] = [name for name in specialist["tools"] if name in kept]
            if "specialists" in specialist:
                specialist["specialists"] = _prune(specialist["specialists"], kept)
        pruned.append(specialist)
    return pruned


def unlink(
    value: Mapping[str, Any],
    *,
    tool_inputs: Mapping[str, Mapping[str, Any]],
    enabled_tools: Sequence[str] | None,
    agent_path: str = "the agent",
) -> dict[str, Any]:
    """A linked step forked back into an inline `ai_agent` mapping.

    The agent's configuration, with each tool's inputs overlaid by
    `tool_inputs` and only the tools `enabled_tools` names (all when None);
    a specialist's tools and `delegation.allow` lose the tools left out.

    Raises:
        InvalidValue: `tool_inputs` or `enabled_tools` names a tool the agent does not have.

    Examples:
        >>> unlink({"model": "fake", "tools": [{"name": "a", "function": "m:f"},
        ...     {"name": "b", "function": "m:g"}]}, tool_inputs={}, enabled_tools=["b"])
        {'model': 'fake', 'tools': [{'name': 'b', 'function': 'm:g'}]}
    """
    inline = {key: copy.deepcopy(item) for key, item in value.items() if key not in FLOW_LOCAL_KEYS}
    written = inline.get("tools")
    tools: list[Mapping[str, Any]] = (
        [tool for tool in written if isinstance(tool, Mapping)] if isinstance(written, list) else []
    )
    overlaid = overlay_tool_inputs(tools, tool_inputs, agent_path=agent_path)
    selected = select_tools(overlaid, enabled_tools, agent_path=agent_path)
    if "tools" in inline or selected:
        inline["tools"] = selected
    if enabled_tools is not None:
        kept = {str(tool.get("name")) for tool in selected}
        if "specialists" in inline:
            inline["specialists"] = _prune(inline["specialists"], kept)
        delegation = inline.get("delegation")
        if isinstance(delegation, dict) and isinstance(delegation.get("allow"), list):
            inline["delegation"] = {
                **delegation,
                "allow": [name for name in delegation["allow"] if name in kept],
            }
    return inline


def linked_agent(step: AIAgent, value: Mapping[str, Any]) -> AIAgent:
    """The agent a linked step runs: the resource `value` with the step's choices on top.

    Its tools are those of the agent that `enabled_tools` names, their inputs
    overlaid by `tool_inputs`; the step's `metadata` is added to the agent's.

    Raises:
        InvalidValue: The value is not a valid agent, or the step names a
            tool the agent does not have.
    """
    path = step.agent_path or "the agent"
    agent_definition(value, path=path)
    inline = unlink(
        value, tool_inputs=step.tool_inputs, enabled_tools=step.enabled_tools, agent_path=path
    )
    if step.metadata:
        inline["metadata"] = {**dict(inline.get("metadata") or {}), **step.metadata}
    return agent_definition(inline, path=path)


# --- diff ------------------------------------------------------------------------------------


def _show(value: Any) -> str:
    """A value as short readable text: `'A'`, `{expr: flow_input.id}`, `[1, 2]`."""
    if isinstance(value, str):
        return repr(value)
    if value is None or isinstance(value, bool):
        return {None: "null", True: "true", False: "false"}[value]
    if isinstance(value, Mapping):
        if set(value) == {"expr"} and isinstance(value["expr"], str):
            return f"{{expr: {value['expr']}}}"
        return "{" + ", ".join(f"{key}: {_show(item)}" for key, item in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_show(item) for item in value) + "]"
    return str(value)


def _flatten(value: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested mappings as dotted keys; `{expr: ...}` bindings and lists stay whole."""
    flat: dict[str, Any] = {}
    for key, item in value.items():
        name = f"{prefix}{key}"
        if isinstance(item, Mapping) and item and set(item) != {"expr"}:
            flat.update(_flatten(item, f"{name}."))
        else:
            flat[name] = item
    return flat


def _changes(old: Mapping[str, Any], new: Mapping[str, Any], lead: str) -> list[str]:
    before, after = _flatten(old), _flatten(new)
    lines: list[str] = []
    for key in dict.fromkeys([*before, *after]):
        if key not in after:
            lines.append(f"- {lead}{key}: {_show(before[key])}")
        elif key not in before:
            lines.append(f"+ {lead}{key}: {_show(after[key])}")
        elif before[key] != after[key]:
            lines.append(f"{lead}{key}: {_show(before[key])} -> {_show(after[key])}")
    return lines


def agent_diff(old_value: Mapping[str, Any], new_value: Mapping[str, Any]) -> str:
    """What changed between two versions of an agent: the brain first, then tool by tool.

    One line per change: `key: old -> new`, `+ key: value`, `- key: value`;
    then `+ tool <name>`, `- tool <name>`, `tool <name>: <key>: old -> new`,
    and the new order when the tools were reordered. Empty when nothing changed.

    Examples:
        >>> old = {"model": "a", "tools": [{"name": "lookup", "function": "m:f",
        ...     "inputs": {"order_id": "A"}}, {"name": "old", "function": "m:g"}]}
        >>> new = {"model": "b", "tools": [{"name": "lookup", "function": "m:f",
        ...     "inputs": {"order_id": {"expr": "flow_input.id"}}},
        ...     {"name": "refund", "function": "m:r"}]}
        >>> print(agent_diff(old, new))
        model: 'a' -> 'b'
        tool lookup: inputs.order_id: 'A' -> {expr: flow_input.id}
        - tool old
        + tool refund
    """
    brain_old = {key: item for key, item in old_value.items() if key != "tools"}
    brain_new = {key: item for key, item in new_value.items() if key != "tools"}
    lines = _changes(brain_old, brain_new, "")
    tools_old = _tools_by_name(old_value.get("tools"))
    tools_new = _tools_by_name(new_value.get("tools"))
    for name, tool in tools_old.items():
        if name in tools_new:
            lines.extend(_changes(tool, tools_new[name], f"tool {name}: "))
    lines.extend(f"- tool {name}" for name in tools_old if name not in tools_new)
    lines.extend(f"+ tool {name}" for name in tools_new if name not in tools_old)
    kept_old = [name for name in tools_old if name in tools_new]
    kept_new = [name for name in tools_new if name in tools_old]
    if kept_old != kept_new:
        lines.append(f"tools reordered: {', '.join(kept_old)} -> {', '.join(kept_new)}")
    return "\n".join(lines)


def _tools_by_name(tools: Any) -> dict[str, Mapping[str, Any]]:
    if not isinstance(tools, list):
        return {}
    found: dict[str, Mapping[str, Any]] = {}
    for index, tool in enumerate(tools):
        if isinstance(tool, Mapping):
            found[str(tool.get("name", f"#{index}"))] = tool
    return found
