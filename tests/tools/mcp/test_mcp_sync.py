"""The blocking facade: a connection on its own loop thread, used by a blocking agent."""

from __future__ import annotations

import pytest

import tidemill
from tidemill.errors import ConfigurationError
from tidemill.tools.mcp import MCPConnection
from tidemill.types import Role, ToolCall


def test_connect_in_sync_code_and_run_a_blocking_agent(calc_http_url: str) -> None:
    with MCPConnection(url=calc_http_url, name="calc") as calc:
        bot = tidemill.agent().llm(
            "fake",
            tool_calls=[[ToolCall(id="c1", name="calc__add", arguments={"a": 20, "b": 22})], []],
            responses=["", "42"],
        )
        response = bot.tool(*calc.tools).run("What is 20 + 22?")
        bot.close()
        assert response.output == "42"
        results = [m.content for m in response.messages if m.role == Role.TOOL]
        assert results == ["42"]
    assert not calc.is_open


async def test_close_refuses_to_block_the_connections_own_loop(calc_http_url: str) -> None:
    connection = await MCPConnection(url=calc_http_url).aconnect()
    with pytest.raises(ConfigurationError, match="would block the event loop"):
        connection.close()
    await connection.aclose()


def test_close_from_another_thread_reaches_the_connections_loop(calc_http_url: str) -> None:
    connection = MCPConnection(url=calc_http_url).connect()
    thread, connection._thread = connection._thread, None  # as if opened on that loop
    try:
        connection.close()
        assert not connection.is_open
    finally:
        assert thread is not None
        thread.close()


async def test_a_connection_opened_in_sync_code_closes_from_async_code(
    calc_http_url: str,
) -> None:
    connection = MCPConnection(url=calc_http_url, name="calc").connect()
    assert (await connection.acall_tool("add", {"a": 1, "b": 2})).text() == "3"
    await connection.aclose()
    assert not connection.is_open and connection._thread is None
