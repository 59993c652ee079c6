"""`flow`, `agent` and `run: child` tools of an `ai_agent` step: each call runs as a child run.

The model calls the tool; the tool looks for the child run its call started
(its id derived from the call's idempotency key). Finished, its result is
the call's result (a failure is an error result the model sees). Not there
yet, or still running, the tool suspends the agent (`ToolSuspended`, with a
`ChildRequest`): the step parks until the child ends, then runs the call
again and finds it finished. A crash anywhere in between changes nothing:
the next attempt derives the same id and finds the same child.

- A `flow` tool's arguments are the sub-flow's `inputs` schema, less what
  the flow binds; the child's `flow_input` is the arguments and bindings.
- An `agent` tool takes a `message`; the child runs a one-step flow whose
  `ai_agent` step is the nested agent, with `user_message` the message and
  the bindings as further step inputs (`memory_id`, say).
- A `script` or `function` tool with `run: child` has its pool schema; the
  child runs a one-step flow whose `script` step is the tool's code.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from tidemill.engine.ai._child_runs import ChildRequest, child_run_id
from tidemill.engine.ai._tools import SpecTool, ToolSite, bind_inputs, tool_code, tool_schema
from tidemill.errors import ConfigurationError, FlowInputError, ToolSuspended
from tidemill.flows import AgentToolSpec, Flow
from tidemill.store import FINISHED_RUN, RunRow, Tx
from tidemill.tools import Tool, ToolContext, ToolReturn

__all__ = ["agent_flow", "child_tool", "child_tool_schema", "script_flow"]

_MESSAGE: dict[str, Any] = {
    "type": "object",
    "properties": {"message": {"type": "string", "description": "The task, in full."}},
    "required": ["message"],
    "additionalProperties": False,
}


def agent_flow(spec: AgentToolSpec) -> Flow:
    """The one-step flow a call of an `agent` tool runs.

    Examples:
        >>> spec = AgentToolSpec(name="researcher", agent={"model": "fake"},
        ...                      inputs={"memory_id": "team"})
        >>> flow = agent_flow(spec)
        >>> step = flow.steps[0]
        >>> step.id, step.kind, sorted(step.inputs)
        ('researcher', 'ai_agent', ['memory_id', 'user_message'])
    """
    assert spec.agent is not None
    inputs: dict[str, Any] = {"user_message": {"expr": "flow_input.message"}}
    inputs.update({name: {"expr": f"flow_input.{name}"} for name in spec.inputs})
    return Flow.model_validate(
        {
            "name": spec.name,
            "summary": spec.description,
            "inputs": {
                **_MESSAGE,
                "properties": {**_MESSAGE["properties"], **{name: {} for name in spec.inputs}},
            },
            "steps": [
                {
                    "id": spec.name,
                    "ai_agent": spec.agent.model_dump(mode="json", exclude_defaults=True),
                    "inputs": inputs,
                }
            ],
        }
    )


def script_flow(spec: AgentToolSpec, names: Iterable[str]) -> Flow:
    """The one-step flow a call of a `script` or `function` tool with `run: child` runs.

    Its step passes the call's arguments `names` (and the bound inputs) from
    `flow_input` to `main`; the flow is the same for every call with the same names.

    Examples:
        >>> spec = AgentToolSpec(name="lookup", run="child", script="def main(q): return q")
        >>> step = script_flow(spec, ["q"]).steps[0]
        >>> step.id, step.kind, step.inputs["q"].expr
        ('lookup', 'script', 'flow_input["q"]')
    """
    kind = {"code": tool_code(spec)} if spec.script is not None else {"function": spec.function}
    inputs = {name: {"expr": f"flow_input[{json.dumps(name)}]"} for name in sorted(names)}
    return Flow.model_validate(
        {"name": spec.name, "steps": [{"id": spec.name, "script": kind, "inputs": inputs}]}
    )


def _sub_flow(spec: AgentToolSpec) -> Flow:
    assert spec.flow is not None
    if spec.flow.flow is None:
        raise ConfigurationError(
            f"Tool {spec.name!r} names the flow file {spec.flow.path!r}, which was not read.",
            hint="Load the flow with Flow.load(path) (or `tidemill run FILE`), which reads "
            "the files a flow names.",
        )
    return spec.flow.flow


def child_tool_schema(spec: AgentToolSpec) -> tuple[dict[str, Any], str]:
    """A `flow` or `agent` tool's JSON Schema as the model sees it, and its description.

    Raises:
        ConfigurationError: A sub-flow file was not read, or `inputs` binds an
            argument the sub-flow's schema does not have.

    Examples:
        >>> spec = AgentToolSpec(name="refund", flow={"flow": {
        ...     "summary": "Refund an order.",
        ...     "inputs": {"type": "object", "properties": {
        ...         "order": {"type": "string"}, "currency": {"type": "string"}},
        ...         "required": ["order", "currency"]},
        ...     "steps": [{"id": "pay", "identity": {}}]}}, inputs={"currency": "EUR"})
        >>> schema, description = child_tool_schema(spec)
        >>> schema["properties"], schema["required"], description
        ({'order': {'type': 'string'}}, ['order'], 'Refund an order.')
    """
    if spec.agent is not None:
        return dict(_MESSAGE), spec.description or f"Ask the agent {spec.name} to do a task."
    if spec.flow is None:
        return tool_schema(spec)
    flow = _sub_flow(spec)
    schema: dict[str, Any] = json.loads(json.dumps(flow.inputs))
    schema.setdefault("type", "object")
    properties: dict[str, Any] = schema.setdefault("properties", {})
    for bound in spec.inputs:
        if bound not in properties and schema.get("additionalProperties") is False:
            raise ConfigurationError(
                f"Tool {spec.name!r} binds {bound!r} in its inputs, but its flow's input "
                "schema has no such property.",
                hint=f"Its properties are: {', '.join(properties) or 'none'}.",
            )
        properties.pop(bound, None)
    required = [name for name in schema.pop("required", []) if name not in spec.inputs]
    if required:
        schema["required"] = required
    description = spec.description or flow.summary or f"Run the flow {flow.name or spec.name}."
    return schema, description


class _ChildTool(SpecTool):
    """A tool whose every call is a child run, found again by its derived id."""

    async def acall(self, arguments: dict[str, Any], context: ToolContext) -> object:
        """The child's result when it finished; else suspend the agent until it does."""
        run_id = child_run_id(self._site.key(context.call_id))

        def read(tx: Tx) -> tuple[RunRow, Any] | None:
            return tx.run_and_payload(run_id, "result")

        store = self._site.store
        assert store is not None  # `child_tool` checks it
        found = await store.transact(read)
        if found is not None and found[0].status in FINISHED_RUN:
            return _result(found[0], found[1])
        if self._site.on_call is not None and found is None:
            self._site.on_call(self._spec.name, True)
        flow_input = {**arguments, **self._bound}
        spec = self._spec
        if spec.agent is not None:
            flow = agent_flow(spec)
        elif spec.flow is not None:
            flow = _sub_flow(spec)
        else:
            flow = script_flow(spec, flow_input)
        if found is None:
            try:
                flow.validate_input(flow_input)
            except FlowInputError as exc:
                return ToolReturn(f"FlowInputError: {exc.message}", is_error=True)
        request = ChildRequest(
            run_id, self._spec.name, context.call_id, flow, flow.digest(),
            flow.model_dump_json(), flow_input,
        )  # fmt: skip
        raise ToolSuspended(
            f"The call {context.call_id} of {self._spec.name} runs as child run {run_id}.",
            reason=request,
        )


def _result(run: RunRow, value: Any) -> object:
    """A finished child run as the call's result: its value, or an error the model sees."""
    if run.status == "succeeded":
        return value
    if run.status == "cancelled":
        return ToolReturn(f"The child run {run.id} was cancelled.", is_error=True)
    error = run.error or {}
    where = f" (step {error['step']})" if error.get("step") else ""
    text = f"{error.get('type', 'Error')}{where}: {error.get('message', 'the child run failed')}"
    return ToolReturn(text, is_error=True)


def child_tool(spec: AgentToolSpec, values: Mapping[str, Any], site: ToolSite) -> Tool:
    """The `Tool` for a `flow`, `agent` or `run: child` tool of an agent step.

    Raises:
        ConfigurationError: See `child_tool_schema`; or `site` has no store.
        ExpressionError: An input binding failed (see `bind_inputs`).
    """
    if site.store is None:
        raise ConfigurationError(f"Tool {spec.name!r} starts child runs: its site needs a store.")
    parameters, description = child_tool_schema(spec)
    bound = bind_inputs(spec, values)
    return _ChildTool(spec, parameters, description, bound, site)
