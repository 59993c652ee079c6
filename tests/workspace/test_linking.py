"""Saving an inline ai_agent step as an agent, and unlinking a linked step back inline."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from tests.workspace.conftest import Team

from tidemill.errors import PermissionDenied, WorkspaceError
from tidemill.workspace import InvalidValue

INLINE: dict[str, Any] = {
    "model": "fake",
    "system": "You triage tickets.",
    "tools": [
        {
            "name": "lookup_order",
            "script": "def main(order_id: str, region: str): ...",
            "inputs": {"region": "eu", "order_id": {"expr": "flow_input.order"}},
        },
    ],
}

FLOW: dict[str, Any] = {
    "summary": "Triage",
    "steps": [
        {"id": "hello", "identity": {}, "inputs": {"x": 1}},
        {
            "id": "triage",
            "ai_agent": INLINE,
            "inputs": {"user_message": {"expr": "flow_input.text"}},
        },
    ],
}


async def test_save_then_unlink_round_trips(team: Team) -> None:
    ada = team.ada
    await ada.write("f/team/triage", "flow", copy.deepcopy(FLOW))
    agent = await ada.save_step_as_agent("f/team/triage", "triage", "f/team/agent", message="m")
    assert agent.resource_type == "ai_agent" and agent.version == 1
    assert agent.value["tools"][0]["inputs"] == {"region": "eu"}
    flow = await ada.get("f/team/triage")
    assert flow.version == 2
    step = flow.value["steps"][1]
    assert step["ai_agent"] == {
        "agent": "f/team/agent",
        "tool_inputs": {"lookup_order": {"order_id": {"expr": "flow_input.order"}}},
    }
    assert step["inputs"] == FLOW["steps"][1]["inputs"]
    plan = await ada.run_plan("f/team/triage")
    assert plan.flow.steps[1].ai_agent is not None
    with pytest.raises(InvalidValue, match="already links"):
        await ada.save_step_as_agent("f/team/triage", "triage", "f/team/other")
    unlinked = await ada.unlink_step("f/team/triage", "triage")
    assert unlinked.version == 3
    again = unlinked.value["steps"][1]
    assert again["ai_agent"] == INLINE
    assert again["inputs"] == FLOW["steps"][1]["inputs"]
    with pytest.raises(InvalidValue, match="inline"):
        await ada.unlink_step("f/team/triage", "triage")


async def test_as_a_draft(team: Team) -> None:
    ada = team.ada
    await ada.write("f/team/triage", "flow", copy.deepcopy(FLOW))
    await ada.save_step_as_agent("f/team/triage", "triage", "f/team/agent", draft=True)
    assert (await ada.get("f/team/triage")).version == 1
    draft = await ada.draft("f/team/triage")
    assert draft.value["steps"][1]["ai_agent"]["agent"] == "f/team/agent"
    await ada.unlink_step("f/team/triage", "triage", draft=True)
    assert (await ada.draft("f/team/triage")).value["steps"][1]["ai_agent"] == INLINE


async def test_refusals(team: Team) -> None:
    ada = team.ada
    await ada.write("f/team/triage", "flow", copy.deepcopy(FLOW))
    with pytest.raises(InvalidValue, match="no step 'nope'"):
        await ada.save_step_as_agent("f/team/triage", "nope", "f/team/agent")
    with pytest.raises(InvalidValue, match="not an ai_agent step"):
        await ada.save_step_as_agent("f/team/triage", "hello", "f/team/agent")
    with pytest.raises(PermissionDenied):
        await team.vic.save_step_as_agent("f/team/triage", "triage", "f/team/agent")
    with pytest.raises(WorkspaceError):
        await ada.get("f/team/agent")
    assert (await ada.get("f/team/triage")).version == 1
