"""Names: a server's default name, and the provider-safe names of its tools."""

from __future__ import annotations

import hashlib
import posixpath
import re
from collections.abc import Iterable, Sequence
from urllib.parse import urlsplit

__all__ = ["MAX_TOOL_NAME", "server_name_from_command", "server_name_from_url", "tool_names"]

MAX_TOOL_NAME = 64
"""The longest tool name the major providers accept."""

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")
# Programs that run the server named by their first argument: name the server after that.
_LAUNCHERS = frozenset(
    {
        "bun",
        "bunx",
        "deno",
        "docker",
        "node",
        "npm",
        "npx",
        "pipx",
        "pnpm",
        "podman",
        "python",
        "python3",
        "uv",
        "uvx",
        "yarn",
    }
)
# Subcommands of the launchers above that come before the server's name.
_SUBCOMMANDS = frozenset({"dlx", "exec", "run", "tool", "x"})
_SCRIPT_SUFFIXES = (".py", ".js", ".mjs", ".cjs", ".ts", ".exe", ".cmd", ".bat")


def safe_name(text: str) -> str:
    """Replace every run of characters providers reject with `_`."""
    return _UNSAFE.sub("_", text).strip("_")


def server_name_from_command(command: str, args: Sequence[str]) -> str:
    """Name a stdio server after what it runs: `npx -y @scope/server-fs .` is `server-fs`.

    Examples:
        >>> server_name_from_command("npx", ["-y", "@modelcontextprotocol/server-filesystem", "."])
        'server-filesystem'
        >>> server_name_from_command("python", ["-m", "weather.server"])
        'weather_server'
        >>> server_name_from_command("/usr/local/bin/github-mcp", ["stdio"])
        'github-mcp'
    """
    program = _stem(command)
    if _launcher(program):
        for position, arg in enumerate(args):
            if arg in ("-c", "-e", "--eval"):  # inline code: nothing to name it after
                break
            if arg == "-m" and position + 1 < len(args):
                return safe_name(args[position + 1]) or "mcp"
            if arg.startswith("-") or arg in _SUBCOMMANDS:
                continue
            return safe_name(_stem(arg)) or "mcp"
    return safe_name(program) or "mcp"


def server_name_from_url(url: str) -> str:
    """Name an HTTP server after its host, and its port when the URL gives one.

    Examples:
        >>> server_name_from_url("https://www.example.com/mcp?key=secret")
        'example_com'
        >>> server_name_from_url("http://127.0.0.1:8000/mcp")
        '127_0_0_1_8000'
    """
    parts = urlsplit(url)
    host = (parts.hostname or "").removeprefix("www.")
    try:
        port = parts.port
    except ValueError:
        port = None
    if port is not None:
        host = f"{host}_{port}"
    return safe_name(host) or "mcp"


def tool_names(server: str, tools: Iterable[str]) -> dict[str, str]:
    """Map each of a server's tool names to the name the model sees: `{server}__{tool}`.

    Characters providers reject become `_`. A name longer than 64 characters
    is cut and ends in a short hash of the full name, and so does every name
    that would otherwise collide with another; the same inputs always give
    the same names.

    Examples:
        >>> tool_names("fs", ["read_file", "write.file"])
        {'read_file': 'fs__read_file', 'write.file': 'fs__write_file'}
        >>> sorted(tool_names("fs", ["read_file", "read.file"]).values())
        ['fs__read_file_3d6b9878', 'fs__read_file_e5c358f7']
        >>> len(tool_names("fs", ["x" * 80])["x" * 80])
        64
    """
    wanted = {tool: _fit(f"{server}__{tool}") for tool in tools}
    counts: dict[str, int] = {}
    for name in wanted.values():
        counts[name] = counts.get(name, 0) + 1
    return {
        tool: name if counts[name] == 1 else _with_hash(name, f"{server}__{tool}")
        for tool, name in wanted.items()
    }


def _fit(raw: str) -> str:
    name = _UNSAFE.sub("_", raw)
    return name if len(name) <= MAX_TOOL_NAME else _with_hash(name, raw)


def _with_hash(name: str, raw: str) -> str:
    digest = hashlib.sha256(raw.encode()).hexdigest()[:8]
    return f"{name[: MAX_TOOL_NAME - len(digest) - 1]}_{digest}"


def _stem(path: str) -> str:
    base = posixpath.basename(path.replace("\\", "/").rstrip("/"))
    base = base.rsplit("@", 1)[0] if base.count("@") == 1 and not base.startswith("@") else base
    for suffix in _SCRIPT_SUFFIXES:
        if base.lower().endswith(suffix):
            return base[: -len(suffix)]
    return base


def _launcher(program: str) -> bool:
    # python3.12, node18 and the like are launchers too.
    return program.lower().rstrip("0123456789.") in _LAUNCHERS
