"""An agent's drafts and versions: deployed with the flow that links it, diffed tool by tool."""

from __future__ import annotations

import pytest

from tidemill.errors import ItemNotFound
from tidemill.workspace import AsyncWorkspace, Keyring, MasterKey

AGENT = {
    "model": "fake",
    "system": "You answer tickets.",
    "tools": [{"name": "lookup", "script": "def main(order_id: str):\n    return order_id\n"}],
}
FLOW = {
    "steps": [
        {"id": "answer", "ai_agent": {"agent": "f/ops/responder"}, "inputs": {"user_message": "hi"}}
    ]
}


async def test_deploying_a_flow_with_its_linked_agents_drafts(store_url: str) -> None:
    ws = AsyncWorkspace(store_url, user="ada", keyring=Keyring(MasterKey.generate()), migrate=True)
    try:
        await ws.add_folder("ops")
        await ws.write("f/ops/responder", "resource", AGENT, resource_type="ai_agent")
        await ws.write("f/ops/other", "resource", AGENT, resource_type="ai_agent")
        await ws.write("f/ops/answer", "flow", FLOW)
        changed = {**AGENT, "system": "You answer tickets kindly."}
        await ws.save_draft("f/ops/responder", "resource", changed, resource_type="ai_agent")
        await ws.save_draft("f/ops/other", "resource", changed, resource_type="ai_agent")
        await ws.save_draft("f/ops/answer", "flow", {**FLOW, "summary": "Answer"})
        # Only the agent the flow links is offered; the other agent's draft is not.
        assert await ws.linked_drafts("f/ops/answer") == ["f/ops/responder"]
        with pytest.raises(ItemNotFound):
            await ws.deploy("f/ops/answer", agents=["f/ops/other"])
        assert (await ws.get("f/ops/answer")).version == 1  # the refused deploy changed nothing

        await ws.deploy("f/ops/answer", message="kinder", agents=["f/ops/responder"])
        responder = await ws.get("f/ops/responder")
        assert responder.version == 2 and responder.value["system"] == "You answer tickets kindly."
        assert [d.path for d in await ws.drafts()] == ["f/ops/other"]  # left out: kept
        assert (await ws.history("f/ops/responder"))[0].message == "kinder"
    finally:
        await ws.close()


async def test_two_versions_of_an_agent_diff_key_by_key_and_tool_by_tool(store_url: str) -> None:
    ws = AsyncWorkspace(store_url, user="ada", keyring=Keyring(MasterKey.generate()), migrate=True)
    try:
        await ws.add_folder("ops")
        await ws.write("f/ops/responder", "resource", AGENT, resource_type="ai_agent")
        newer = {
            **AGENT,
            "system": "You answer tickets kindly.",
            "tools": [
                {**AGENT["tools"][0], "inputs": {"order_id": "A-1"}},
                {"name": "refund", "script": "def main():\n    return 1\n"},
            ],
        }
        await ws.write("f/ops/responder", "resource", newer, resource_type="ai_agent")
        text = await ws.diff("f/ops/responder", 1, 2)
        assert text.startswith("--- f/ops/responder@1\n+++ f/ops/responder@2\n")
        assert "system: 'You answer tickets.' -> 'You answer tickets kindly.'" in text
        assert "+ tool refund" in text
        assert "tool lookup:" in text and "A-1" in text
        assert await ws.diff("f/ops/responder", 2, 2) == ""
    finally:
        await ws.close()


async def test_a_flow_linking_an_agent_is_checked_against_it_when_written(store_url: str) -> None:
    from tidemill.workspace import InvalidValue

    ws = AsyncWorkspace(store_url, user="ada", keyring=Keyring(MasterKey.generate()), migrate=True)
    try:
        await ws.add_folder("ops")
        with pytest.raises(InvalidValue) as missing:
            await ws.write("f/ops/answer", "flow", FLOW)
        assert "links f/ops/responder, which names no ai_agent resource" in str(missing.value)
        await ws.write("f/ops/responder", "resource", AGENT, resource_type="ai_agent")
        await ws.write("f/ops/answer", "flow", FLOW)  # now it is there
        narrowed = {"agent": "f/ops/responder", "enabled_tools": ["lookup", "refund"]}
        bad = {"steps": [{**FLOW["steps"][0], "ai_agent": narrowed}]}
        with pytest.raises(InvalidValue) as unknown:
            await ws.write("f/ops/answer", "flow", bad)
        assert "'refund', which the agent f/ops/responder does not have; its tools: lookup" in (
            str(unknown.value)
        )
        pinned = {"steps": [{**FLOW["steps"][0], "ai_agent": {"agent": "f/ops/responder@2"}}]}
        with pytest.raises(InvalidValue):
            await ws.write("f/ops/answer", "flow", pinned)  # there is no version 2
        assert (await ws.get("f/ops/answer")).version == 1
    finally:
        await ws.close()
