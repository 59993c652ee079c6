"""An `mcp` tool may name its server by resource: `mcp: {resource: $res:f/...}` (or a bare path).

`ada` (admin) keeps the `mcp_server` resources `f/x/env` (a stdio server
whose `env` reads the secret variable `f/x/token`) and `f/y/hidden`; `bob`
is a viewer of `f/x` only. A linked agent's tool names the resource; the
step reads it, with its `$var:` values, as the run's identity.
"""

from __future__ import annotations

import json
import sys
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tidemill.engine import AsyncEngine
from tidemill.errors import RunFailed
from tidemill.flows import MCPTools
from tidemill.llm import ModelRequest, ScriptedModel
from tidemill.types import Message, ToolCall
from tidemill.workspace import AsyncWorkspace, InvalidValue, MasterKey

pytestmark = pytest.mark.timeout(120)

SERVER = """
import os
try:
    from mcp.server.mcpserver import MCPServer as Server
except ImportError:
    from mcp.server.fastmcp import FastMCP as Server
server = Server("env")

@server.tool()
def token_length() -> int:
    return len(os.environ["TOKEN"])

server.run("stdio")
"""


def answer(request: ModelRequest) -> Message:
    results = [str(m.content) for m in request.messages if m.role == "tool"]
    if results:
        return Message.assistant(json.dumps({"results": results}))
    (tool,) = request.tools
    return Message.assistant("", tool_calls=(ToolCall(id="c1", name=tool.name, arguments={}),))


@dataclass
class Setup:
    engine: AsyncEngine
    ada: AsyncWorkspace
    bob: AsyncWorkspace
    secret: str

    async def agent(self, path: str, mcp: dict[str, Any]) -> None:
        value = {"model": "fake", "tools": [{"name": "env", "mcp": mcp}]}
        await self.ada.write(path, "resource", value, resource_type="ai_agent")
        flow = {"steps": [{"id": "agent", "ai_agent": {"agent": path},
                           "inputs": {"user_message": "go"}}]}  # fmt: skip
        await self.ada.write(f"{path}-flow", "flow", flow)

    async def run(self, who: AsyncWorkspace, path: str) -> Any:
        model = ScriptedModel(handler=answer)
        async with self.engine.worker(poll=0.1, pool_size=1, models=lambda choice: model):
            run_id = await self.engine.submit_path(who, f"{path}-flow", {})
            return json.loads(await self.engine.wait(run_id, timeout=60))

    async def fails(self, who: AsyncWorkspace, path: str) -> str:
        with pytest.raises(RunFailed) as caught:
            await self.run(who, path)
        return str(caught.value.error["message"])


@pytest.fixture
async def setup(
    store_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> AsyncIterator[Setup]:
    pytest.importorskip("mcp")
    if store_url.startswith("postgres"):
        monkeypatch.setenv("TIDEMILL_MASTER_KEY", MasterKey.generate().encoded())
    server = tmp_path / "env_server.py"
    server.write_text(SERVER)
    secret = f"tok-{uuid.uuid4().hex}"
    engine = AsyncEngine(store_url, migrate=True)
    await engine._open()
    ada = AsyncWorkspace(engine.store, user="ada")
    try:
        await ada.add_user("bob")
        await ada.add_folder("x", roles={"bob": "viewer"})
        await ada.add_folder("y")
        await ada.write("f/x/token", "variable", secret, secret=True)
        env = {"TOKEN": "$var:f/x/token"}
        stdio = {"command": sys.executable, "args": [str(server)], "env": env}
        await ada.write("f/x/env", "resource", stdio, resource_type="mcp_server")
        await ada.write("f/y/hidden", "resource", stdio, resource_type="mcp_server")
        await ada.write("f/x/openai", "resource", {"api_key": "$var:f/x/token"},
                        resource_type="openai")  # fmt: skip
        yield Setup(engine, ada, await ada.acting_as("bob"), secret)
    finally:
        await ada.close()
        await engine.close()


async def test_a_linked_agents_mcp_tool_reads_its_server_from_a_resource(setup: Setup) -> None:
    await setup.agent("f/x/by-res", {"resource": "$res:f/x/env", "tools": ["token_length"]})
    await setup.agent("f/x/by-path", {"resource": "f/x/env"})
    assert await setup.run(setup.bob, "f/x/by-res") == {"results": [str(len(setup.secret))]}
    assert await setup.run(setup.bob, "f/x/by-path") == {"results": [str(len(setup.secret))]}
    stored = await setup.ada.get("f/x/by-path")
    assert stored.value["tools"][0]["mcp"] == {"resource": "f/x/env"}  # kept as written


async def test_a_resource_the_runner_cannot_read_fails_the_step(setup: Setup) -> None:
    await setup.agent("f/x/hidden", {"resource": "$res:f/y/hidden"})
    assert await setup.run(setup.ada, "f/x/hidden") == {"results": [str(len(setup.secret))]}
    message = await setup.fails(setup.bob, "f/x/hidden")
    assert "f/y/hidden" in message and "bob" in message


async def test_a_resource_of_another_type_holds_no_server(setup: Setup) -> None:
    await setup.agent("f/x/wrong", {"resource": "$res:f/x/openai"})
    message = await setup.fails(setup.ada, "f/x/wrong")
    assert "names $res:f/x/openai, which holds no MCP server" in message
    assert setup.secret not in message


async def test_an_mcp_server_resource_needs_one_transport(setup: Setup) -> None:
    with pytest.raises(InvalidValue):
        await setup.ada.write(
            "f/x/both", "resource", {"command": "x", "url": "http://h"}, resource_type="mcp_server"
        )
    with pytest.raises(InvalidValue):
        await setup.ada.write("f/x/none", "resource", {"args": ["a"]}, resource_type="mcp_server")


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"resource": "f/x"}, "naming a workspace resource of type mcp_server"),
        ({"resource": "$var:f/x/env"}, "naming a workspace resource of type mcp_server"),
        ({"resource": "$res:f/x/env", "command": "uvx"}, "exactly one of command"),
        ({"resource": "$res:f/x/env", "env": {"A": "b"}}, "come from the resource"),
        ({}, "got none"),
    ],
)
def test_a_malformed_mcp_resource_is_refused(settings: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        MCPTools.model_validate(settings)
