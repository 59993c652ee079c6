"""Writing an agent (or a flow running one) checks that what its tools name is there.

`ada` (admin) keeps the folders `s` and `y`; `bob` is a writer of `s` and
cannot read `y`. A single write checks at once; a directory push checks
once all it holds is written, so an agent and its tools' flows may come
together, in any order.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tidemill.workspace import AsyncWorkspace, Keyring, MasterKey, MissingReferences, agent_diff
from tidemill.workspace._sync import pull, push

FLOW = {"steps": [{"id": "pay", "identity": {}}]}
SCRIPT = "def main(order_id: str):\n    return order_id\n"


def agent(*tools: dict[str, Any]) -> dict[str, Any]:
    return {"model": "fake", "tools": list(tools)}


def linking(path: str) -> dict[str, Any]:
    return {"steps": [{"id": "agent", "ai_agent": {"agent": path}}]}


@pytest.fixture
async def ws(store_url: str) -> AsyncIterator[AsyncWorkspace]:
    workspace = AsyncWorkspace(
        store_url, user="ada", keyring=Keyring(MasterKey.generate()), migrate=True
    )
    try:
        await workspace.add_user("bob")
        await workspace.add_folder("s", roles={"bob": "writer"})
        await workspace.add_folder("y")
        await workspace.write("f/s/refund", "flow", FLOW)
        await workspace.write("f/s/lookup", "script", SCRIPT)
        await workspace.write("f/y/private", "flow", FLOW)
        yield workspace
    finally:
        await workspace.close()


async def test_an_agent_naming_what_is_not_there_is_refused_naming_each(
    ws: AsyncWorkspace,
) -> None:
    value = agent(
        {"name": "refund", "flow": "f/s/refund"},
        {"name": "gone", "flow": {"path": "f/s/nothing"}},
        {"name": "look", "script": {"path": "f/s/lookup@4"}},
        {"name": "helper", "agent": {"agent": "f/s/helper"}},
        {"name": "inner", "agent": {"model": "fake", "tools": [
            {"name": "deep", "script": {"path": "f/s/missing"}}]}},
    )  # fmt: skip
    with pytest.raises(MissingReferences) as caught:
        await ws.write("f/s/triage", "resource", value, resource_type="ai_agent")
    error = caught.value
    assert error.missing == ["f/s/nothing", "f/s/lookup@4", "f/s/helper", "f/s/missing"]
    assert error.problems == [
        "at tools[1].flow: no flow f/s/nothing that ada may read",
        "at tools[2].script.path: no script f/s/lookup@4 that ada may read",
        "at tools[3].agent.agent: no ai_agent resource f/s/helper that ada may read",
        "at tools[4].agent.tools[0].script.path: no script f/s/missing that ada may read",
    ]
    assert error.hint is not None and "sync push" in error.hint
    assert error.context["missing"] == error.missing
    with pytest.raises(MissingReferences):  # a draft is checked the same way
        await ws.save_draft("f/s/triage", "resource", value, resource_type="ai_agent")
    # What is there, of the right kind, passes; a pinned version that exists too.
    ok = agent(
        {"name": "refund", "flow": "f/s/refund"},
        {"name": "look", "script": {"path": "f/s/lookup@1"}},
    )
    await ws.write("f/s/triage", "resource", ok, resource_type="ai_agent")


async def test_a_reference_of_the_wrong_kind_is_missing_too(ws: AsyncWorkspace) -> None:
    value = agent(
        {"name": "a", "flow": "f/s/lookup"},  # a script, not a flow
        {"name": "b", "agent": {"agent": "f/s/refund@1"}},  # a flow, not an agent
    )
    with pytest.raises(MissingReferences) as caught:
        await ws.write("f/s/triage", "resource", value, resource_type="ai_agent")
    assert caught.value.missing == ["f/s/lookup", "f/s/refund@1"]


async def test_what_the_writer_cannot_read_is_missing_for_it(ws: AsyncWorkspace) -> None:
    bob = await ws.acting_as("bob")
    value = agent({"name": "peek", "flow": "f/y/private"})
    with pytest.raises(MissingReferences) as caught:
        await bob.write("f/s/peeker", "resource", value, resource_type="ai_agent")
    assert caught.value.problems == ["at tools[0].flow: no flow f/y/private that bob may read"]
    await ws.write("f/s/peeker", "resource", value, resource_type="ai_agent")  # ada may


async def test_a_flow_linking_an_agent_checks_what_the_agent_names(ws: AsyncWorkspace) -> None:
    value = agent({"name": "refund", "flow": "f/s/refund"})
    await ws.write("f/s/triage", "resource", value, resource_type="ai_agent")
    await ws.write("f/s/uses", "flow", linking("f/s/triage"))
    await ws.delete("f/s/refund")
    with pytest.raises(MissingReferences) as caught:
        await ws.write("f/s/uses", "flow", linking("f/s/triage"))
    assert caught.value.missing == ["f/s/refund"]
    assert caught.value.problems == [
        "at step 'agent' links f/s/triage, whose tools[0].flow: no flow f/s/refund that ada "
        "may read"
    ]
    # An inline step's tool linking a nested agent that is not there is refused too.
    inline = {"steps": [{"id": "a", "ai_agent": {"model": "fake", "tools": [
        {"name": "helper", "agent": {"agent": "f/s/nobody@2"}}]}}]}  # fmt: skip
    with pytest.raises(MissingReferences, match="f/s/nobody@2"):
        await ws.write("f/s/inline", "flow", inline)


def _write(root: Path, path: str, text: str) -> None:
    file = root / path
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text(text)


async def test_a_push_writes_agents_their_tools_and_linking_flows_in_one_go(
    ws: AsyncWorkspace, tmp_path: Path
) -> None:
    root = tmp_path / "tree"
    # `triage` is written before `zhelper`, which it links, and before the flows it names.
    triage = agent(
        {"name": "pay", "flow": "f/n/pay"},
        {"name": "look", "script": {"path": "f/n/look"}},
        {"name": "helper", "agent": {"agent": "f/n/zhelper"}},
    )
    _write(root, "f/n/folder.meta.yaml", "summary: New\n")
    _write(root, "f/n/triage.agent.yaml", yaml.safe_dump(triage))
    _write(root, "f/n/zhelper.agent.yaml", yaml.safe_dump(agent({"name": "p", "flow": "f/n/pay"})))
    _write(root, "f/n/pay.flow.yaml", yaml.safe_dump(FLOW))
    _write(root, "f/n/look.py", SCRIPT)
    _write(root, "f/n/a-uses.flow.yaml", yaml.safe_dump(linking("f/n/triage")))
    plan = await push(ws, root)
    assert plan.applied and plan.counts()["create"] == 6
    assert (await ws.get("f/n/triage")).value == triage


async def test_a_push_with_a_dangling_reference_writes_nothing_and_names_the_file(
    ws: AsyncWorkspace, tmp_path: Path
) -> None:
    root = tmp_path / "tree"
    _write(root, "f/n/folder.meta.yaml", "summary: New\n")
    _write(root, "f/n/pay.flow.yaml", yaml.safe_dump(FLOW))
    _write(
        root,
        "f/n/triage.agent.yaml",
        yaml.safe_dump(agent({"name": "pay", "flow": "f/n/pay"}, {"name": "x", "flow": "f/n/no"})),
    )
    dry = await push(ws, root, dry_run=True)
    assert dry.problem is not None and "f/n/triage.agent.yaml" in dry.problem
    with pytest.raises(MissingReferences) as caught:
        await push(ws, root)
    assert caught.value.missing == ["f/n/no"]
    assert caught.value.message.startswith("f/n/triage.agent.yaml: ")
    assert caught.value.context["file"] == "f/n/triage.agent.yaml"
    assert [item.path for item in await ws.list("f/")] == [
        "f/s/lookup",
        "f/s/refund",
        "f/y/private",
    ]


async def test_deploying_a_flow_with_its_agents_draft_checks_after_both(
    ws: AsyncWorkspace,
) -> None:
    await ws.write("f/s/old", "flow", FLOW)
    await ws.write("f/s/triage", "resource", agent({"name": "r", "flow": "f/s/old"}),
                   resource_type="ai_agent")  # fmt: skip
    await ws.write("f/s/uses", "flow", linking("f/s/triage"))
    await ws.save_draft("f/s/uses", "flow", {"summary": "v2", **linking("f/s/triage")})
    await ws.delete("f/s/old")  # the deployed agent now names nothing there ...
    fixed = agent({"name": "r", "flow": "f/s/refund"})  # ... and its draft fixes that
    await ws.save_draft("f/s/triage", "resource", fixed, resource_type="ai_agent")
    with pytest.raises(MissingReferences, match="f/s/old"):
        await ws.deploy("f/s/uses")  # alone, the flow still runs the deployed agent
    await ws.deploy("f/s/uses", agents=["f/s/triage"])  # checked once both are written
    assert (await ws.get("f/s/triage")).value == fixed
    assert (await ws.get("f/s/uses")).summary == "v2"


async def test_an_agent_naming_a_missing_mcp_resource_is_refused(ws: AsyncWorkspace) -> None:
    value = agent({"name": "m", "mcp": {"resource": "$res:f/s/fetch"}})
    with pytest.raises(MissingReferences) as caught:
        await ws.write("f/s/triage", "resource", value, resource_type="ai_agent")
    assert caught.value.problems == [
        "at tools[0].mcp.resource: no resource f/s/fetch that ada may read"
    ]
    await ws.write(
        "f/s/fetch", "resource", {"url": "http://127.0.0.1:1/mcp"}, resource_type="mcp_server"
    )
    await ws.write("f/s/triage", "resource", value, resource_type="ai_agent")


async def test_an_export_carries_the_scripts_and_mcp_servers_of_a_linked_agents_tools(
    ws: AsyncWorkspace, tmp_path: Path
) -> None:
    await ws.write(
        "f/s/fetch", "resource", {"url": "http://127.0.0.1:1/mcp"}, resource_type="mcp_server"
    )
    value = agent(
        {"name": "look", "script": {"path": "f/s/lookup@1"}},
        {"name": "m", "mcp": {"resource": "f/s/fetch"}},
    )
    await ws.write("f/s/triage", "resource", value, resource_type="ai_agent")
    await ws.write("f/s/uses", "flow", linking("f/s/triage@1"))
    report = await pull(ws, tmp_path / "export", flow="f/s/uses")
    assert set(report.files) == {
        "f/s/folder.meta.yaml",
        "f/s/fetch.resource.yaml",
        "f/s/lookup.py",
        "f/s/triage.agent.yaml",
        "f/s/uses.flow.yaml",
    }


def test_agent_diff_shows_a_script_tool_moving_to_a_workspace_script() -> None:
    old = agent({"name": "look", "script": "def main(): ..."})
    new = agent({"name": "look", "script": {"path": "f/s/lookup@2"}})
    newer = agent({"name": "look", "script": {"path": "f/s/lookup@3"}})
    assert agent_diff(old, new).splitlines() == [
        "- tool look: script: 'def main(): ...'",
        "+ tool look: script.path: 'f/s/lookup@2'",
    ]
    assert agent_diff(new, newer) == "tool look: script.path: 'f/s/lookup@2' -> 'f/s/lookup@3'"


async def test_a_draft_is_checked_against_what_its_author_sees_in_draft_mode(
    ws: AsyncWorkspace,
) -> None:
    bob = await ws.acting_as("bob")
    await bob.save_draft("f/s/newflow", "flow", FLOW)  # only bob's draft so far
    value = agent({"name": "new", "flow": "f/s/newflow"})
    # A draft agent naming it passes for bob (a preview run of his reads his drafts) ...
    await bob.save_draft("f/s/triage", "resource", value, resource_type="ai_agent")
    # ... a flow draft linking that draft agent too ...
    await bob.save_draft("f/s/uses", "flow", linking("f/s/triage"))
    # ... but not for ada, who has no such draft, nor as a deployed agent, nor on deploy.
    with pytest.raises(MissingReferences) as caught:
        await ws.save_draft("f/s/triage", "resource", value, resource_type="ai_agent")
    assert caught.value.problems == [
        "at tools[0].flow: no flow f/s/newflow that ada may read (deployed, or a draft of theirs)"
    ]
    with pytest.raises(MissingReferences, match="f/s/newflow"):
        await bob.write("f/s/triage", "resource", value, resource_type="ai_agent")
    with pytest.raises(MissingReferences, match="f/s/newflow"):
        await bob.deploy("f/s/triage")
    # A flow nobody has is refused for a draft as well.
    nobody = agent({"name": "gone", "flow": "f/s/nobody"})
    with pytest.raises(MissingReferences) as refused:
        await bob.save_draft("f/s/other", "resource", nobody, resource_type="ai_agent")
    assert refused.value.missing == ["f/s/nobody"]
    # Once the flow is deployed, the agent deploys.
    await bob.deploy("f/s/newflow")
    await bob.deploy("f/s/triage")
    assert (await ws.get("f/s/triage")).value == value
