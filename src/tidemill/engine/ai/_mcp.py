"""`mcp` tools of an `ai_agent` step: the tools of an MCP server, for one attempt of the step.

The step connects when it starts and disconnects when it ends (the
connection is entered on the step's exit stack). The server's tools are
named `<tool name>__<server tool>`; `tools` narrows them to a list. A call
cut short by a crash runs again when the step resumes, like any tool whose
`idempotent` is true (the default); with `idempotent: false` a person
confirms it first.

A tool written `mcp: {resource: $res:f/<folder>/<name>}` takes its server
(`command`, `args`, `env` or `url`, `headers`) from that workspace resource
(of type `mcp_server`), read with its `$var:` values resolved as the run's
identity when the step starts; the secrets in it are masked like the job's.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AsyncExitStack
from typing import Any

from pydantic import ValidationError

from tidemill.engine._step_env import Secrets
from tidemill.errors import ConfigurationError, MissingCredentialsError
from tidemill.flows import AgentToolSpec, MCPTools
from tidemill.tools import Tool

Resolve = Callable[[Any], Awaitable[tuple[Any, set[str]]]]
"""Resolves `$var:`/`$res:` references as the run's identity: the value, and its secrets."""

__all__ = ["from_resource", "mcp_tools", "resolve_env"]


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


async def from_resource(
    spec: AgentToolSpec, resolve: Resolve | None, secrets: Secrets | None
) -> MCPTools:
    """An `mcp` tool's settings with its `resource` read in (as is when it names none).

    Raises:
        UnresolvedReference: The run's identity may not read the resource
            (or a `$var:` in it).
        ConfigurationError: Nothing here reads the workspace, or the resource
            holds no MCP server.
    """
    settings = spec.mcp
    assert settings is not None
    reference = settings.resource
    if reference is None:
        return settings
    where = f"The MCP tool {spec.name!r}"
    if resolve is None:
        raise ConfigurationError(
            f"{where} names the resource {reference}, and nothing here reads the workspace.",
            hint="Run the flow from the workspace on a worker (engine.submit_path, tidemill "
            "run f/<folder>/<flow>), so the resource is read as the run's identity.",
            context={"tool": spec.name, "resource": reference},
        )
    value, found = await resolve(reference)
    if secrets is not None:
        secrets.add(found)
    own = settings.model_dump(include={"tools", "connect_timeout", "call_timeout"})
    try:
        if not isinstance(value, Mapping):
            raise ValueError("not a mapping")
        return MCPTools.model_validate({**value, **own})
    except (ValidationError, ValueError):
        raise ConfigurationError(
            f"{where} names {reference}, which holds no MCP server.",
            hint="Name a resource of type mcp_server: a command (with args, env) or a url "
            "(with headers).",
            context={"tool": spec.name, "resource": reference},
        ) from None


async def mcp_tools(
    spec: AgentToolSpec,
    stack: AsyncExitStack,
    *,
    resolve: Resolve | None = None,
    secrets: Secrets | None = None,
) -> list[Tool]:
    """Connect to an `mcp` tool's server (closed with `stack`) and return its tools.

    Args:
        spec: The tool.
        stack: Where the connection is entered.
        resolve: Reads a `resource` the tool names, as the run's identity.
        secrets: The job's secrets, which those of the resource join.

    Raises:
        MissingDependencyError: The `mcp` extra is not installed.
        MCPConnectionError: The server could not be started or reached.
        MissingCredentialsError: An `env:NAME` value names an unset variable.
        ConfigurationError: `tools` names a tool the server does not have;
            a `resource` that cannot be read here or holds no server.
        UnresolvedReference: A `resource` the run's identity may not read.
    """
    from tidemill.tools.mcp import MCPConnection, MCPServer

    settings = await from_resource(spec, resolve, secrets)
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
