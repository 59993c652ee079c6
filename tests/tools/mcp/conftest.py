"""Real MCP servers for the tests: the calc server over stdio, and over streamable HTTP."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tidemill.tools.mcp import MCPServer

# The servers are programs the tests start, not tests (nor doctests).
collect_ignore_glob = ["servers/*"]
try:
    import mcp  # noqa: F401
except ImportError:  # without the 'mcp' extra, test only what needs no SDK
    collect_ignore_glob += [
        "test_mcp_connection.py",
        "test_mcp_connect_errors.py",
        "test_mcp_sync.py",
        "test_mcp_tool.py",
    ]

CALC = Path(__file__).parent / "servers" / "calc_server.py"


@pytest.fixture(scope="session")
def calc_stdio() -> Callable[..., MCPServer]:
    """Describe the calc server, started as a subprocess speaking stdio."""

    def describe(name: str = "calc", **options: Any) -> MCPServer:
        return MCPServer(command=sys.executable, args=[str(CALC), "stdio"], name=name, **options)

    return describe


@pytest.fixture(scope="session")
def calc_http_url() -> Iterator[str]:
    """The URL of one calc server over streamable HTTP, shared by the whole session."""
    process = subprocess.Popen(
        [sys.executable, str(CALC), "http"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.startswith("PORT "), f"the HTTP server did not start: {line!r}"
        yield f"http://127.0.0.1:{int(line.split()[1])}/mcp"
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stdout is not None:
            process.stdout.close()
    assert process.returncode is not None
