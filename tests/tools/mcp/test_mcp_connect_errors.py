"""A server that cannot be started, reached or initialised is a typed error, quickly."""

from __future__ import annotations

import asyncio
import socket
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from tidemill.errors import ConfigurationError, MCPConnectionError, MissingDependencyError
from tidemill.tools.mcp import MCPConnection, MCPServer, connect_mcp


@contextmanager
def within(seconds: float) -> Iterator[None]:
    started = time.monotonic()
    yield
    assert time.monotonic() - started < seconds


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_a_command_that_does_not_exist() -> None:
    with within(2), pytest.raises(MCPConnectionError) as raised:
        await connect_mcp(command="tidemill-no-such-mcp-server", args=["--stdio"])
    error = raised.value
    assert isinstance(error, ConfigurationError)
    assert error.message == (
        "Could not connect to MCP server 'tidemill-no-such-mcp-server' "
        "(tidemill-no-such-mcp-server --stdio): "
        "command 'tidemill-no-such-mcp-server' was not found."
    )
    assert error.hint is not None and "PATH" in error.hint
    assert (error.server, error.target) == (
        "tidemill-no-such-mcp-server",
        "tidemill-no-such-mcp-server --stdio",
    )


async def test_a_process_that_exits_at_once_shows_its_stderr() -> None:
    script = "import sys; print('Error: GITHUB_TOKEN is not set', file=sys.stderr); sys.exit(2)"
    with within(5), pytest.raises(MCPConnectionError) as raised:
        await connect_mcp(command=sys.executable, args=["-c", script], name="github")
    error = raised.value
    assert error.server == "github"
    assert "exited, or closed its stdout, before the MCP handshake finished" in error.reason
    assert error.stderr == "Error: GITHUB_TOKEN is not set"
    assert "Its stderr ended with:\nError: GITHUB_TOKEN is not set" in str(error)


async def test_a_process_that_never_answers_times_out() -> None:
    # Reads stdin until it closes, so it stops as soon as the client gives up.
    script = "import sys; sys.stdin.read()"
    with within(5), pytest.raises(MCPConnectionError) as raised:
        await connect_mcp(command=sys.executable, args=["-c", script], connect_timeout=0.5)
    assert raised.value.reason == "no answer to the MCP handshake within 0.5 s"
    assert "connect_timeout" in str(raised.value.hint)


async def test_an_http_url_with_nothing_listening() -> None:
    url = f"http://127.0.0.1:{free_port()}/mcp?token=secret"
    with within(5), pytest.raises(MCPConnectionError) as raised:
        await connect_mcp(url=url, headers={"Authorization": "Bearer secret"}, name="docs")
    error = raised.value
    assert error.reason.startswith("could not reach it (ConnectError")
    assert error.target == url.split("?")[0]
    assert "secret" not in str(error) and "secret" not in repr(error.context)


async def test_an_http_error_status_is_named(calc_http_url: str) -> None:
    wrong = calc_http_url.replace("/mcp", "/nothing-here")
    with within(5), pytest.raises(MCPConnectionError) as raised:
        await connect_mcp(url=wrong)
    assert raised.value.status_code == 404
    assert raised.value.reason == "the server answered HTTP 404 Not Found"
    assert "/mcp" in str(raised.value.hint)


async def test_approval_for_a_tool_the_server_lacks_is_refused(calc_http_url: str) -> None:
    with pytest.raises(MCPConnectionError, match="does not have: ad") as raised:
        await connect_mcp(url=calc_http_url, requires_approval=["ad", "crash"])
    assert "Did you mean add?" in str(raised.value.hint)


async def test_a_missing_sdk_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "mcp", None)  # makes `import mcp` fail
    with pytest.raises(MissingDependencyError) as raised:
        await connect_mcp(command="anything")
    assert "pip install 'tidemill[mcp]'" in str(raised.value)
    # Describing a server needs no SDK.
    assert MCPServer(command="anything").name == "anything"


async def test_a_failed_connection_cannot_be_used() -> None:
    connection = MCPConnection(command="tidemill-no-such-mcp-server")
    with pytest.raises(MCPConnectionError):
        await connection.aconnect()
    assert not connection.is_open
    assert connection.tools == ()
    await connection.aclose()


async def test_cancelling_a_connect_stops_the_server_process() -> None:
    script = "import sys; sys.stdin.read()"
    connection = MCPConnection(command=sys.executable, args=["-c", script], connect_timeout=30)
    with within(5):
        task = asyncio.create_task(connection.aconnect())
        await asyncio.sleep(0.3)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert not connection.is_open
    assert connection._runner is not None and connection._runner.done()
