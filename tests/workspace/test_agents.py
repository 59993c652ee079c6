"""Reusable agents: the `ai_agent` resource, saving, unlinking, overlays, diffs and the closure."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tidemill.flows import AgentToolSpec, AIAgent
from tidemill.workspace import (
    AsyncWorkspace,
    InvalidValue,
    Keyring,
    MasterKey,
    agent_definition,
    agent_diff,
    builtin_type,
    closure,
    linked_agent,
    overlay_tool_inputs,
    save_as_agent,
    select_tools,
    unlink,
)
from tidemill.workspace._agents import FLOW_LOCAL_KEYS
from tidemill.workspace._sync import pull, push

TRIAGE: dict[str, Any] = {
    "model": "fake",
    "provider": "$res:f/ai/openai",
    "system": "You triage tickets.",
    "tools": [
        {
            "name": "lookup_order",
            "script": "def main(order_id: str, region: str): ...",
            "inputs": {"region": "eu", "order_id": {"expr": "flow_input.order"}},
        },
        {"name": "refund", "flow": "f/support/refund", "requires_approval": True},
        {"name": "notes", "function": "m:f"},
    ],
}


@pytest.fixture
async def ws(store_url: str) -> AsyncIterator[AsyncWorkspace]:
    workspace = AsyncWorkspace(
        store_url, user="ada", keyring=Keyring(MasterKey.generate()), migrate=True
    )
    try:
        await workspace.add_folder("support")
        # The flow TRIAGE's `refund` tool names: an agent's tool flows must exist.
        await workspace.write(
            "f/support/refund", "flow", {"steps": [{"id": "pay", "identity": {}}]}
        )
        yield workspace
    finally:
        await workspace.close()


# --- the resource -----------------------------------------------------------------------------


async def test_an_agent_round_trips_exactly_as_written(ws: AsyncWorkspace) -> None:
    await ws.write("f/support/triage", "resource", TRIAGE, resource_type="ai_agent")
    item = await ws.get("f/support/triage")
    assert item.value == TRIAGE and item.resource_type == "ai_agent"
    assert "order_id" not in TRIAGE["tools"][2].get("inputs", {})


async def test_an_invalid_agent_is_refused_with_its_problems(ws: AsyncWorkspace) -> None:
    bad = {"model": "fake", "tools": [{"name": "x"}], "max_iterations": 0}
    with pytest.raises(InvalidValue) as caught:
        await ws.write("f/support/bad", "resource", bad, resource_type="ai_agent")
    problems = caught.value.problems
    assert any(p.startswith("at max_iterations:") for p in problems), problems
    assert any(p.startswith("at tools:") and "exactly one of" in p for p in problems), problems
    with pytest.raises(InvalidValue, match="tool_inputs belongs to a step"):
        await ws.write(
            "f/support/bad", "resource", {"model": "m", "tool_inputs": {}}, resource_type="ai_agent"
        )
    with pytest.raises(InvalidValue, match="needs a model"):
        await ws.write("f/support/bad", "resource", {"system": "x"}, resource_type="ai_agent")


def test_agent_definition_renders_nested_fields() -> None:
    with pytest.raises(InvalidValue) as caught:
        agent_definition({"model": "m", "tools": [{"name": "a", "function": "m:f", "run": "x"}]})
    assert caught.value.problems[0].startswith("at tools[0].run:")
    with pytest.raises(InvalidValue, match="a mapping"):
        agent_definition(["no"])


def test_the_type_lists_every_key_of_an_inline_step_but_the_flow_local_ones() -> None:
    kind = builtin_type("ai_agent")
    assert kind is not None
    expected = set(AIAgent.model_fields) - set(FLOW_LOCAL_KEYS)
    assert set(kind.schema["properties"]) == expected


async def test_an_agent_file_is_pushed_and_pulled(ws: AsyncWorkspace, tmp_path: Path) -> None:
    root = tmp_path / "tree"
    (root / "f/support").mkdir(parents=True)
    (root / "f/support/triage.agent.yaml").write_text(
        "summary: Triage\nmodel: fake\nsystem: Be brief.\ntools:\n"
        "  - name: lookup\n    function: m:f\n    inputs: {region: eu, id: {expr: flow_input.id}}\n"
    )
    await push(ws, root)
    item = await ws.get("f/support/triage")
    assert (item.kind, item.resource_type, item.summary) == ("resource", "ai_agent", "Triage")
    assert item.value["tools"][0]["inputs"] == {"region": "eu", "id": {"expr": "flow_input.id"}}
    out = tmp_path / "out"
    await pull(ws, out)
    assert "inputs:" in (out / "f/support/triage.agent.yaml").read_text()
    (root / "f/support/triage.agent.yaml").write_text("model: fake\nbogus: 1\n")
    with pytest.raises(InvalidValue, match="bogus"):
        await push(ws, root)


# --- save, unlink, overlay, select -------------------------------------------------------------


def test_save_as_agent_drops_flow_expressions_and_keeps_the_rest() -> None:
    step = AIAgent.model_validate({**TRIAGE, "enabled_tools": ["notes"]})
    value = save_as_agent(step)
    assert value["tools"][0]["inputs"] == {"region": "eu"}
    assert "enabled_tools" not in value and value["system"] == TRIAGE["system"]
    agent_definition(value)
    kept = save_as_agent(
        {
            "model": "m",
            "tools": [
                {
                    "name": "t",
                    "function": "m:f",
                    "inputs": {"a": {"expr": "1 + 1"}, "b": {"expr": "results.x"}},
                }
            ],
        }
    )
    assert kept["tools"][0]["inputs"] == {"a": {"expr": "1 + 1"}}
    with pytest.raises(InvalidValue, match="unlink it first"):
        save_as_agent(AIAgent(agent="f/support/triage"))


def test_unlink_overlays_tool_inputs_and_filters_tools() -> None:
    inline = unlink(
        TRIAGE,
        tool_inputs={"lookup_order": {"region": "us"}},
        enabled_tools=["lookup_order", "notes"],
    )
    assert [tool["name"] for tool in inline["tools"]] == ["lookup_order", "notes"]
    assert inline["tools"][0]["inputs"] == {
        "region": "us",
        "order_id": {"expr": "flow_input.order"},
    }
    assert TRIAGE["tools"][0]["inputs"]["region"] == "eu"
    AIAgent.model_validate(inline)
    assert unlink(TRIAGE, tool_inputs={}, enabled_tools=[])["tools"] == []


def test_unlink_prunes_specialists_and_delegation() -> None:
    value = {
        "model": "fake",
        "tools": [{"name": "a", "function": "m:a"}, {"name": "b", "function": "m:b"}],
        "specialists": [{"name": "s", "tools": ["a", "b"]}],
        "delegation": {"allow": ["a", "b"]},
    }
    inline = unlink(value, tool_inputs={}, enabled_tools=["b"])
    assert inline["specialists"][0]["tools"] == ["b"] and inline["delegation"]["allow"] == ["b"]
    AIAgent.model_validate(inline)


def test_a_name_the_agent_does_not_have_names_its_tools() -> None:
    with pytest.raises(InvalidValue, match="its tools: lookup_order, refund, notes"):
        select_tools(TRIAGE["tools"], ["nope"], agent_path="f/support/triage")
    with pytest.raises(InvalidValue, match="tool_inputs names 'nope'"):
        overlay_tool_inputs(TRIAGE["tools"], {"nope": {}}, agent_path="f/support/triage")
    with pytest.raises(InvalidValue, match="mcp tool"):
        overlay_tool_inputs([{"name": "m", "mcp": {"url": "http://x"}}], {"m": {"a": 1}})


def test_overlay_and_select_take_tool_specs_too() -> None:
    tools = AIAgent.model_validate(TRIAGE).tools
    overlaid = overlay_tool_inputs(tools, {"notes": {"topic": "x"}})
    assert isinstance(overlaid[2], AgentToolSpec) and overlaid[2].inputs == {"topic": "x"}
    assert [t.name for t in select_tools(overlaid, ["refund"], agent_path="f/x/y")] == ["refund"]
    assert len(select_tools(tools, None, agent_path="f/x/y")) == 3


def test_linked_agent_resolves_a_step_over_the_resource() -> None:
    step = AIAgent(
        agent="f/support/triage",
        enabled_tools=["lookup_order"],
        tool_inputs={"lookup_order": {"region": "us"}},
        metadata={"experiment_id": "e1"},
    )
    agent = linked_agent(step, TRIAGE)
    assert [tool.name for tool in agent.tools] == ["lookup_order"]
    assert agent.tools[0].inputs["region"] == "us" and agent.metadata == {"experiment_id": "e1"}
    assert agent.agent is None and agent.model == "fake"


# --- diff and closure --------------------------------------------------------------------------


def test_agent_diff_shows_the_brain_then_each_tool() -> None:
    new = {
        **TRIAGE,
        "system": "You triage.",
        "temperature": 0.2,
        "tools": [
            {
                **TRIAGE["tools"][0],
                "inputs": {
                    "region": {"expr": "flow_input.region"},
                    "order_id": {"expr": "flow_input.order"},
                },
            },
            {"name": "escalate", "function": "m:e"},
            TRIAGE["tools"][2],
        ],
    }
    text = agent_diff(TRIAGE, new)
    assert text.splitlines() == [
        "system: 'You triage tickets.' -> 'You triage.'",
        "+ temperature: 0.2",
        "tool lookup_order: inputs.region: 'eu' -> {expr: flow_input.region}",
        "- tool refund",
        "+ tool escalate",
    ]
    assert agent_diff(TRIAGE, TRIAGE) == ""


def test_the_closure_follows_agents_flows_scripts_and_references() -> None:
    items: dict[str, Any] = {
        "f/support/triage": TRIAGE,
        "f/ai/openai": {"api_key": "$var:f/ai/key"},
        "f/support/refund": {
            "steps": [
                {"id": "pay", "script": {"path": "f/support/pay"}},
                {
                    "id": "ask",
                    "ai_agent": {
                        "model": "fake",
                        "tools": [{"name": "h", "agent": {"agent": "f/support/helper@2"}}],
                    },
                },
            ]
        },
        "f/support/helper": {"model": "fake", "api_key": "$var:f/ai/other"},
        "f/support/pay": "def main(): ...",
    }
    flow = {
        "steps": [
            {"id": "t", "ai_agent": {"agent": "f/support/triage@3"}},
            {
                "id": "b",
                "branch": {
                    "branches": [
                        {
                            "when": "true",
                            "steps": [{"id": "c", "flow": {"path": "f/support/child"}}],
                        }
                    ]
                },
            },
            {"id": "s", "inputs": {"token": "$var:f/ai/token"}, "script": {"code": "x"}},
        ]
    }
    assert closure(items.get, flow) == {
        "f/support/triage",
        "f/ai/openai",
        "f/ai/key",
        "f/support/refund",
        "f/support/pay",
        "f/support/helper",
        "f/ai/other",
        "f/support/child",
        "f/ai/token",
    }
