"""`resolve_client`: a name, a server, a client or a factory, made into an `MCPClient`.

Nothing connects here: the caller opens what it gets (`await client.aconnect()`)
and closes what it opened. `AgentBuilder.mcp` is the main caller.
"""

from __future__ import annotations

import difflib
from typing import Any, cast, get_args

from tidemill.errors import ConfigurationError
from tidemill.tools.mcp._client import MCPClient, MCPClientName, MCPClientSpec, is_mcp_client
from tidemill.tools.mcp._connection import MCPConnection
from tidemill.tools.mcp._server import MCPServer, MCPServerOptions
from tidemill.tools.mcp._static import StaticMCPClient

__all__ = ["CLIENT_NAMES", "resolve_client"]

CLIENT_NAMES: tuple[MCPClientName, ...] = get_args(MCPClientName)
"""Tidemill's own client names, which `resolve_client` takes as `spec`."""

_SERVER_OPTIONS = frozenset(MCPServerOptions.__optional_keys__) | {"server"}
_STATIC_OPTIONS = frozenset({"tools", "name", "server"})


def resolve_client(spec: MCPClientSpec | None = None, /, **options: Any) -> MCPClient:
    """Make the `MCPClient` that `spec` and `options` describe; it is not open yet.

    Args:
        spec: What client:

            - omitted or `"fastmcp"`: an `MCPConnection` over the official
              SDK, to the server the options describe (`command=`/`args=`/
              `env=`/`cwd=` for stdio, `url=`/`headers=` for HTTP, and the
              other fields of `MCPServer`);
            - an `MCPServer`: an `MCPConnection` to it;
            - `"static"`: a `StaticMCPClient` serving `tools=`;
            - an `MCPClient`: itself, taking no options;
            - a factory (a client class, or any callable returning a
              client): its result, called with the options.
        **options: For the built-in clients, `server=` (or `name=`) names the
            server, the prefix of its tools' names.

    Raises:
        ConfigurationError: For an unknown name (with a did-you-mean),
            options that do not apply, `server=` and `name=` that differ,
            `"static"` without tools, a factory returning something else, or
            anything that names no client.

    Examples:
        >>> from tidemill import tool
        >>> @tool
        ... def read_file(path: str) -> str:
        ...     '''Read a file.'''
        ...     return path
        >>> resolve_client("static", server="fs", tools=[read_file])
        StaticMCPClient(name='fs', tools=1, new)
        >>> resolve_client(server="fs", command="npx", args=["-y", "server-filesystem"])
        MCPConnection(name='fs', target='npx -y server-filesystem', new)
        >>> resolve_client("fastmc", command="npx")
        Traceback (most recent call last):
        ...
        tidemill.errors.ConfigurationError: There is no MCP client named 'fastmc'. Hint: Did you ...
    """
    if spec is None or spec == "fastmcp":
        return MCPConnection(**_server_options(options, client="fastmcp"))
    if isinstance(spec, MCPServer):
        if options:
            raise ConfigurationError(
                f"Options were given with MCPServer {spec.name!r}: {', '.join(sorted(options))}.",
                hint="Set them on the MCPServer, or pass only the options and no MCPServer.",
                context={"options": sorted(options)},
            )
        return MCPConnection(spec)
    if spec == "static":
        return _static(options)
    if isinstance(spec, str):
        raise _unknown_name(spec)
    if is_mcp_client(spec):
        if options:
            raise ConfigurationError(
                f"Options were given with the MCP client {spec.name!r}, which is made already: "
                f"{', '.join(sorted(options))}.",
                hint="Configure the client when you create it, or pass its factory "
                "(its class) with the options instead.",
                context={"options": sorted(options)},
            )
        return spec
    if callable(spec):
        made = spec(**options)
        if not is_mcp_client(made):
            raise ConfigurationError(
                f"The MCP client factory {_label(spec)} returned {type(made).__name__}, "
                "which is not an MCP client.",
                hint="Return an object with name, is_open, tools, aconnect() and aclose() "
                "(see tidemill.tools.mcp.MCPClient).",
            )
        return made
    raise ConfigurationError(
        f"Cannot use {type(spec).__name__} as an MCP client.",
        hint="Pass 'fastmcp' (or nothing) with command= or url=, 'static' with tools=, "
        "an MCPServer, an MCPClient object, or a factory returning one.",
    )


def _server_options(options: dict[str, Any], *, client: str) -> MCPServerOptions:
    """The options of an `MCPServer`, with `server=` taken as `name=`."""
    unknown = sorted(set(options) - _SERVER_OPTIONS)
    if unknown:
        raise ConfigurationError(
            f"The {client!r} MCP client does not take {', '.join(unknown)}.",
            hint=_did_you_mean(unknown, _SERVER_OPTIONS)
            + f"It takes: {', '.join(sorted(_SERVER_OPTIONS))}.",
            context={"options": unknown},
        )
    named = dict(options)
    if "server" in named:
        named["name"] = _one_name(named.pop("server"), named.get("name"))
    return cast(MCPServerOptions, named)


def _static(options: dict[str, Any]) -> StaticMCPClient:
    unknown = sorted(set(options) - _STATIC_OPTIONS)
    if unknown:
        raise ConfigurationError(
            f"The 'static' MCP client does not take {', '.join(unknown)}.",
            hint=_did_you_mean(unknown, _STATIC_OPTIONS)
            + "It takes tools= and server= (or name=): it runs no server, so it needs no "
            "command= or url=.",
            context={"options": unknown},
        )
    if "tools" not in options:
        raise ConfigurationError(
            "The 'static' MCP client needs tools=, the tools it serves.",
            hint="Pass them as a list: .mcp('static', server='fs', tools=[read_file, write_file]).",
        )
    name = _one_name(options.get("server"), options.get("name"))
    if name is None:
        return StaticMCPClient(options["tools"])
    return StaticMCPClient(options["tools"], name=name)


def _one_name(server: str | None, name: str | None) -> str | None:
    """The server's name given as `server=` or `name=`, which must agree when both are given."""
    if server is not None and name is not None and server != name:
        raise ConfigurationError(
            f"server={server!r} and name={name!r} disagree; they are the same setting.",
            hint="Pass one of them: server= or name=.",
            context={"server": server, "name": name},
        )
    return server if server is not None else name


def _unknown_name(spec: str) -> ConfigurationError:
    return ConfigurationError(
        f"There is no MCP client named {spec!r}.",
        hint=_did_you_mean([spec], CLIENT_NAMES)
        + "Tidemill's own are 'fastmcp' (the default, with command= or url=) and 'static' "
        "(with tools=); on an agent builder, .bind(name, factory) adds one.",
        context={"spec": spec, "names": list(CLIENT_NAMES)},
    )


def _did_you_mean(wrong: list[str], right: tuple[str, ...] | frozenset[str]) -> str:
    close = [m for name in wrong for m in difflib.get_close_matches(name, sorted(right), n=1)]
    return f"Did you mean {', '.join(map(repr, close))}? " if close else ""


def _label(factory: object) -> str:
    return str(getattr(factory, "__qualname__", None) or type(factory).__name__)
