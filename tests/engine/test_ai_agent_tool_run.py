"""In-process function tools that ask for a `ToolContext` get the run's `ToolRun` as `deps`.

It carries who the run runs as, its workspace opened as that user (so a
tool reads what the user may, no more), the run's input and the engine; the
`ToolContext` parameter is not part of the schema the model sees. A
`@tool`-decorated function may be named too.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from tidemill.engine import AsyncEngine, ModelChoice
from tidemill.errors import RunFailed
from tidemill.flows import Flow
from tidemill.llm import Model, ScriptedModel
from tidemill.types import Message, ToolCall
from tidemill.workspace import AsyncWorkspace

pytestmark = pytest.mark.timeout(90)


def agent_flow(tools: list[dict[str, Any]]) -> Flow:
    step = {
        "id": "agent",
        "ai_agent": {"model": "fake", "tools": tools},
        "inputs": {"user_message": "Go."},
    }
    return Flow.model_validate({"name": "toolrun", "steps": [step]})


async def _run(
    engine: AsyncEngine, flow: Flow, model: ScriptedModel, **submit: Any
) -> tuple[str, Any]:
    def resolve(choice: ModelChoice) -> Model:
        return model

    async with engine.worker(concurrency=2, poll=0.05, pool_size=1, models=resolve):
        run_id = await engine.submit(flow, {"topic": "tides"}, **submit)
        info = await engine.wait(run_id, timeout=60)
    return run_id, info


def _results(model: ScriptedModel) -> list[Message]:
    return [m for m in model.requests[-1].messages if m.role == "tool"]


@pytest.fixture
async def team(engine: AsyncEngine) -> AsyncWorkspace:
    ws = AsyncWorkspace(
        engine.store, workspace=f"w{uuid.uuid4().hex[:8]}", user="ada", migrate=True
    )
    await ws.add_user("max")
    await ws.add_folder("team")
    await ws.write("f/team/plan", "variable", "the plan")
    max_ = await ws.acting_as("max")
    await max_.write("u/max/notes", "variable", "notes")
    return ws


async def test_a_tool_asking_for_its_context_acts_as_the_runs_user(
    engine: AsyncEngine, team: AsyncWorkspace
) -> None:
    tools = [{"name": "whose", "function": "toolrun_fns:whose", "run": "in_process"}]
    calls = [[ToolCall(id="c1", name="whose", arguments={})], []]
    model = ScriptedModel(["", "done"], tool_calls=calls)
    source = {"workspace": team.name}
    _, answer = await _run(engine, agent_flow(tools), model, run_as="max", source=source)
    assert answer == "done"
    (schema,) = model.requests[0].tools
    assert schema.parameters["properties"] == {
        "prefix": {"type": "string", "default": "", "description": "Where to list."}
    }  # the context is not the model's to fill
    (result,) = _results(model)
    seen = json.loads(result.content)
    assert seen["run_as"] == seen["user"] == "max" and seen["workspace"] == team.name
    assert seen["items"] == ["u/max/notes"]  # max may not read f/team
    assert seen["flow_input"] == {"topic": "tides"} and seen["engine"] is True
    assert seen["ids"] == [True, "agent", 1, "c1"]


async def test_a_tool_decorated_function_may_be_named(
    engine: AsyncEngine, team: AsyncWorkspace
) -> None:
    tools = [{"name": "shout", "function": "toolrun_fns:shout", "run": "in_process"}]
    calls = [[ToolCall(id="c1", name="shout", arguments={"text": "hi"})], []]
    model = ScriptedModel(["", "done"], tool_calls=calls)
    await _run(engine, agent_flow(tools), model, run_as="ada", source={"workspace": team.name})
    (result,) = _results(model)
    assert not result.is_error and result.content == "HI for ada"


async def test_a_run_as_no_one_gives_the_tool_no_workspace(engine: AsyncEngine) -> None:
    tools = [{"name": "whose", "function": "toolrun_fns:whose", "run": "in_process"}]
    calls = [[ToolCall(id="c1", name="whose", arguments={})], []]
    model = ScriptedModel(["", "done"], tool_calls=calls)
    await _run(engine, agent_flow(tools), model)
    (result,) = _results(model)
    assert result.is_error and "runs as no one" in result.content


async def test_only_an_in_process_tool_may_ask_for_its_context(engine: AsyncEngine) -> None:
    tools = [{"name": "needs", "function": "toolrun_fns:needs_context"}]
    model = ScriptedModel(["done"])
    run_id = await engine.submit(agent_flow(tools))
    async with engine.worker(concurrency=1, poll=0.05, pool_size=1, models=lambda c: model):
        with pytest.raises(RunFailed) as failed:
            await engine.wait(run_id, timeout=60)
    assert "run: in_process" in str(failed.value)
    assert model.requests == []  # refused before the model was asked
