"""`.mcp(spec, ...)`: the `"fastmcp"` and `"static"` clients, `server=`, any `MCPClient`, factories.

The stdio tests start the SDK-built calc server of `servers/`; the others
need no server and no SDK.
"""

from __future__ import annotations

import asyncio
import gc
import subprocess
import sys
import textwrap
import warnings
from collections.abc import Callable, Iterator, Sequence
from importlib.util import find_spec
from pathlib import Path
from typing import ClassVar

import pytest

from tidemill import ConfigurationError, Tool, ToolCall, agent, tool
from tidemill.errors import MCPToolError, ToolArgumentsError
from tidemill.tools.mcp import (
    CLIENT_NAMES,
    MCPConnection,
    MCPServer,
    MCPTool,
    StaticMCPClient,
    StaticTool,
    is_mcp_client,
    resolve_client,
)

CALC = Path(__file__).parent / "servers" / "calc_server.py"
CALC_ARGS = [str(CALC), "stdio"]
needs_sdk = pytest.mark.skipif(find_spec("mcp") is None, reason="needs the 'mcp' extra")


@tool
def read_file(path: str) -> str:
    """Read a file."""
    return f"contents of {path}"


@tool(requires_approval=True)
def delete_file(path: str) -> str:
    """Delete a file."""
    return f"deleted {path}"


def is_open(client: StaticMCPClient) -> bool:
    """Read `is_open` afresh (mypy would keep an earlier assert's narrowing)."""
    return client.is_open


def calls(*turns: Sequence[ToolCall]) -> list[list[ToolCall]]:
    """The fake model's tool calls: the given turns, then a turn that answers."""
    return [list(turn) for turn in turns] + [[]]


class Notebook:
    """An `MCPClient` of the tests' own: one tool, and a count of opens and closes."""

    def __init__(self, name: str = "notes") -> None:
        self.name = name
        self.is_open = False
        self.opened = 0
        self.closed = 0
        self._read = Tool(lambda: "buy milk", name=f"{name}__read", description="Read the note.")

    @property
    def tools(self) -> list[Tool]:
        if not self.is_open:
            raise ConfigurationError("not open")
        return [self._read]

    async def aconnect(self) -> None:
        self.opened += 1
        self.is_open = True

    async def aclose(self) -> None:
        self.closed += 1
        self.is_open = False


@pytest.fixture
def no_unawaited_coroutines() -> Iterator[None]:
    """Fail when a coroutine made during the test is collected without being awaited."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
        gc.collect()
    unawaited = [w for w in caught if "was never awaited" in str(w.message)]
    assert not unawaited, [str(w.message) for w in unawaited]


# --- the "fastmcp" client, over a real stdio server ---------------------------------------------


@needs_sdk
def test_server_names_the_server_and_prefixes_its_tools() -> None:
    bot = (
        agent()
        .llm(
            "fake",
            responses=["", "The sum is 5."],
            tool_calls=calls([ToolCall(name="fs__add", arguments={"a": 2, "b": 3})]),
        )
        .mcp(server="fs", command=sys.executable, args=CALC_ARGS)
    )
    add = bot.build().tools.get("fs__add")
    assert isinstance(add, MCPTool)
    assert add.server == "fs"
    response = bot.run("2 + 3?")
    assert response.steps[0].tool_results[0].content == "5"
    assert response.output == "The sum is 5."
    connection = add.connection
    assert isinstance(connection, MCPConnection)
    assert connection.is_open
    bot.close()
    assert not connection.is_open


@needs_sdk
def test_fastmcp_is_the_default_client() -> None:
    named = agent().llm("fake").mcp("fastmcp", command=sys.executable, args=CALC_ARGS, name="c")
    default = agent().llm("fake").mcp(command=sys.executable, args=CALC_ARGS, name="c")
    try:
        tools = [named.build().tools.get("c__add"), default.build().tools.get("c__add")]
        assert all(isinstance(t, MCPTool) for t in tools)
        assert [type(t.connection) for t in tools if isinstance(t, MCPTool)] == [MCPConnection] * 2
        assert named.build().tools.names() == default.build().tools.names()
    finally:
        named.close()
        default.close()


@needs_sdk
def test_server_and_name_may_both_be_given_when_they_agree() -> None:
    bot = (
        agent().llm("fake").mcp(server="calc", name="calc", command=sys.executable, args=CALC_ARGS)
    )
    try:
        assert "calc__add" in bot.build().tools
    finally:
        bot.close()


@needs_sdk
def test_an_mcp_server_object_is_connected_and_closed_by_the_builder(
    calc_stdio: Callable[..., MCPServer],
) -> None:
    bot = agent().llm("fake").mcp(calc_stdio(name="sums"))
    add = bot.build().tools.get("sums__add")
    assert isinstance(add, MCPTool)
    bot.close()
    assert not add.connection.is_open  # type: ignore[attr-defined]


@needs_sdk
def test_a_connection_opened_by_the_caller_stays_open_after_the_builder_closes(
    calc_stdio: Callable[..., MCPServer],
) -> None:
    with MCPConnection(calc_stdio(name="mine")) as connection:
        bot = (
            agent()
            .llm(
                "fake",
                responses=["", "4"],
                tool_calls=calls([ToolCall(name="mine__add", arguments={"a": 2, "b": 2})]),
            )
            .mcp(connection)
        )
        assert bot.run("2 + 2?").steps[0].tool_results[0].content == "4"
        bot.close()
        assert connection.is_open
    assert not connection.is_open


# --- the "static" client ------------------------------------------------------------------------


def test_a_static_tool_is_called_in_an_agent_run() -> None:
    bot = (
        agent()
        .llm(
            "fake",
            responses=["", "The notes say hello."],
            tool_calls=calls([ToolCall(name="fs__read_file", arguments={"path": "notes.txt"})]),
        )
        .mcp("static", server="fs", tools=[read_file, delete_file])
    )
    assert bot.build().tools.names() == ["fs__read_file", "fs__delete_file"]
    response = bot.run("What do the notes say?")
    result = response.steps[0].tool_results[0]
    assert (result.name, result.content, result.is_error) == (
        "fs__read_file",
        "contents of notes.txt",
        False,
    )
    assert response.output == "The notes say hello."
    bot.close()


def test_static_tools_keep_their_description_schema_and_approval() -> None:
    bot = agent().llm("fake").mcp("static", server="fs", tools=[read_file, delete_file])
    read = bot.build().tools.get("fs__read_file")
    delete = bot.build().tools.get("fs__delete_file")
    assert isinstance(read, StaticTool)
    assert isinstance(delete, StaticTool)
    assert (read.server, read.remote_name) == ("fs", "read_file")
    assert read.description == "Read a file."
    assert read.parameters == read_file.parameters
    assert (read.requires_approval, delete.requires_approval) == (False, True)
    bot.close()


async def test_static_tools_validate_as_the_tool_they_wrap_naming_themselves() -> None:
    client = await StaticMCPClient([read_file], name="fs").aconnect()
    with pytest.raises(ToolArgumentsError) as raised:
        await client.tools[0].arun(path=3)
    assert raised.value.tool == "fs__read_file"
    assert any(line.startswith("path") for line in raised.value.errors)


def test_static_without_a_name_serves_as_static() -> None:
    bot = agent().llm("fake").mcp("static", tools=[read_file])
    assert bot.build().tools.names() == ["static__read_file"]
    bot.close()


def test_the_builder_closes_the_static_client_it_made_and_its_tools_then_fail() -> None:
    bot = agent().llm("fake").mcp("static", server="fs", tools=[read_file])
    read = bot.build().tools.get("fs__read_file")
    assert isinstance(read, StaticTool)
    client = read.client
    assert client.is_open
    bot.close()
    assert not is_open(client)
    with pytest.raises(MCPToolError, match="not open") as raised:
        read.run(path="x")
    assert (raised.value.server, raised.value.tool) == ("fs", "read_file")


async def test_a_static_client_has_no_tools_before_it_opens_and_opens_once() -> None:
    client = StaticMCPClient([read_file], name="fs")
    with pytest.raises(ConfigurationError, match="not open yet"):
        _ = client.tools
    await client.aconnect()
    with pytest.raises(ConfigurationError, match="opens once"):
        await client.aconnect()
    await client.aclose()
    await client.aclose()
    assert not client.is_open


def test_static_tool_names_are_made_provider_safe_as_a_server_s_are() -> None:
    long = Tool(lambda: "", name="x" * 80, description="A long name.")
    bot = agent().llm("fake").mcp("static", server="fs", tools=[long])
    (name,) = bot.build().tools.names()
    assert name.startswith("fs__xxx")
    assert len(name) == 64
    bot.close()


# --- clients and factories of one's own ---------------------------------------------------------


def test_a_client_object_that_is_not_open_is_opened_and_closed_by_the_builder() -> None:
    notes = Notebook()
    bot = (
        agent()
        .llm(
            "fake",
            responses=["", "Buy milk."],
            tool_calls=calls([ToolCall(name="notes__read", arguments={})]),
        )
        .mcp(notes)
    )
    assert (notes.opened, notes.is_open) == (1, True)
    assert bot.run("What is on my list?").steps[0].tool_results[0].content == "buy milk"
    bot.close()
    assert notes.closed == 1


def test_a_client_object_passed_in_open_stays_the_caller_s_to_close() -> None:
    notes = Notebook()
    asyncio.run(notes.aconnect())
    bot = agent().llm("fake").mcp(notes)
    assert bot.build().tools.names() == ["notes__read"]
    bot.close()
    assert (notes.opened, notes.closed, notes.is_open) == (1, 0, True)


def test_a_factory_is_called_with_the_options_and_its_client_closed_with_the_builder() -> None:
    made: list[Notebook] = []

    def notebook(name: str) -> Notebook:
        made.append(Notebook(name))
        return made[-1]

    bot = agent().llm("fake").mcp(notebook, name="diary")
    assert bot.build().tools.names() == ["diary__read"]
    assert made[0].opened == 1
    bot.close()
    assert made[0].closed == 1


def test_a_client_class_is_a_factory() -> None:
    bot = agent().llm("fake").mcp(StaticMCPClient, tools=[read_file], name="fs")
    read = bot.build().tools.get("fs__read_file")
    assert isinstance(read, StaticTool)
    bot.close()
    assert not read.client.is_open


def test_a_name_bound_on_the_builder_names_a_client_factory() -> None:
    bot = agent().llm("fake").bind("notebook", Notebook).mcp("notebook", name="todo")
    assert bot.build().tools.names() == ["todo__read"]
    bot.close()


def test_is_mcp_client_checks_members_without_reading_them() -> None:
    assert is_mcp_client(Notebook())  # its tools raise until it opens
    assert is_mcp_client(StaticMCPClient([read_file]))
    assert not is_mcp_client(Notebook)
    assert not is_mcp_client(object())
    assert CLIENT_NAMES == ("fastmcp", "static")


# --- bad input ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "suggestion"), [("statc", "'static'"), ("fastmpc", "'fastmcp'"), ("FastMCP", None)]
)
def test_an_unknown_name_is_a_configuration_error_with_a_did_you_mean(
    spec: str, suggestion: str | None
) -> None:
    with pytest.raises(ConfigurationError, match=f"no MCP client named {spec!r}") as raised:
        agent().llm("fake").mcp(spec, tools=[read_file])
    hint = raised.value.hint or ""
    if suggestion is not None:
        assert f"Did you mean {suggestion}?" in hint
    assert "'fastmcp'" in hint
    assert "'static'" in hint


def test_static_without_tools_says_what_to_pass(no_unawaited_coroutines: None) -> None:
    bot = agent().llm("fake")
    with pytest.raises(ConfigurationError, match="needs tools=") as raised:
        bot.mcp("static")
    assert "tools=[" in (raised.value.hint or "")
    with pytest.raises(ConfigurationError, match="given no tools"):
        bot.mcp("static", server="fs", tools=[])
    with pytest.raises(ConfigurationError, match="must be a list of tools, not FunctionTool"):
        bot.mcp("static", server="fs", tools=read_file)
    bot.close()


def test_options_the_static_client_does_not_take_are_named() -> None:
    with pytest.raises(ConfigurationError, match="does not take args, command") as raised:
        agent().llm("fake").mcp("static", tools=[read_file], command="npx", args=["x"])
    assert "needs no command=" in (raised.value.hint or "")


def test_a_misspelt_server_option_gets_a_did_you_mean() -> None:
    with pytest.raises(ConfigurationError, match="does not take comand") as raised:
        agent().llm("fake").mcp(comand="npx")
    assert "Did you mean 'command'?" in (raised.value.hint or "")


@pytest.mark.parametrize(
    ("spec", "options"),
    [
        (None, {"command": "npx"}),
        ("fastmcp", {"url": "http://h/mcp"}),
        ("static", {"tools": [read_file]}),
    ],
)
def test_server_and_name_that_differ_are_a_configuration_error(
    spec: str | None, options: dict[str, object]
) -> None:
    with pytest.raises(ConfigurationError, match="server='fs' and name='files' disagree"):
        agent().llm("fake").mcp(spec, server="fs", name="files", **options)


def test_a_bad_server_name_for_static_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="not usable in tool names"):
        agent().llm("fake").mcp("static", server="my fs", tools=[read_file])


def test_two_static_tools_of_one_name_are_refused() -> None:
    other = Tool(lambda path: path, name="read_file", description="Another reader.")
    with pytest.raises(ConfigurationError, match="two tools named 'read_file'"):
        StaticMCPClient([read_file, other], name="fs")


class HalfClient:
    """Has a name and tools, but cannot connect or close: not an MCP client."""

    name = "half"
    is_open = True
    tools: ClassVar[list[Tool]] = []


@pytest.mark.parametrize("spec", [42, HalfClient(), b"static"])
def test_an_object_that_is_not_a_client_is_a_configuration_error(spec: object) -> None:
    with pytest.raises(ConfigurationError, match=f"Cannot use {type(spec).__name__} as an MCP"):
        agent().llm("fake").mcp(spec)  # type: ignore[arg-type]


def test_a_factory_that_returns_no_client_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="HalfClient returned HalfClient, which is not"):
        agent().llm("fake").mcp(HalfClient)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="returned HalfClient, which is not an MCP client"):
        resolve_client(HalfClient)  # type: ignore[arg-type]


def test_a_factory_given_options_it_does_not_take_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="Bad option"):
        agent().llm("fake").mcp(Notebook, colour="blue")


def test_options_with_a_client_object_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="made already: server"):
        resolve_client(Notebook(), server="x")


@needs_sdk
def test_options_with_an_mcp_server_are_refused(calc_stdio: Callable[..., MCPServer]) -> None:
    with pytest.raises(ConfigurationError, match="Options were given with MCPServer 'calc'"):
        agent().llm("fake").mcp(calc_stdio(), server="other")


def test_an_mcp_connection_refuses_a_name_for_a_server(no_unawaited_coroutines: None) -> None:
    with pytest.raises(ConfigurationError, match="takes an MCPServer, not str") as raised:
        MCPConnection("static")  # type: ignore[arg-type]
    assert "resolve_client" in (raised.value.hint or "")


def test_a_bad_spec_leaves_no_coroutine_unawaited(no_unawaited_coroutines: None) -> None:
    bot = agent().llm("fake")
    for spec in ("static", "nope", 42):
        with pytest.raises(ConfigurationError):
            bot.mcp(spec)  # type: ignore[arg-type]
    bot.close()


def test_the_static_client_needs_no_mcp_sdk() -> None:
    script = textwrap.dedent(
        """
        import sys
        sys.modules["mcp"] = None  # as if the 'mcp' extra were not installed
        from tidemill import ToolCall, agent, tool

        @tool
        def ping() -> str:
            '''Answer pong.'''
            return "pong"

        call = ToolCall(name="net__ping", arguments={})
        bot = agent().llm("fake", responses=["", "ok"], tool_calls=[[call], []])
        bot.mcp("static", server="net", tools=[ping])
        print(bot.run("ping?").steps[0].tool_results[0].content)
        bot.close()
        """
    )
    done = subprocess.run(
        [sys.executable, "-W", "error", "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "pong"
