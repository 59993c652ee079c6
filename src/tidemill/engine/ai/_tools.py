"""The tools of an `ai_agent` step: inline scripts and functions, run in the script pool.

Each tool's schema comes from its function's signature (parsed, never run
in the worker); the arguments a flow binds with `inputs` are left out of it,
so the model neither sees nor sets them. A call runs in the worker's script
pool with the idempotency key `<run id>:<step id>:<tool call id>`, the same
on every attempt of that call (after a crash, it runs again with it).

A bound input written as a `$var:`/`$res:` reference is resolved when a call
of its tool runs (`ToolSite.resolve`, as the run's identity), not when the
step starts: a tool the model never calls never reads it, and one whose
reference cannot be read gives the model an error result, not the step a
failure. The secrets it resolves are masked in what the call printed and in
the result the model sees.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tidemill.engine._step_env import Secrets, StepInfo, ToolRun, call_in_process
from tidemill.engine.scripts._pool import ScriptCall, ScriptPool
from tidemill.errors import ConfigurationError, ExpressionError, TidemillError
from tidemill.flows import AgentToolSpec, ToolScript, compile_expression
from tidemill.flows._signature import SignatureSchema, function_source, signature_schema
from tidemill.store import Store
from tidemill.tools import Tool, ToolContext, ToolReturn
from tidemill.workspace import has_references

__all__ = ["SpecTool", "ToolSite", "bind_inputs", "pool_tool", "tool_code", "tool_schema"]


def tool_code(spec: AgentToolSpec) -> str:
    """A `script` tool's Python: written inline, or read from the workspace when the run started.

    Raises:
        ConfigurationError: It names a workspace script that was not read
            (the flow was not run from a workspace).
    """
    code = spec.code
    if code is None:
        where = spec.script.path if isinstance(spec.script, ToolScript) else None
        raise ConfigurationError(
            f"Tool {spec.name!r} names the workspace script {where}, which was not read.",
            hint="Run the flow from the workspace (engine.submit_path, tidemill run "
            "f/<folder>/<flow>), which reads the scripts its tools name as the run's identity.",
            context={"tool": spec.name, "script": where},
        )
    return code


def tool_schema(spec: AgentToolSpec) -> tuple[dict[str, Any], str]:
    r"""A tool's JSON Schema as the model sees it (bound arguments left out), and its description.

    Raises:
        ConfigurationError: The source does not parse, lacks the function, or
            `inputs` binds an argument the function does not take.

    Examples:
        >>> spec = AgentToolSpec(name="refund", inputs={"currency": "EUR"},
        ...     script="def main(order: str, currency: str):\n    '''Refund.'''\n")
        >>> schema, description = tool_schema(spec)
        >>> schema["properties"], schema["required"], description
        ({'order': {'type': 'string'}}, ['order'], 'Refund.')
    """
    if spec.script is not None:
        found = signature_schema(tool_code(spec), where=f"the script of tool {spec.name!r}")
    else:
        found = _function_signature(spec)
    parameters = json.loads(json.dumps(found.parameters))
    properties: dict[str, Any] = parameters["properties"]
    for bound in spec.inputs:
        if bound not in properties and not parameters["additionalProperties"]:
            raise ConfigurationError(
                f"Tool {spec.name!r} binds {bound!r} in its inputs, "
                "but its function takes no such parameter.",
                hint=f"Its parameters are: {', '.join(found.names) or 'none'}.",
            )
        properties.pop(bound, None)
    required = [name for name in parameters.pop("required", []) if name not in spec.inputs]
    if required:
        parameters["required"] = required
    ordered = {
        "type": "object",
        "properties": properties,
        **({"required": required} if required else {}),
        "additionalProperties": parameters["additionalProperties"],
    }
    return ordered, spec.description or found.description


def _function_signature(spec: AgentToolSpec) -> SignatureSchema:
    """A `function` tool's signature; only an in-process one may take a `ToolContext`."""
    assert spec.function is not None
    source, name = function_source(spec.function)
    found = signature_schema(source, name, where=f"the module of tool {spec.name!r}", context=True)
    if found.context is not None and spec.run != "in_process":
        raise ConfigurationError(
            f"Tool {spec.name!r}: {spec.function} takes a ToolContext ({found.context!r}), "
            "which only a tool with `run: in_process` (called in the worker) is given.",
            hint="Add `run: in_process` to the tool, or drop the parameter.",
            context={"tool": spec.name, "function": spec.function},
        )
    return found


def bind_inputs(spec: AgentToolSpec, values: Mapping[str, Any]) -> dict[str, Any]:
    """The arguments a flow binds for a tool: static values, or `{expr: ...}` over `values`.

    `values` are the step's evaluated inputs and the run's values
    (`flow_input`, `results`, `previous_result`).

    Raises:
        ExpressionError: An expression failed.

    Examples:
        >>> spec = AgentToolSpec(name="t", script="def main(a, b): ...",
        ...                      inputs={"a": 1, "b": {"expr": "customer.id"}})
        >>> bind_inputs(spec, {"customer": {"id": "c7"}})
        {'a': 1, 'b': 'c7'}
    """
    bound: dict[str, Any] = {}
    for name, value in spec.inputs.items():
        if isinstance(value, dict) and set(value) == {"expr"} and isinstance(value["expr"], str):
            try:
                bound[name] = compile_expression(value["expr"]).evaluate(values)
            except ExpressionError as exc:
                raise ExpressionError(
                    exc.expression, f"tool {spec.name!r} input {name!r}: {exc.reason}"
                ) from None
        else:
            bound[name] = json.loads(json.dumps(value))
    return bound


@dataclass(slots=True)
class ToolSite:
    """Where an agent step's tools run, and what they leave behind.

    Attributes:
        run_id: The step's run.
        step_id: The step.
        attempt: The job's attempt (`TIDEMILL_ATTEMPT`).
        pool: The worker's script pool.
        timeout: Seconds one call may run; None waits (the step's bounds still apply).
        logs: What the calls printed, as `(stream, text)` pairs.
        on_call: Called with `(tool name, ok)` after each call (for metrics).
        scope: Where in a delegation the calls are made (`<call id>:<task id>`
            per level; empty for the step's own agent), part of their keys.
        store: The store, where tools that start child runs find them.
        resolve: Resolves a call's bound `$var:`/`$res:` inputs as the run's
            identity, when the call runs (None: they pass on as written).
        secrets: The job's secrets, which the resolved ones join.
        run: What an in-process tool asking for a `ToolContext` gets as its
            `deps` (None: such a tool gets None).
    """

    run_id: str
    step_id: str
    attempt: int
    pool: Callable[[], ScriptPool]
    timeout: float | None = None
    logs: list[tuple[str, str]] = field(default_factory=list)
    on_call: Callable[[str, bool], None] | None = None
    scope: str = ""
    store: Store | None = None
    resolve: Callable[[Any], Awaitable[tuple[Any, set[str]]]] | None = None
    secrets: Secrets | None = None
    run: ToolRun | None = None

    async def bound(self, bound: dict[str, Any]) -> dict[str, Any] | ToolReturn:
        """A call's bound inputs with their references resolved, or the error the model sees."""
        if self.resolve is None or not has_references(bound):
            return bound
        try:
            value, secrets = await self.resolve(bound)
        except TidemillError as exc:
            return ToolReturn(f"{type(exc).__name__}: {exc.message}", is_error=True)
        if self.secrets is not None:
            self.secrets.add(secrets)
        return dict(value)

    def mask(self, value: Any) -> Any:
        """`value` with the job's secrets masked (a resolved input the tool echoes)."""
        return value if self.secrets is None else self.secrets.mask_value(value)

    def key(self, call_id: str) -> str:
        """The idempotency key of one tool call: the same on every attempt of the call.

        Examples:
            >>> ToolSite("r1", "agent", 1, ScriptPool).key("call_9")
            'r1:agent:call_9'
            >>> ToolSite("r1", "agent", 1, ScriptPool, scope="c1:t1").key("call_9")
            'r1:agent:c1:t1:call_9'
        """
        scope = f"{self.scope}:" if self.scope else ""
        return f"{self.run_id}:{self.step_id}:{scope}{call_id}"

    def environment(self, context: ToolContext) -> dict[str, str]:
        """The variables a tool call sees besides the worker's."""
        return {
            "TIDEMILL_RUN_ID": self.run_id,
            "TIDEMILL_STEP_ID": self.step_id,
            "TIDEMILL_ATTEMPT": str(self.attempt),
            "TIDEMILL_IDEMPOTENCY_KEY": self.key(context.call_id),
            "TIDEMILL_TOOL_CALL_ID": context.call_id,
            "TIDEMILL_TOOL_ATTEMPT": str(context.attempt),
        }


class SpecTool(Tool):
    """A tool of an agent step built from its spec: its schema, its bound arguments, its site."""

    def __init__(
        self,
        spec: AgentToolSpec,
        parameters: dict[str, Any],
        description: str,
        bound: dict[str, Any],
        site: ToolSite,
    ) -> None:
        super().__init__(
            name=spec.name,
            description=description,
            parameters=parameters,
            requires_approval=spec.requires_approval,
        )
        self._spec = spec
        self._bound = bound
        self._site = site


class _PoolTool(SpecTool):
    """A tool whose calls run a script (or an importable function) in the pool."""

    async def acall(self, arguments: dict[str, Any], context: ToolContext) -> object:
        """Run the call in the pool; a failure is an error result the model sees."""
        spec, site = self._spec, self._site
        bound = await site.bound(self._bound)
        if isinstance(bound, ToolReturn):
            if site.on_call is not None:
                site.on_call(spec.name, False)
            return bound
        call = ScriptCall(
            code=None if spec.script is None else tool_code(spec),
            function=None if spec.script is not None else spec.function,
            args={**arguments, **bound},
            env=site.environment(context),
            timeout=site.timeout,
        )
        try:
            outcome = await site.pool().run(call)
        except Exception:
            if site.on_call is not None:
                site.on_call(spec.name, False)
            raise
        if site.on_call is not None:
            site.on_call(spec.name, outcome.ok)
        for stream, text in (("stdout", outcome.stdout), ("stderr", outcome.stderr)):
            if text:
                site.logs.append((stream, site.mask(f"[{spec.name} {context.call_id}] {text}")))
        if outcome.ok:
            return site.mask(outcome.result)
        error = outcome.error or {"type": "Error", "message": "the tool failed"}
        return ToolReturn(site.mask(f"{error['type']}: {error['message']}"), is_error=True)


class _InProcessTool(_PoolTool):
    """A `function` tool with `run: in_process`: called in the worker, no process hop.

    A function declaring a `ToolContext` parameter is given the call's
    context with the site's `ToolRun` as its `deps`.
    """

    context_parameter: str | None = None

    async def acall(self, arguments: dict[str, Any], context: ToolContext) -> object:
        """Call the function; its exception is an error result the model sees."""
        spec, site = self._spec, self._site
        assert spec.function is not None
        info = StepInfo(site.run_id, site.step_id, site.attempt, site.key(context.call_id))
        bound = await site.bound(self._bound)
        if isinstance(bound, ToolReturn):
            if site.on_call is not None:
                site.on_call(spec.name, False)
            return bound
        given: dict[str, Any] = {**arguments, **bound}
        if self.context_parameter is not None:
            given[self.context_parameter] = ToolContext(
                context.thread_id, context.call_id, context.tool_name,
                attempt=context.attempt, agent=context.agent, deps=site.run,
            )  # fmt: skip
        try:
            value = await call_in_process(spec.function, given, info, site.timeout)
        except Exception as exc:
            if site.on_call is not None:
                site.on_call(spec.name, False)
            return ToolReturn(site.mask(f"{type(exc).__name__}: {exc}"), is_error=True)
        if site.on_call is not None:
            site.on_call(spec.name, True)
        return site.mask(value)


def pool_tool(spec: AgentToolSpec, values: Mapping[str, Any], site: ToolSite) -> Tool:
    """The `Tool` for one `script` or `function` tool of an agent step.

    It runs its calls in the worker's script pool, or with `run: in_process`
    in the worker itself.

    Raises:
        ConfigurationError: See `tool_schema`.
        ExpressionError: See `bind_inputs`.
    """
    parameters, description = tool_schema(spec)
    bound = bind_inputs(spec, values)
    if spec.run != "in_process":
        return _PoolTool(spec, parameters, description, bound, site)
    made = _InProcessTool(spec, parameters, description, bound, site)
    made.context_parameter = _function_signature(spec).context
    return made
