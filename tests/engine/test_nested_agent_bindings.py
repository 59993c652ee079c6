"""A nested agent tool's own tool bindings survive saving the step as an agent, and run the same.

The step's agent has a tool `helper`, a nested agent; `helper` binds the
nested agent's input `order` from the flow (`flow_input.order`), and the
nested agent's tool `look` binds `order_id` from `flow_input.order`. A call
of `helper` is a child run whose `flow_input` is `{message, order}`, so
`look`'s binding reads what `helper` bound, not the host flow: it belongs to
the agent. Saving the step as an agent moves `helper`'s binding to
`tool_inputs` and keeps `look`'s in the agent.
"""

from __future__ import annotations

import copy
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tidemill.engine import AsyncEngine
from tidemill.llm import ModelRequest, ScriptedModel
from tidemill.types import Message, ToolCall
from tidemill.workspace import AsyncWorkspace, MasterKey

pytestmark = pytest.mark.timeout(120)

LOOK = "def main(order_id: str):\n    return 'looked ' + order_id\n"

NESTED = {
    "model": "fake",
    "tools": [
        {"name": "look", "script": LOOK, "inputs": {"order_id": {"expr": "flow_input.order"}}}
    ],
}
STEP = {
    "model": "fake",
    "tools": [
        {"name": "helper", "agent": NESTED, "inputs": {"order": {"expr": "flow_input.order"}}}
    ],
}
FLOW = {
    "inputs": {"type": "object", "properties": {"order": {"type": "string"}}},
    "steps": [{"id": "agent", "ai_agent": STEP, "inputs": {"user_message": "go"}}],
}


def answer(request: ModelRequest) -> Message:
    """The outer agent calls `helper`, the nested one `look`; each answers with the result."""
    results = [str(m.content) for m in request.messages if m.role == "tool"]
    if results:
        return Message.assistant(results[-1])
    name = "helper" if any(tool.name == "helper" for tool in request.tools) else "look"
    arguments = {"message": "look it up"} if name == "helper" else {}
    return Message.assistant("", tool_calls=(ToolCall(id="c1", name=name, arguments=arguments),))


@pytest.fixture
async def setup(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[AsyncEngine, AsyncWorkspace]]:
    if store_url.startswith("postgres"):
        monkeypatch.setenv("TIDEMILL_MASTER_KEY", MasterKey.generate().encoded())
    engine = AsyncEngine(store_url, migrate=True)
    await engine._open()
    ada = AsyncWorkspace(engine.store, user="ada")
    try:
        await ada.add_folder("x")
        yield engine, ada
    finally:
        await ada.close()
        await engine.close()


async def _run(engine: AsyncEngine, ada: AsyncWorkspace) -> Any:
    model = ScriptedModel(handler=answer)
    async with engine.worker(poll=0.1, pool_size=1, models=lambda choice: model):
        run_id = await engine.submit_path(ada, "f/x/flow", {"order": "A7"})
        return json.loads(json.dumps(await engine.wait(run_id, timeout=60)))


async def test_nested_bindings_are_kept_in_the_agent_and_run_as_before(
    setup: tuple[AsyncEngine, AsyncWorkspace],
) -> None:
    engine, ada = setup
    await ada.write("f/x/flow", "flow", copy.deepcopy(FLOW))
    assert await _run(engine, ada) == "looked A7"
    saved = await ada.save_step_as_agent("f/x/flow", "agent", "f/x/agent")
    (helper,) = saved.value["tools"]
    assert "inputs" not in helper  # it read the host flow: moved to tool_inputs
    assert helper["agent"] == NESTED  # the nested agent's bindings are its own: kept
    step = (await ada.get("f/x/flow")).value["steps"][0]["ai_agent"]
    assert step == {
        "agent": "f/x/agent",
        "tool_inputs": {"helper": {"order": {"expr": "flow_input.order"}}},
    }
    assert await _run(engine, ada) == "looked A7"  # linked, it runs as it did inline
    unlinked = await ada.unlink_step("f/x/flow", "agent")
    assert unlinked.value["steps"][0]["ai_agent"] == STEP
