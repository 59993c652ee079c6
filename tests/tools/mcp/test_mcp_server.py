"""MCPServer: validation, derived names, and messages without secrets."""

from __future__ import annotations

import pytest

from tidemill.errors import ConfigurationError
from tidemill.tools.mcp import MCPServer


def test_a_stdio_server() -> None:
    server = MCPServer(command="npx", args=["-y", "@acme/mcp-files"], env={"TOKEN": "s3cret"})
    assert (server.transport, server.name) == ("stdio", "mcp-files")
    assert server.args == ("-y", "@acme/mcp-files")
    assert server.target == "npx -y @acme/mcp-files"
    assert "s3cret" not in repr(server)


def test_an_http_server() -> None:
    server = MCPServer(url="https://u:pw@mcp.acme.dev:8443/mcp?key=k", headers={"X-Key": "k"})
    assert (server.transport, server.name) == ("http", "mcp_acme_dev_8443")
    assert server.target == "https://mcp.acme.dev:8443/mcp"
    assert (
        repr(server)
        == "MCPServer(name='mcp_acme_dev_8443', target='https://mcp.acme.dev:8443/mcp')"
    )


def test_an_explicit_name_must_be_usable_in_tool_names() -> None:
    assert MCPServer(command="x", name="my-fs_2").name == "my-fs_2"
    with pytest.raises(ConfigurationError, match="not usable in tool names"):
        MCPServer(command="x", name="my fs")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({}, "either command= .* or url="),
        ({"command": "x", "url": "http://h/mcp"}, "either command= .* or url="),
        ({"command": " "}, "must not be empty"),
        ({"command": "x", "args": "-y pkg"}, "must be a list of strings"),
        ({"command": "x", "headers": {"a": "b"}}, "headers= applies to HTTP servers"),
        ({"command": "x", "cwd": "/no/such/dir"}, "does not exist"),
        ({"url": "ftp://h/mcp"}, "must be http:// or https://"),
        ({"url": "http://h:99999/mcp"}, "invalid port"),
        ({"url": "http://h/mcp", "env": {"A": "1"}}, "apply to servers started with command="),
        ({"command": "x", "connect_timeout": 0}, "connect_timeout must be"),
        ({"command": "x", "call_timeout": -1}, "call_timeout must be"),
    ],
)
def test_mistakes_are_caught_where_they_are_made(options: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        MCPServer(**options)  # type: ignore[arg-type]


def test_approval_for_all_or_some_tools() -> None:
    assert MCPServer(command="x", requires_approval=True).needs_approval("anything")
    some = MCPServer(command="x", requires_approval=["delete"])
    assert some.needs_approval("delete") and not some.needs_approval("read")
    assert not MCPServer(command="x").needs_approval("delete")


def test_the_public_api_is_complete_and_needs_no_sdk_to_import() -> None:
    import tidemill.tools.mcp as mcp_tools

    exported = set(mcp_tools.__all__)
    assert all(hasattr(mcp_tools, name) for name in exported)
    public = {
        name
        for name, value in vars(mcp_tools).items()
        if not name.startswith("_")
        and str(getattr(value, "__module__", "")).startswith("tidemill.tools.mcp")
    }
    assert public <= exported
    assert {"MCPConnection", "MCPServer", "MCPTool", "connect_mcp"} <= exported
