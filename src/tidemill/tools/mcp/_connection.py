"""`MCPConnection`: one live session with an MCP server, and its tools."""

from __future__ import annotations

import asyncio
import difflib
import logging
import threading
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AsyncExitStack
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, Self, TypeVar, Unpack

from pydantic import JsonValue

from tidemill._sync import LoopThread
from tidemill._version import __version__
from tidemill.errors import ConfigurationError, MCPConnectionError, MCPToolError
from tidemill.tools.mcp import _sdk
from tidemill.tools.mcp._diagnose import Failure, connection_error
from tidemill.tools.mcp._names import tool_names
from tidemill.tools.mcp._result import MCPResult
from tidemill.tools.mcp._server import MCPServer, MCPServerOptions
from tidemill.tools.mcp._stderr import StderrPump
from tidemill.tools.mcp._tool import MCPTool, describe, input_schema

if TYPE_CHECKING:
    from mcp import ClientSession

__all__ = ["MCPConnection", "connect_mcp"]

_log = logging.getLogger("tidemill.tools.mcp")
T = TypeVar("T")
_State = Literal["new", "connecting", "open", "closed"]
_MAX_PAGES = 1000
FORWARD_START_TIMEOUT = 10.0
"""Seconds a call made on another loop may wait for the connection's loop to take it."""


async def connect_mcp(
    server: MCPServer | None = None, /, **options: Unpack[MCPServerOptions]
) -> MCPConnection:
    """Connect to an MCP server and list its tools; close the connection with `aclose()`.

    Args:
        server: The server; or describe it with the keyword arguments of `MCPServer`.
        **options: `command=`, `args=`, `env=`, `cwd=`, `url=`, `headers=`, `name=`, ...

    Raises:
        MCPConnectionError: When the server cannot be started, reached or initialised.
        MissingDependencyError: When the `mcp` package is not installed.

    Examples:
        ```python
        calc = await connect_mcp(command="python", args=["calc_server.py"], name="calc")
        try:
            await agent().llm("openai:gpt-4o-mini").tool(*calc.tools).arun("What is 2 + 3?")
        finally:
            await calc.aclose()
        ```
    """
    return await MCPConnection(server, **options).aconnect()


class MCPConnection:
    """A session with one MCP server; its tools are Tidemill tools.

    Open it on the event loop that will run the agent: `async with
    MCPConnection(...)`, `await connect_mcp(...)` or `await aconnect()`. It
    starts or reaches the server, initialises the session and lists the tools
    (every page) within `connect_timeout`, or raises `MCPConnectionError`.
    `aclose()` ends the session and stops the server process.

    The session lives in a task of its own on the loop that opened it, so any
    task of that loop may call the tools or close the connection. A call made
    on another loop is forwarded to the connection's loop while that loop
    runs, which is what `connect()` relies on: it opens the connection on a
    private loop thread, for code without an event loop (and for agents run
    with the blocking `run()`, whose loop is a thread of their own).

    Args:
        server: The server; or describe it with the keyword arguments of `MCPServer`.
        **options: `command=`, `args=`, `env=`, `cwd=`, `url=`, `headers=`, `name=`, ...

    Examples:
        ```python
        async with MCPConnection(url="http://localhost:8000/mcp", name="docs") as docs:
            print([tool.name for tool in docs.tools])  # ['docs__search', ...]
            bot = agent().llm("openai:gpt-4o-mini").tool(*docs.tools)
            print(await bot.arun("How do I rotate a key?"))
        ```
    """

    def __init__(
        self, server: MCPServer | None = None, /, **options: Unpack[MCPServerOptions]
    ) -> None:
        given: object = server  # untyped callers pass names: say so now, not on aconnect()
        if server is None:
            server = MCPServer(**options)
        elif not isinstance(given, MCPServer):
            raise ConfigurationError(
                f"MCPConnection takes an MCPServer, not {type(given).__name__}.",
                hint="Describe the server with command= or url=; for a client by name "
                "('fastmcp', 'static'), use resolve_client().",
            )
        elif options:
            raise ConfigurationError(
                "Pass an MCPServer or its keyword arguments, not both.",
                context={"options": sorted(options)},
            )
        self.server = server
        """What this connection connects to."""
        self.server_info: dict[str, JsonValue] = {}
        """The server's `serverInfo` (`name`, `version`) from the handshake."""
        self.instructions: str | None = None
        """The server's instructions for the model, when it gives any."""
        self._state: _State = "new"
        self._tools: tuple[MCPTool, ...] = ()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: asyncio.Task[None] | None = None
        self._closing: asyncio.Event | None = None
        self._session: ClientSession | None = None
        self._lost: BaseException | None = None
        self._thread: LoopThread | None = None
        self._deadline: asyncio.Timeout | None = None

    @property
    def name(self) -> str:
        """The server's name: the prefix of its tools' names."""
        return self.server.name

    @property
    def tools(self) -> tuple[MCPTool, ...]:
        """The server's tools, named `{server}__{tool}`.

        Raises:
            ConfigurationError: Before the connection has opened.
        """
        if self._state in ("new", "connecting"):
            raise ConfigurationError(
                f"MCP connection {self.name!r} is not open yet, so it has no tools.",
                hint="Open it first: await connection.aconnect(), or async with connection.",
            )
        return self._tools

    @property
    def is_open(self) -> bool:
        """Whether the session is up: opened, not closed, and not lost."""
        return self._state == "open" and self._lost is None

    # -- lifecycle ---------------------------------------------------------------

    async def aconnect(self) -> Self:
        """Open the session on the running loop and list the tools.

        Raises:
            MCPConnectionError: When the server cannot be started, reached or initialised.
            MissingDependencyError: When the `mcp` package is not installed.
            ConfigurationError: When the connection was opened before.
        """
        if self._state != "new":
            raise ConfigurationError(
                f"MCP connection {self.name!r} was opened before; a connection opens once.",
                hint="Create a new MCPConnection to connect again.",
            )
        _sdk.require()
        self._state = "connecting"
        self._loop = asyncio.get_running_loop()
        self._closing = asyncio.Event()
        ready: asyncio.Future[None] = self._loop.create_future()
        self._runner = asyncio.create_task(self._run(ready), name=f"tidemill-mcp-{self.name}")
        try:
            await ready
        except BaseException:
            if not ready.done() or ready.cancelled():
                # This call was cancelled: stop connecting (the SDK still stops the process).
                ready.cancel()
                self._runner.cancel()
            await asyncio.gather(self._runner, return_exceptions=True)
            self._state = "closed"
            raise
        self._state = "open"
        return self

    async def aclose(self) -> None:
        """End the session and stop the server process. Closing twice does nothing."""
        if self._state == "new":
            self._state = "closed"
            return
        home = self._loop
        if home is not None and home is not _running_loop():
            if home.is_running() and not home.is_closed():
                await self._forward(self._aclose_here)
            # A stopped loop cancelled the session's task, and with it the server.
            self._state = "closed"
            thread, self._thread = self._thread, None
            if thread is not None:  # opened by connect(): its loop thread has no more work
                thread.close()
            return
        await self._aclose_here()

    def connect(self) -> Self:
        """Blocking `aconnect`, on a private loop thread that `close()` stops.

        Use it from code without an event loop. The tools work from any loop,
        including the one an agent's blocking methods run on.
        """
        thread = LoopThread(f"tidemill-mcp-{self.name}")
        try:
            thread.run(self.aconnect())
        except BaseException:
            thread.close()
            raise
        self._thread = thread
        return self

    def close(self) -> None:
        """Blocking `aclose`; also stops the loop thread that `connect()` started.

        Raises:
            ConfigurationError: When called on the loop that owns the connection,
                which cannot block; use `await aclose()` there.
        """
        thread, self._thread = self._thread, None
        if thread is not None:
            try:
                thread.run(self.aclose())
            finally:
                thread.close()
            return
        home = self._loop
        if home is None or home.is_closed() or not home.is_running():
            self._state = "closed"
            return
        if home is _running_loop():
            raise ConfigurationError(
                f"close() would block the event loop that owns MCP connection {self.name!r}.",
                hint="Use await connection.aclose() on that loop.",
            )
        asyncio.run_coroutine_threadsafe(self.aclose(), home).result()

    async def __aenter__(self) -> Self:
        return await self.aconnect()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    def __enter__(self) -> Self:
        return self.connect()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"MCPConnection(name={self.name!r}, target={self.server.target!r}, {self._state})"

    # -- calls -------------------------------------------------------------------

    async def acall_tool(
        self, tool: str, arguments: Mapping[str, Any], *, meta: Mapping[str, str] | None = None
    ) -> MCPResult:
        """Call `tool` (its name on the server) and return its result, errors included.

        Unlike `MCPTool.acall`, a result the server marks as an error is
        returned (`is_error`), not raised. `meta` goes with the call as its
        `_meta` (an idempotency key, say).

        Raises:
            MCPToolError: When the server refuses the call, does not answer
                within `call_timeout`, or is not connected.
        """
        if self._loop is not None and self._loop is not _running_loop():
            return await self._forward(
                lambda: self.acall_tool(tool, arguments, meta=meta), tool=tool
            )
        session = self._usable_session(tool)
        try:
            async with asyncio.timeout(self.server.call_timeout):
                raw = await _sdk.call_tool(session, tool, dict(arguments), meta)
        except TimeoutError:
            raise MCPToolError(
                self.name,
                tool,
                f"MCP server {self.name!r} did not answer the call of {tool!r} "
                f"within {self.server.call_timeout:g} s.",
                hint="Raise the server's call_timeout=, or ask for less work per call.",
            ) from None
        except MCPToolError:
            raise
        except _sdk.closed_stream_types() as exc:
            self._lost = self._lost or exc
            raise self._disconnected(tool, exc) from exc
        except _sdk.error_types() as exc:
            if _sdk.connection_closed(exc):
                self._lost = self._lost or exc
            if self._lost is not None:
                raise self._disconnected(tool, exc) from exc
            raise MCPToolError(
                self.name, tool, f"MCP server {self.name!r} refused the call of {tool!r}: {exc}"
            ) from exc
        except Exception as exc:
            if self._lost is not None:
                raise self._disconnected(tool, exc) from exc
            raise MCPToolError(
                self.name,
                tool,
                f"The call of {tool!r} on MCP server {self.name!r} failed: "
                f"{type(exc).__name__}: {exc}",
            ) from exc
        return MCPResult.from_wire(raw)

    # -- internals ---------------------------------------------------------------

    async def _run(self, ready: asyncio.Future[None]) -> None:
        """Own the transport and the session, from connecting until closing.

        The SDK's context managers hold anyio task groups, which must be left
        by the task that entered them: this task, whoever calls `aclose()`.
        Whatever happens, `ready` ends resolved, so `aconnect()` never hangs.
        """
        assert self._closing is not None
        seen = Failure()
        pump = StderrPump(self.name) if self.server.command is not None else None
        try:
            async with AsyncExitStack() as stack:
                session = await self._open(stack, pump, seen)
                await self._handshake(session, seen)
                self._session = session
                ready.set_result(None)
                await self._closing.wait()
        except BaseException as exc:
            self._session = None
            if not ready.done():
                if pump is not None:
                    await pump.aclose()
                    seen.stderr = pump.tail()
                ready.set_exception(connection_error(self.server, exc, seen))
            elif not self._closing.is_set():
                self._lost = exc
                _log.warning(
                    "MCP server %s (%s) disconnected: %r", self.name, self.server.target, exc
                )
            if isinstance(exc, asyncio.CancelledError | KeyboardInterrupt | SystemExit):
                raise
        finally:
            self._session = None
            if pump is not None:
                await pump.aclose()

    async def _open(
        self, stack: AsyncExitStack, pump: StderrPump | None, seen: Failure
    ) -> ClientSession:
        server = self.server
        if server.command is not None:
            assert pump is not None
            assert pump.writer is not None
            try:
                read, write = await _sdk.open_stdio(
                    stack,
                    command=server.command,
                    args=list(server.args),
                    env=server.env,
                    cwd=str(server.cwd) if server.cwd is not None else None,
                    errlog=pump.writer,
                )
            finally:
                pump.release_writer()
        else:
            assert server.url is not None

            async def on_response(response: Any) -> None:
                status = response.status_code
                if isinstance(status, int) and status >= 400 and seen.status_code is None:
                    seen.status_code = status

            read, write = await _sdk.open_http(
                stack, url=server.url, headers=server.headers, on_response=on_response
            )

        async def on_message(message: object) -> None:
            if isinstance(message, Exception):
                self._transport_error(message, seen)

        return await _sdk.open_session(
            stack,
            read,
            write,
            on_message=on_message,
            client_name="tidemill",
            client_version=__version__,
        )

    async def _handshake(self, session: ClientSession, seen: Failure) -> None:
        try:
            async with asyncio.timeout(self.server.connect_timeout) as deadline:
                self._deadline = deadline
                init = _sdk.initialize_result(await session.initialize())
                listed = await self._list_tools(session)
        except TimeoutError:
            seen.timed_out = True
            raise
        finally:
            self._deadline = None
        info = init.get("serverInfo")
        self.server_info = dict(info) if isinstance(info, dict) else {}
        instructions = init.get("instructions")
        self.instructions = instructions if isinstance(instructions, str) else None
        self._tools = self._make_tools(listed)

    def _transport_error(self, error: Exception, seen: Failure) -> None:
        deadline = self._deadline
        if deadline is not None:
            # SDK 1.x reports transport failures here and lets the request wait
            # for ever: fail the handshake now rather than at the timeout.
            if seen.transport_error is None:
                seen.transport_error = error
            if not deadline.expired():
                deadline.reschedule(asyncio.get_running_loop().time())
        else:
            _log.warning("MCP server %s: transport error: %r", self.name, error)

    async def _list_tools(self, session: ClientSession) -> list[dict[str, JsonValue]]:
        tools: list[dict[str, JsonValue]] = []
        cursor: str | None = None
        seen_cursors: set[str] = set()
        for _ in range(_MAX_PAGES):
            page, cursor = await _sdk.list_tools_page(session, cursor)
            tools.extend(page)
            if cursor is None or cursor in seen_cursors:
                return tools
            seen_cursors.add(cursor)
        raise MCPConnectionError(
            self.name, self.server.target, f"tools/list returned more than {_MAX_PAGES} pages"
        )

    def _make_tools(self, listed: list[dict[str, JsonValue]]) -> tuple[MCPTool, ...]:
        by_name: dict[str, dict[str, JsonValue]] = {}
        for entry in listed:
            remote = entry.get("name")
            if isinstance(remote, str) and remote and remote not in by_name:
                by_name[remote] = entry
        self._check_approval_names(list(by_name))
        names = tool_names(self.name, by_name)
        tools: list[MCPTool] = []
        for remote, entry in by_name.items():
            schema = input_schema(entry)
            if schema is None:
                _log.warning(
                    "MCP server %s: tool %r left out: its inputSchema is not a JSON Schema "
                    "of an object",
                    self.name,
                    remote,
                )
                continue
            tools.append(
                MCPTool(
                    self,
                    remote_name=remote,
                    name=names[remote],
                    description=describe(entry),
                    parameters=schema,
                    requires_approval=self.server.needs_approval(remote),
                )
            )
        return tuple(tools)

    def _check_approval_names(self, available: list[str]) -> None:
        wanted = self.server.requires_approval
        if isinstance(wanted, bool):
            return
        unknown = sorted(set(wanted) - set(available))
        if not unknown:
            return
        close = [m for name in unknown for m in difflib.get_close_matches(name, available, n=1)]
        raise MCPConnectionError(
            self.name,
            self.server.target,
            f"requires_approval names tools the server does not have: {', '.join(unknown)}",
            hint=(f"Did you mean {', '.join(close)}? " if close else "")
            + f"Its tools are: {', '.join(sorted(available)) or '(none)'}.",
        )

    async def _aclose_here(self) -> None:
        self._state = "closed"
        if self._closing is not None:
            self._closing.set()
        if self._runner is not None:
            await asyncio.gather(self._runner, return_exceptions=True)

    def _usable_session(self, tool: str) -> ClientSession:
        if self._state != "open":
            raise MCPToolError(
                self.name,
                tool,
                f"MCP connection {self.name!r} is {self._state}; it cannot call {tool!r}.",
                hint="Open the connection before running the agent, and close it after.",
            )
        if self._lost is not None or self._session is None:
            raise self._disconnected(tool, self._lost)
        return self._session

    def _disconnected(self, tool: str, cause: BaseException | None) -> MCPToolError:
        detail = f": {cause}" if cause is not None and str(cause) else ""
        return MCPToolError(
            self.name,
            tool,
            f"MCP server {self.name!r} ({self.server.target}) is no longer connected{detail}.",
            hint="Reconnect with a new MCPConnection.",
        )

    async def _forward(self, work: Callable[[], Awaitable[T]], *, tool: str = "") -> T:
        """Run `work()` on the connection's own loop, from another loop."""
        home = self._loop
        if home is None or home.is_closed() or not home.is_running():
            raise MCPToolError(
                self.name,
                tool,
                f"The event loop that opened MCP connection {self.name!r} has stopped.",
                hint="Open the connection on the loop that runs the agent, "
                "or with connect(), which keeps a loop thread of its own.",
            )
        started = threading.Event()

        async def run_there() -> T:
            started.set()
            return await work()

        forwarded = asyncio.wrap_future(asyncio.run_coroutine_threadsafe(run_there(), home))
        try:
            done, _ = await asyncio.wait({forwarded}, timeout=FORWARD_START_TIMEOUT)
            if not done and not started.is_set():
                # Its loop is blocked, likely by a blocking call made on it (a blocking
                # agent.run() on the loop that opened the connection): do not wait for ever.
                forwarded.cancel()
                raise MCPToolError(
                    self.name,
                    tool,
                    f"The event loop that owns MCP connection {self.name!r} did not take "
                    f"the call within {FORWARD_START_TIMEOUT:g} s: it is blocked or busy.",
                    hint="On that loop, use await agent.arun() rather than agent.run(); "
                    "or open the connection with connect(), which has a loop thread of its own.",
                )
            return await forwarded
        except asyncio.CancelledError:
            forwarded.cancel()
            raise


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
