"""MCPConnection against a real MCP server, over stdio and over streamable HTTP."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator, Callable

import pytest
import pytest_asyncio

import tidemill
from tidemill._sync import LoopThread
from tidemill.errors import ConfigurationError, MCPToolError, ToolArgumentsError
from tidemill.llm import ScriptedModel
from tidemill.tools import ToolContext, ToolRegistry
from tidemill.tools.mcp import MCPConnection, MCPResult, MCPServer, MCPTool
from tidemill.types import Role, ToolCall

# The servers take a second or two to start: share them across this module, on one loop.
pytestmark = pytest.mark.asyncio(loop_scope="module")

CONTEXT = ToolContext(thread_id="t", call_id="c", tool_name="mcp")
NAMES = ["add", "echo", "fail", "slow", "image", "pid", "key", "crash"]
SHAPE = {"label": "tri", "points": [{"x": 1, "y": 2}, {"x": 3, "y": 4.5}]}


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stdio_calc(calc_stdio: Callable[..., MCPServer]) -> AsyncIterator[MCPConnection]:
    async with MCPConnection(calc_stdio()) as connection:
        yield connection


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def http_calc(calc_http_url: str) -> AsyncIterator[MCPConnection]:
    async with MCPConnection(url=calc_http_url, name="web") as connection:
        yield connection


@pytest.fixture(params=["stdio", "http"])
def calc(
    request: pytest.FixtureRequest, stdio_calc: MCPConnection, http_calc: MCPConnection
) -> MCPConnection:
    return stdio_calc if request.param == "stdio" else http_calc


def tool(connection: MCPConnection, remote_name: str) -> MCPTool:
    return next(t for t in connection.tools if t.remote_name == remote_name)


async def call(connection: MCPConnection, remote_name: str, **arguments: object) -> str:
    """Call a tool as the runtime does: validate, acall, render."""
    mcp_tool = tool(connection, remote_name)
    result = await mcp_tool.acall(mcp_tool.validate(arguments), CONTEXT)
    return mcp_tool.render(result)


async def test_lists_the_tools_with_the_servers_names_descriptions_and_schemas(
    calc: MCPConnection,
) -> None:
    prefix = calc.name
    assert [t.name for t in calc.tools] == [f"{prefix}__{name}" for name in NAMES]
    assert [t.remote_name for t in calc.tools] == NAMES
    add = tool(calc, "add")
    assert add.description == "Add two integers."
    assert add.parameters["required"] == ["a", "b"]
    assert add.parameters["properties"]["a"]["type"] == "integer"  # type: ignore[index]
    assert add.definition.name == f"{prefix}__add"
    assert add.server == prefix and add.connection is calc
    assert calc.server_info["name"] == "calc"
    assert calc.is_open


async def test_two_servers_with_the_same_tools_do_not_collide(
    stdio_calc: MCPConnection, http_calc: MCPConnection
) -> None:
    registry = ToolRegistry([*stdio_calc.tools, *http_calc.tools])
    assert len(registry) == 2 * len(NAMES)
    assert "calc__add" in registry and "web__add" in registry
    assert await call(stdio_calc, "add", a=2, b=3) == "5"
    assert await call(http_calc, "add", a=20, b=30) == "50"


async def test_calls_through_the_tool_interface(calc: MCPConnection) -> None:
    assert await call(calc, "add", a=2, b=3) == "5"
    assert await call(calc, "echo", shape=SHAPE, note="ok") == (
        '{"label":"tri","points":[{"x":1.0,"y":2.0},{"x":3.0,"y":4.5}]} ok'
    )
    assert await call(calc, "image") == "[image: image/png, 68 bytes]"


async def test_the_result_keeps_content_and_structured_content(calc: MCPConnection) -> None:
    result = await calc.acall_tool("add", {"a": 1, "b": 1})
    assert isinstance(result, MCPResult)
    assert result.content == ({"type": "text", "text": "2"},)
    assert not result.is_error
    image = await calc.acall_tool("image", {})
    assert image.content[0]["type"] == "image" and image.content[0]["mimeType"] == "image/png"


async def test_an_error_result_raises_so_the_model_sees_an_error(calc: MCPConnection) -> None:
    with pytest.raises(MCPToolError) as raised:
        await call(calc, "fail", reason="the disk is full")
    assert "fail" in str(raised.value)
    assert (raised.value.server, raised.value.tool) == (calc.name, "fail")
    # The connection itself returns the result, marked as an error.
    result = await calc.acall_tool("fail", {"reason": "x"})
    assert result.is_error and "fail" in result.text()


async def test_bad_arguments_fail_the_schema_before_any_call(calc: MCPConnection) -> None:
    add, echo = tool(calc, "add"), tool(calc, "echo")
    with pytest.raises(ToolArgumentsError) as raised:
        add.validate({"a": "two"})
    assert raised.value.errors == [
        "(arguments): 'b' is a required property",
        "a: 'two' is not of type 'integer'",
    ]
    nested = {"label": "tri", "points": [{"x": 1, "y": "high"}]}
    with pytest.raises(ToolArgumentsError, match=r"shape\.points\.0\.y: 'high' is not of type"):
        echo.validate({"shape": nested})


async def test_calls_run_concurrently(calc: MCPConnection) -> None:
    started = time.monotonic()
    answers = await asyncio.gather(*(call(calc, "slow", seconds=0.4) for _ in range(3)))
    assert answers == ["slept 0.4"] * 3
    assert time.monotonic() - started < 1.1


async def test_a_call_that_takes_too_long_times_out(calc_http_url: str) -> None:
    async with MCPConnection(url=calc_http_url, name="web", call_timeout=0.3) as web:
        started = time.monotonic()
        with pytest.raises(MCPToolError, match=r"did not answer the call of 'slow' within 0\.3 s"):
            await call(web, "slow", seconds=5)
        assert time.monotonic() - started < 2
        assert await call(web, "add", a=1, b=2) == "3"  # the session is still usable


async def test_an_agent_calls_the_tools_end_to_end(stdio_calc: MCPConnection) -> None:
    model = ScriptedModel(
        tool_calls=[[ToolCall(id="c1", name="calc__add", arguments={"a": 2, "b": 3})], []],
        responses=["", "done"],
    )
    bot = tidemill.agent().llm(model).tool(*stdio_calc.tools)
    response = await bot.arun("What is 2 + 3?")
    assert response.output == "done"
    assert [d.name for d in model.requests[0].tools] == [f"calc__{name}" for name in NAMES]
    tool_message = model.requests[1].messages[-1]
    assert (tool_message.role, tool_message.name, tool_message.content) == (
        Role.TOOL,
        "calc__add",
        "5",
    )


async def test_an_agent_with_the_fake_model_gets_results_and_errors(
    stdio_calc: MCPConnection,
) -> None:
    bot = (
        tidemill.agent()
        .llm(
            "fake",
            tool_calls=[
                [
                    ToolCall(id="ok", name="calc__add", arguments={"a": 2, "b": 3}),
                    ToolCall(id="failed", name="calc__fail", arguments={"reason": "no"}),
                    ToolCall(id="invalid", name="calc__add", arguments={"a": "x"}),
                ],
                [],
            ],
            responses=["", "done"],
        )
        .tool(*stdio_calc.tools)
    )
    response = await bot.arun("Add and fail.")
    assert response.output == "done"
    results = {m.tool_call_id: m.content for m in response.messages if m.role == Role.TOOL}
    assert results["ok"] == "5"
    assert results["failed"].startswith("The tool raised MCPToolError:")
    assert results["invalid"].startswith("Invalid arguments for tool 'calc__add'")


async def test_approval_can_be_required_for_some_tools(calc_http_url: str) -> None:
    async with MCPConnection(url=calc_http_url, name="web", requires_approval={"crash"}) as web:
        assert [t.remote_name for t in web.tools if t.requires_approval] == ["crash"]


async def test_a_connection_is_usable_from_another_running_loop(
    stdio_calc: MCPConnection,
) -> None:
    # asyncio.run in a thread: another loop, while this one keeps running.
    answer = await asyncio.to_thread(asyncio.run, call(stdio_calc, "add", a=4, b=4))
    assert answer == "8"


async def test_close_stops_the_server_process(calc_stdio: Callable[..., MCPServer]) -> None:
    connection = MCPConnection(calc_stdio())
    with pytest.raises(ConfigurationError, match="not open yet"):
        _ = connection.tools
    await connection.aconnect()
    pid = int(await call(connection, "pid"))
    await connection.aclose()
    assert not connection.is_open
    with pytest.raises(ProcessLookupError):  # exited and reaped: not even a zombie
        os.kill(pid, 0)
    with pytest.raises(MCPToolError, match="is closed"):
        await call(connection, "add", a=1, b=2)
    await connection.aclose()  # closing twice does nothing
    with pytest.raises(ConfigurationError, match="a connection opens once"):
        await connection.aconnect()


async def test_a_server_that_dies_fails_calls_instead_of_hanging(
    calc_stdio: Callable[..., MCPServer],
) -> None:
    async with MCPConnection(calc_stdio(call_timeout=20)) as connection:
        started = time.monotonic()
        with pytest.raises(MCPToolError):
            await call(connection, "crash")
        with pytest.raises(MCPToolError):
            await call(connection, "add", a=1, b=2)
        assert time.monotonic() - started < 5
        assert not connection.is_open


async def test_a_connection_whose_loop_stopped_says_so(calc_http_url: str) -> None:
    async def open_and_return() -> MCPConnection:
        return await MCPConnection(url=calc_http_url, name="web").aconnect()

    connection = await asyncio.to_thread(asyncio.run, open_and_return())
    with pytest.raises(MCPToolError, match="has stopped"):
        await call(connection, "add", a=1, b=2)
    await connection.aclose()


async def test_a_blocked_owner_loop_is_an_error_not_a_hang(
    stdio_calc: MCPConnection, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A blocking call on the loop that owns the connection (agent.run() in a notebook)
    # forwards the tool call to that same, blocked, loop.
    monkeypatch.setattr("tidemill.tools.mcp._connection.FORWARD_START_TIMEOUT", 0.3)
    other = LoopThread("test-other-loop")
    try:
        with pytest.raises(MCPToolError, match=r"did not take the call within 0\.3 s"):
            other.run(call(stdio_calc, "add", a=1, b=2))
    finally:
        other.close()
    assert await call(stdio_calc, "add", a=1, b=2) == "3"


async def test_a_call_carries_its_idempotency_key_in_meta(calc: MCPConnection) -> None:
    from tidemill.tools.mcp import IDEMPOTENCY_META

    assert IDEMPOTENCY_META == "tidemill.dev/idempotency-key"
    assert await call(calc, "key") == CONTEXT.idempotency_key == "t/c"
    direct = await calc.acall_tool("key", {})  # no meta given: none sent
    assert direct.text() == ""
