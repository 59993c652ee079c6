"""`.mcp(...)` on the agent builder: connect now, bind the tools, close with the builder."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tidemill import MCPConnectionError, ToolCall, agent
from tidemill.tools.mcp import MCPTool

CALC = Path(__file__).parent / "servers" / "calc_server.py"


def test_the_builder_connects_binds_and_closes() -> None:
    bot = (
        agent()
        .llm(
            "fake",
            responses=["", "The sum is 5."],
            tool_calls=[[ToolCall(name="calc__add", arguments={"a": 2, "b": 3})], []],
        )
        .mcp(command=sys.executable, args=[str(CALC), "stdio"], name="calc")
    )
    tool = bot.build().tools.get("calc__add")
    assert isinstance(tool, MCPTool)
    response = bot.run("2 + 3?")
    assert response.output == "The sum is 5."
    assert response.steps[0].tool_results[0].content == "5"
    connection = tool.connection
    assert connection.is_open
    bot.close()
    assert not connection.is_open


def test_an_unreachable_server_fails_at_build_time() -> None:
    with pytest.raises(MCPConnectionError, match="no-such-command-xyz"):
        agent().llm("fake").mcp(command="no-such-command-xyz", name="ghost")
