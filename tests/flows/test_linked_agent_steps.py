"""Linked `ai_agent` steps: `agent`, `tool_inputs`, `enabled_tools`, and what they may not write."""

from __future__ import annotations

from typing import Any

import pytest

from tidemill.errors import FlowValidationError
from tidemill.flows import AIAgent, Flow
from tidemill.flows._nesting import LINKED_STEP_KEYS

LOOKUP = {"name": "lookup", "script": "def main(order_id): ...", "inputs": {"order_id": "A"}}


def _flow(agent: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": "support",
        "steps": [{"id": "triage", "inputs": {"user_message": "hi"}, "ai_agent": agent}],
    }


def _problems(agent: dict[str, Any]) -> list[str]:
    with pytest.raises(FlowValidationError) as caught:
        Flow.from_dict(_flow(agent))
    return [str(problem) for problem in caught.value.problems]


def test_a_linked_step_needs_no_model() -> None:
    step = AIAgent(agent="f/support/triage")
    assert (step.linked, step.agent_path, step.agent_version, step.model) == (
        True,
        "f/support/triage",
        None,
        "",
    )
    assert step.model_problems() == []


def test_a_pinned_agent_gives_its_version() -> None:
    step = AIAgent(agent="f/support/triage@7")
    assert (step.agent_path, step.agent_version) == ("f/support/triage", 7)


@pytest.mark.parametrize(
    "agent",
    ["triage", "f/support", "f/support/triage@0", "f/support/triage@x", "x/a/b", "f/Sup/t", ""],
)
def test_a_bad_agent_reference_is_refused(agent: str) -> None:
    (problem,) = _problems({"agent": agent})
    assert "ai_agent.agent" in problem and "workspace path of an ai_agent resource" in problem


def test_a_linked_step_writing_brain_or_tool_keys_names_them() -> None:
    (problem,) = _problems(
        {"agent": "f/support/triage", "model": "fake", "system": "x", "tools": [LOOKUP]}
    )
    assert "model, system, tools live in the agent resource f/support/triage" in problem


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("temperature", 0.2),
        ("max_iterations", 3),
        ("memory", {"turns": 5}),
        ("output_schema", {"type": "object"}),
        ("limits", {"max_tool_calls": 3}),
        ("provider", "$res:f/ai/openai"),
        ("approval_timeout", "1h"),
    ],
)
def test_each_brain_key_is_refused_on_a_linked_step(key: str, value: Any) -> None:
    (problem,) = _problems({"agent": "f/support/triage", key: value})
    assert f"{key} live in the agent resource" in problem


def test_a_linked_step_keeps_its_flow_local_keys() -> None:
    flow = Flow.from_dict(
        _flow(
            {
                "agent": "f/support/triage",
                "tool_inputs": {"lookup": {"order_id": {"expr": "flow_input.order"}}},
                "enabled_tools": ["lookup"],
                "metadata": {"experiment_id": "e1"},
            }
        )
    )
    step = flow.steps[0].ai_agent
    assert step is not None and step.tool_inputs["lookup"]["order_id"] == {
        "expr": "flow_input.order"
    }
    assert "ai_agent.tool_inputs.lookup.order_id" in flow.steps[0].expressions_by_field()
    assert {"agent", "tool_inputs", "enabled_tools", "metadata"} == LINKED_STEP_KEYS


def test_a_tool_inputs_expression_is_checked() -> None:
    problems = _problems(
        {"agent": "f/support/triage", "tool_inputs": {"t": {"a": {"expr": "1 +"}}}}
    )
    assert any("tool_inputs" in problem for problem in problems)


def test_tool_inputs_needs_agent() -> None:
    (problem,) = _problems({"model": "fake", "tool_inputs": {"lookup": {"order_id": "B"}}})
    assert "ai_agent.tool_inputs" in problem and "needs `agent`" in problem


def test_an_inline_step_needs_a_model() -> None:
    (problem,) = _problems({"system": "Be brief."})
    assert "an inline ai_agent step needs a model" in problem


def test_inline_enabled_tools_must_name_the_steps_tools() -> None:
    (problem,) = _problems({"model": "fake", "tools": [LOOKUP], "enabled_tools": ["refund"]})
    assert "'refund'" in problem and "its tools: lookup" in problem


@pytest.mark.parametrize("enabled", [None, [], ["lookup"]])
def test_inline_enabled_tools_absent_empty_or_named(enabled: list[str] | None) -> None:
    agent: dict[str, Any] = {"model": "fake", "tools": [LOOKUP]}
    if enabled is not None:
        agent["enabled_tools"] = enabled
    step = Flow.from_dict(_flow(agent)).steps[0].ai_agent
    assert step is not None and step.enabled_tools == enabled


def test_a_nested_agent_tool_may_link_an_agent() -> None:
    agent = {"model": "fake", "tools": [{"name": "helper", "agent": {"agent": "f/ai/helper@2"}}]}
    step = Flow.from_dict(_flow(agent)).steps[0].ai_agent
    assert step is not None and step.tools[0].agent is not None
    assert step.tools[0].agent.agent_version == 2


def test_the_json_schema_accepts_a_linked_step() -> None:
    import jsonschema

    validator = jsonschema.Draft202012Validator(Flow.json_schema())
    document = _flow({"agent": "f/support/triage", "enabled_tools": []})
    assert [error.message for error in validator.iter_errors(document)] == []


def test_a_linked_step_reads_back_from_its_stored_form() -> None:
    """The engine stores definitions with every field written; a worker reads them back."""
    from tidemill.flows import Flow

    flow = Flow.from_dict(
        {
            "steps": [
                {
                    "id": "a",
                    "ai_agent": {"agent": "f/x/y@2", "enabled_tools": ["t"]},
                    "inputs": {"user_message": "hi"},
                }
            ]
        }
    )
    again = Flow.model_validate_json(flow.model_dump_json())
    assert again.digest() == flow.digest()
    step = again.find("a").ai_agent
    assert step is not None and step.agent == "f/x/y@2" and step.enabled_tools == ["t"]
