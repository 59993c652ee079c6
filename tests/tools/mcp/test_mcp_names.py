"""Server names from commands and URLs, and provider-safe tool names."""

from __future__ import annotations

import re

import pytest

from tidemill.tools.mcp import tool_names
from tidemill.tools.mcp._names import server_name_from_command, server_name_from_url

VALID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


@pytest.mark.parametrize(
    ("command", "args", "name"),
    [
        ("npx", ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"], "server-filesystem"),
        ("uvx", ["mcp-server-fetch"], "mcp-server-fetch"),
        ("uvx", ["mcp-server-git@1.2.0", "--repository", "."], "mcp-server-git"),
        ("uv", ["run", "server.py"], "server"),
        ("python3.12", ["-m", "weather.server", "--verbose"], "weather_server"),
        ("python", ["-c", "print(1)"], "python"),
        ("node", ["build/index.js"], "index"),
        ("docker", ["run", "-i", "--rm", "ghcr.io/github/github-mcp-server"], "github-mcp-server"),
        ("/opt/bin/linear-mcp", ["--stdio"], "linear-mcp"),
        ("C:\\tools\\files.exe", [], "files"),
        ("npx", [], "npx"),
    ],
)
def test_server_names_come_from_what_the_command_runs(
    command: str, args: list[str], name: str
) -> None:
    assert server_name_from_command(command, args) == name


@pytest.mark.parametrize(
    ("url", "name"),
    [
        ("https://mcp.linear.app/sse", "mcp_linear_app"),
        ("https://www.example.com/mcp?key=1", "example_com"),
        ("http://localhost:8000/mcp", "localhost_8000"),
        ("http://[::1]:9000/mcp", "1_9000"),
    ],
)
def test_server_names_come_from_the_url_host(url: str, name: str) -> None:
    assert server_name_from_url(url) == name


def test_tool_names_are_namespaced_and_valid_for_providers() -> None:
    names = tool_names("fs", ["read_file", "list dir", "ünïcode", "a/b:c"])
    assert names == {
        "read_file": "fs__read_file",
        "list dir": "fs__list_dir",
        "ünïcode": "fs___n_code",
        "a/b:c": "fs__a_b_c",
    }
    assert all(VALID.match(name) for name in names.values())


def test_long_names_are_shortened_stably_and_stay_distinct() -> None:
    long_a, long_b = "get_" + "x" * 70 + "_a", "get_" + "x" * 70 + "_b"
    first = tool_names("server", [long_a, long_b])
    assert first == tool_names("server", [long_b, long_a])  # order does not matter
    assert all(len(name) == 64 and VALID.match(name) for name in first.values())
    assert first[long_a] != first[long_b]
    assert first[long_a].startswith("server__get_xxx")


def test_names_that_would_collide_each_get_a_hash() -> None:
    names = tool_names("fs", ["read.file", "read_file", "write"])
    assert names["write"] == "fs__write"
    assert names["read.file"] != names["read_file"]
    assert all(
        re.match(r"^fs__read_file_[0-9a-f]{8}$", names[n]) for n in ("read.file", "read_file")
    )
