"""Exporting one flow with what it needs elsewhere: its dependency closure, as files."""

from __future__ import annotations

from pathlib import Path

import pytest

from tidemill.errors import ItemNotFound
from tidemill.workspace import AsyncWorkspace, Keyring, MasterKey
from tidemill.workspace._sync import pull, push

EXAMPLE = Path(__file__).parents[2] / "examples" / "workspace"


async def test_a_flow_exports_with_its_closure_and_pushes_into_another_workspace(
    store_url: str, tmp_path: Path
) -> None:
    keyring = Keyring(MasterKey.generate())
    ws = AsyncWorkspace(store_url, user="ada", keyring=keyring, migrate=True)
    other = AsyncWorkspace(store_url, workspace="other", user="ada", keyring=keyring)
    try:
        await push(ws, EXAMPLE, message="the demo")
        await ws.add_folder("ops")
        await ws.write("f/ops/unrelated", "variable", "not needed")
        await ws.write("f/support/notes", "variable", "not needed either")
        report = await pull(ws, tmp_path / "export", flow="f/support/triage")
        assert set(report.files) == {
            "f/ai/folder.meta.yaml",
            "f/ai/llm.resource.yaml",
            "f/support/folder.meta.yaml",
            "f/support/format_reply.py",
            "f/support/pay_refund.py",
            "f/support/refund.flow.yaml",
            "f/support/responder.agent.yaml",
            "f/support/triage.flow.yaml",
        }
        plan = await push(other, tmp_path / "export", message="imported")
        assert plan.applied and plan.counts()["create"] == 8
        assert (await other.run_plan("f/support/triage")).source["items"] == {
            "f/support/format_reply": 1
        }
        agent = (await other.get("f/support/responder")).value
        inlined = await other.inline_agent(agent)  # its refund tool's flow is there too
        refund = next(tool for tool in inlined["tools"] if tool["name"] == "issue_refund")
        assert refund["flow"]["source_path"] == "f/support/refund@1"
    finally:
        await ws.close()
        await other.close()


async def test_an_export_needing_what_the_caller_may_not_read_writes_nothing(
    store_url: str, tmp_path: Path
) -> None:
    ws = AsyncWorkspace(store_url, user="ada", keyring=Keyring(MasterKey.generate()), migrate=True)
    try:
        await push(ws, EXAMPLE)
        await ws.add_user("bob")
        await ws.grant("f/support", "bob", "viewer")  # not f/ai, where the provider lives
        bob = await ws.acting_as("bob")
        with pytest.raises(ItemNotFound) as refused:
            await pull(bob, tmp_path / "export", flow="f/support/triage")
        assert "f/ai/llm" in str(refused.value)
        assert not (tmp_path / "export").exists()
        with pytest.raises(ItemNotFound):
            await pull(bob, tmp_path / "export", flow="f/ops/nothing")
    finally:
        await ws.close()
