"""`mcp` tools of an `ai_agent` step: the tools of an MCP server, for one attempt of the step.

The step connects when it starts and disconnects when it ends (the
connection is entered on the step's exit stack). The server's tools are
named `<tool name>__<server tool>`; `tools` narrows them to a list. A call
cut short by a crash runs again when the step resumes, like any tool whose
`idempotent` is true (the default); with `idempotent: false` a person
confirms it first.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from contextlib import AsyncExitStack

from tidemill.errors import ConfigurationError, MissingCredentialsError
from tidemill.flows import AgentToolSpec
from tidemill.tools import Tool

__all__ = ["mcp_tools", "resolve_env"]


def resolve_env(values: Mapping[str, str], *, where: str) -> dict[str, str]:
    """Values with `env:NAME` replaced by the worker's variable `NAME`.

    Raises:
        MissingCredentialsError: A named variable is not set.

    Examples:
        >>> import os
        >>> os.environ["TM_DOC_TOKEN"] = "s3cret"
        >>> resolve_env({"Authorization": "env:TM_DOC_TOKEN", "X-Team": "ops"}, where="t")
        {'Authorization': 's3cret', 'X-Team': 'ops'}
    """
    resolved: dict[str, str] = {}
    for key, value in values.items():
        if value.startswith("env:"):
            name = value.removeprefix("env:")
            found = os.environ.get(name)
            if found is None:
                raise MissingCredentialsError(
                    f"{where} reads {key} from ${name}, which is not set on this worker.",
                    hint=f"Set {name} in the worker's environment.",
                    context={"env": [name]},
                )
            value = found
        resolved[key] = value
    return resolved


async def mcp_tools(spec: AgentToolSpec, stack: AsyncExitStack) -> list[Tool]:
    """Connect to an `mcp` tool's server (closed with `stack`) and return its tools.

    Raises:
        MissingDependencyError: The `mcp` extra is not installed.
        MCPConnectionError: The server could not be started or reached.
        MissingCredentialsError: An `env:NAME` value names an unset variable.
        ConfigurationError: `tools` names a tool the server does not have.
    """
    from tidemill.tools.mcp import MCPConnection, MCPServer

    settings = spec.mcp
    assert settings is not None
    where = f"The MCP tool {spec.name!r}"
    server = MCPServer(
        command=settings.command,
        args=settings.args,
        env=resolve_env(settings.env, where=where) if settings.env else None,
        url=settings.url,
        headers=resolve_env(settings.headers, where=where) if settings.headers else None,
        name=spec.name,
        connect_timeout=settings.connect_timeout,
        call_timeout=settings.call_timeout,
        requires_approval=spec.requires_approval,
    )
    connection = await stack.enter_async_context(MCPConnection(server))
    tools = list(connection.tools)
    if settings.tools is None:
        return list(tools)
    offered = {tool.remote_name: tool for tool in tools}
    unknown = [name for name in settings.tools if name not in offered]
    if unknown:
        raise ConfigurationError(
            f"{where} lists {', '.join(map(repr, unknown))}, which its server does not offer.",
            hint=f"The server offers: {', '.join(sorted(offered)) or 'no tools'}.",
        )
    return [offered[name] for name in settings.tools]
