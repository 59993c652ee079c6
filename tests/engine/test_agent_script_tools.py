"""Script tools by path: `script: {path: f/...}`, a workspace script read as the run's identity.

`ada` (admin) keeps the scripts `f/x/lookup` and `f/y/hidden` and the agent
`f/x/triage`; `bob` is a viewer of `f/x` only. The scripted model answers
`call <tool>` by calling it, then (and for any other message) with the
tools it was given, their schemas, and the tool results, as JSON.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import pytest

from tidemill.engine import AsyncEngine
from tidemill.errors import FlowValidationError, RunFailed
from tidemill.flows import AgentToolSpec, Flow
from tidemill.llm import ModelRequest, ScriptedModel
from tidemill.types import Message, ToolCall
from tidemill.workspace import AsyncWorkspace, MasterKey

pytestmark = pytest.mark.timeout(120)

LOOKUP_V1 = (
    "def main(order_id: str, region: str = 'eu'):\n    '''Look an order up.'''\n"
    "    return 'v1 ' + order_id + ' ' + region\n"
)
LOOKUP_V2 = (
    "def main(order_id: str, region: str = 'eu'):\n    '''Look an order up, again.'''\n"
    "    return 'v2 ' + order_id + ' ' + region\n"
)
HIDDEN = "def main(order_id: str = ''):\n    return 'hidden'\n"


def answer(request: ModelRequest) -> Message:
    results = [m for m in request.messages if m.role == "tool"]
    users = [m for m in request.messages if m.role == "user"]
    text = str(users[-1].content) if users else ""
    if not results and text.startswith("call "):
        name = text.split()[1]
        call = ToolCall(id="c1", name=name, arguments={"order_id": "A7"})
        return Message.assistant("", tool_calls=(call,))
    seen = {
        "tools": {tool.name: tool.parameters for tool in request.tools},
        "descriptions": {tool.name: tool.description for tool in request.tools},
        "results": [m.content for m in results],
        "errors": [bool(m.is_error) for m in results],
    }
    return Message.assistant(json.dumps(seen))


def agent(*tools: dict[str, Any]) -> dict[str, Any]:
    return {"model": "fake", "system": "Triage.", "tools": list(tools)}


def flow(step: dict[str, Any]) -> dict[str, Any]:
    return {
        "inputs": {"type": "object", "properties": {"q": {"type": "string"}}},
        "steps": [
            {"id": "agent", "ai_agent": step, "inputs": {"user_message": {"expr": "flow_input.q"}}}
        ],
    }


@dataclass
class Setup:
    engine: AsyncEngine
    ada: AsyncWorkspace
    bob: AsyncWorkspace
    model: ScriptedModel

    def models(self) -> Callable[[Any], ScriptedModel]:
        return lambda choice: self.model

    async def run(self, who: AsyncWorkspace, path: str, q: str) -> tuple[Any, str]:
        run_id = await self.engine.submit_path(who, path, {"q": q})
        return json.loads(await self.engine.wait(run_id, timeout=60)), run_id


@pytest.fixture
async def setup(store_url: str, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Setup]:
    if store_url.startswith("postgres"):
        monkeypatch.setenv("TIDEMILL_MASTER_KEY", MasterKey.generate().encoded())
    engine = AsyncEngine(store_url, migrate=True)
    await engine._open()
    ada = AsyncWorkspace(engine.store, user="ada")
    try:
        await ada.add_user("bob")
        await ada.add_folder("x", roles={"bob": "viewer"})
        await ada.add_folder("y")
        await ada.write("f/x/lookup", "script", LOOKUP_V1)
        await ada.write("f/y/hidden", "script", HIDDEN)
        bob = await ada.acting_as("bob")
        yield Setup(engine, ada, bob, ScriptedModel(handler=answer))
    finally:
        await ada.close()
        await engine.close()


async def test_a_linked_agent_runs_its_workspace_script_tool_live_or_pinned(setup: Setup) -> None:
    ada, bob = setup.ada, setup.bob
    tools = (
        {"name": "live", "script": {"path": "f/x/lookup"}, "inputs": {"region": "us"}},
        {"name": "pinned", "script": {"path": "f/x/lookup@1"}},
    )
    await ada.write("f/x/triage", "resource", agent(*tools), resource_type="ai_agent")
    await ada.write("f/x/linked", "flow", flow({"agent": "f/x/triage"}))
    await ada.write("f/x/lookup", "script", LOOKUP_V2)  # version 2: the live tool follows it
    async with setup.engine.worker(poll=0.1, pool_size=1, models=setup.models()):
        listed, _ = await setup.run(bob, "f/x/linked", "hi")
        live, run_id = await setup.run(bob, "f/x/linked", "call live")
        pinned, _ = await setup.run(bob, "f/x/linked", "call pinned")
    # The schema comes from `main`'s signature, the bound input left out.
    assert listed["tools"]["live"]["properties"] == {"order_id": {"type": "string"}}
    assert set(listed["tools"]["pinned"]["properties"]) == {"order_id", "region"}
    assert listed["descriptions"] == {
        "live": "Look an order up, again.", "pinned": "Look an order up.",
    }  # fmt: skip
    assert live["results"] == ["v2 A7 us"]
    assert pinned["results"] == ["v1 A7 eu"]
    # What the job recorded holds the code read, and says which version it was.
    (recorded,) = await setup.engine.linked_agents(run_id)
    assert recorded["version"] == 1


async def test_an_inline_step_reads_its_script_tool_and_the_run_records_the_version(
    setup: Setup,
) -> None:
    ada, bob = setup.ada, setup.bob
    step = {"model": "fake", "tools": [{"name": "look", "script": {"path": "f/x/lookup"}}]}
    await ada.write("f/x/inline", "flow", flow(step))
    plan = await bob.run_plan("f/x/inline")
    assert plan.source["items"] == {"f/x/lookup": 1}
    (tool,) = plan.flow.steps[0].ai_agent.tools  # type: ignore[union-attr]
    assert tool.code == LOOKUP_V1
    async with setup.engine.worker(poll=0.1, pool_size=1, models=setup.models()):
        seen, _ = await setup.run(bob, "f/x/inline", "call look")
    assert seen["results"] == ["v1 A7 eu"]


async def test_a_script_the_runner_cannot_read_fails_the_step_naming_it(setup: Setup) -> None:
    ada, bob = setup.ada, setup.bob
    await ada.write(
        "f/x/triage",
        "resource",
        agent({"name": "peek", "script": {"path": "f/y/hidden"}}),
        resource_type="ai_agent",
    )
    await ada.write("f/x/linked", "flow", flow({"agent": "f/x/triage"}))
    async with setup.engine.worker(poll=0.1, pool_size=1, models=setup.models()):
        ok, _ = await setup.run(ada, "f/x/linked", "call peek")
        run_id = await setup.engine.submit_path(bob, "f/x/linked", {"q": "call peek"})
        with pytest.raises(RunFailed) as caught:
            await setup.engine.wait(run_id, timeout=60)
    assert ok["results"] == ["hidden"]
    message = caught.value.error["message"]
    assert "f/y/hidden" in message and "bob" in message


async def test_a_pinned_version_that_does_not_exist_fails_the_run_plan(setup: Setup) -> None:
    ada = setup.ada
    step = {"model": "fake", "tools": [{"name": "look", "script": {"path": "f/x/lookup@1"}}]}
    await ada.write("f/x/inline", "flow", flow(step))
    await ada.write("f/x/lookup", "script", LOOKUP_V2)
    await ada.delete("f/x/lookup")  # a pinned version stays readable
    assert (await ada.run_plan("f/x/inline")).source["items"] == {"f/x/lookup": 1}
    with pytest.raises(FlowValidationError) as caught:
        await ada.inline_agent(agent({"name": "look", "script": {"path": "f/x/lookup@9"}}))
    assert "no version 9 of a workspace script f/x/lookup" in str(caught.value)


async def test_a_flow_not_read_from_a_workspace_cannot_run_a_script_path(setup: Setup) -> None:
    step = {"model": "fake", "tools": [{"name": "look", "script": {"path": "f/x/lookup"}}]}
    with pytest.raises(FlowValidationError) as caught:
        Flow.from_dict({"name": "loose", **flow(step)})
    assert "f/x/lookup names a workspace script" in str(caught.value)
    # Built as a model (no reading at all), the step fails when it starts, saying why.
    async with setup.engine.worker(poll=0.1, pool_size=1, models=setup.models()):
        run_id = await setup.engine.submit(Flow.model_validate(flow(step)), {"q": "hi"})
        with pytest.raises(RunFailed) as failed:
            await setup.engine.wait(run_id, timeout=60)
    assert "names the workspace script f/x/lookup, which was not read" in str(
        failed.value.error["message"]
    )


@pytest.mark.parametrize(
    "script",
    [
        {"path": "lookup.py"},
        {"path": "f/x/lookup@0"},
        {"path": "f/x/lookup", "code": "def main(): ..."},
        {},
        {"code": "def main(): ...", "source_path": "f/x/a@1", "extra": 1},
    ],
)
def test_a_malformed_script_reference_is_refused(script: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="script"):
        AgentToolSpec.model_validate({"name": "t", "script": script})


def test_a_script_tool_written_inline_or_read_has_its_code() -> None:
    inline = AgentToolSpec.model_validate({"name": "t", "script": "def main(): ..."})
    read = AgentToolSpec.model_validate(
        {"name": "t", "script": {"code": "def main(): ...", "source_path": "f/x/a@2"}}
    )
    path = f"f/x/s{uuid.uuid4().hex[:8]}"
    unread = AgentToolSpec.model_validate({"name": "t", "script": {"path": path}})
    assert (inline.code, read.code, unread.code) == ("def main(): ...", "def main(): ...", None)
