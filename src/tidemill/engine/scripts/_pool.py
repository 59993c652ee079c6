"""`ScriptPool`: pre-started Python processes that run flow "script" steps in isolation.

Each call runs in a child process the pool started ahead of time and reuses,
so a step pays for a pipe round trip, not for an interpreter start. What a
script does to its process (crash, exit, segfault, hang, leave threads behind)
fails that call only: the pool kills the child when it must and starts a
replacement in the background. The child's code is `tidemill.engine.scripts._child`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import struct
import sys
import time
from collections import deque
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

from tidemill.engine.scripts._call import ScriptCall, ScriptError, ScriptOutcome
from tidemill.engine.scripts._output import STREAMS, OutputTail, truncation_note
from tidemill.engine.scripts._scratch import make_directory, sweep_directories
from tidemill.errors import ConfigurationError, EngineError, SerializationError

__all__ = ["ScriptCall", "ScriptError", "ScriptOutcome", "ScriptPool"]  # the first three: `_call`

_CHILD = Path(__file__).with_name("_child.py")
_HEADER = struct.Struct(">I")
_MAX_FRAME = 1 << 30
_READ_LIMIT = 1 << 20
_ATTEMPTS = 3  # children that die idle before taking a call, in a row, before giving up


class _ChildGone(Exception):
    """The child's end of the control pipe closed: it died."""


class _ProtocolError(Exception):
    """The child sent something that is not a frame of the protocol."""


class _Child:
    """One child process, its control pipe and its capture files."""

    def __init__(self, process: asyncio.subprocess.Process, directory: str) -> None:
        assert process.stdin is not None
        assert process.stdout is not None
        self.process = process
        self.pid = process.pid
        self.directory = directory
        self.stdin = process.stdin
        self.stdout = process.stdout
        self.calls = 0
        # A byte here means "a call was sent"; the child empties the file when it takes one.
        self.marker = os.open(
            os.path.join(directory, "call"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600
        )
        self.retiring: asyncio.Task[tuple[str, str]] | None = None
        self.replaced = False

    @property
    def usable(self) -> bool:
        return (
            self.retiring is None and self.process.returncode is None and not self.stdout.at_eof()
        )

    def mark_pending(self) -> None:
        os.pwrite(self.marker, b"1", 0)

    def clear_output(self) -> None:
        """Empty the capture files for the next call (the child is idle: nothing writes them)."""
        for name in STREAMS:
            with contextlib.suppress(OSError):
                os.truncate(os.path.join(self.directory, name), 0)

    @property
    def pending(self) -> bool:
        """Whether the child died before taking the call it was sent."""
        try:
            return os.fstat(self.marker).st_size > 0
        except OSError:
            return False

    async def send(self, frame: bytes) -> None:
        try:
            self.stdin.write(frame)
            await self.stdin.drain()
        except (BrokenPipeError, ConnectionResetError) as error:
            raise _ChildGone from error

    async def receive(self) -> dict[str, Any]:
        try:
            header = await self.stdout.readexactly(_HEADER.size)
            (size,) = _HEADER.unpack(header)
            if size > _MAX_FRAME:
                raise _ProtocolError(f"a frame of {size} bytes")
            body = await self.stdout.readexactly(size)
        except asyncio.IncompleteReadError as error:
            raise _ChildGone from error
        try:
            message = json.loads(body)
        except ValueError as error:
            raise _ProtocolError(f"a frame that is not JSON: {error}") from error
        if not isinstance(message, dict):
            raise _ProtocolError("a frame that is not an object")
        return message

    def kill(self) -> None:
        """SIGKILL the child and whatever it started in its process group."""
        if self.process.returncode is not None:
            return
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            with contextlib.suppress(ProcessLookupError):
                self.process.kill()

    def read(self, name: str, size: int | None, limit: int) -> str:
        """What the last call wrote to capture file `name` (all of it when size is None)."""
        if size == 0:
            return ""
        try:
            with open(os.path.join(self.directory, name), "rb") as file:
                data = file.read(limit + 1)
        except OSError:
            return ""
        text = data[:limit].decode(errors="replace")
        if len(data) > limit:
            text += truncation_note(limit)
        return text


class _Follow:
    """Hands a call's output to `on_output` while it runs (a task polling an `OutputTail`)."""

    def __init__(
        self, pool: ScriptPool, child: _Child, on_output: Callable[[str, str], None] | None
    ) -> None:
        self.tail = None
        self.task: asyncio.Task[None] | None = None
        if on_output is not None:
            self.tail = OutputTail(child.directory, pool.max_output, on_output)
            self.task = asyncio.get_running_loop().create_task(self._poll(pool.output_poll))
            pool._tasks.add(self.task)
            self.task.add_done_callback(pool._tasks.discard)

    async def _poll(self, every: float) -> None:
        assert self.tail is not None
        while True:
            await asyncio.sleep(every)
            self.tail.poll()

    def end(self) -> None:
        """Stop polling and hand on the rest (once)."""
        if self.task is not None:
            self.task.cancel()
        if self.tail is not None:
            self.tail.finish()


def _frame(message: Mapping[str, Any]) -> bytes:
    body = json.dumps(message, allow_nan=False).encode()
    return _HEADER.pack(len(body)) + body


def _child_sys_path() -> list[str]:
    """This process's import path, absolute, with its working directory in it."""
    path = [os.path.abspath(entry) for entry in sys.path]
    if os.getcwd() not in path:
        path.insert(0, os.getcwd())
    return path


def _describe_exit(returncode: int | None) -> str:
    if returncode is not None and returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"The script process was killed by {name}."
    return f"The script process exited with code {returncode}."


def _failure(kind: str, message: str) -> ScriptError:
    return {"type": kind, "message": message, "traceback": ""}


class ScriptPool:
    r"""Child Python processes, started ahead and reused, that run script calls.

    Args:
        size: How many children to keep ready; at most this many calls run at once.
        max_calls_per_child: Replace a child after this many calls (None: never).
        python: The interpreter to start (default: this one).
        max_output: Bytes of stdout (and of stderr) kept per call; the rest is cut.
        output_poll: Seconds between looks at a running call's output, for a
            caller of `run` that takes it as it is written (`on_output`).
        start_timeout: Seconds a child may take to start before the pool gives up.
        close_timeout: Seconds `close` waits for children to exit before killing them.

    Examples:
        >>> import asyncio
        >>> async def double(x):
        ...     async with ScriptPool(size=1) as pool:
        ...         code = "def main(x):\n    print('doubling')\n    return x * 2\n"
        ...         return await pool.run(ScriptCall(code=code, args={"x": x}))
        >>> outcome = asyncio.run(double(21))
        >>> outcome.ok, outcome.result, outcome.stdout
        (True, 42, 'doubling\n')
    """

    def __init__(
        self,
        size: int = 4,
        *,
        max_calls_per_child: int | None = None,
        python: str | None = None,
        max_output: int = 16 * 1024 * 1024,
        output_poll: float = 0.1,
        start_timeout: float = 60.0,
        close_timeout: float = 5.0,
    ) -> None:
        if size < 1:
            raise ConfigurationError(f"A script pool needs at least one process, not {size}.")
        if max_calls_per_child is not None and max_calls_per_child < 1:
            raise ConfigurationError("max_calls_per_child must be at least 1 (or None).")
        self.size = size
        self.max_calls_per_child = max_calls_per_child
        self.python = python or sys.executable
        self.max_output = max_output
        self.output_poll = output_poll
        self.start_timeout = start_timeout
        self.close_timeout = close_timeout
        self._children: set[_Child] = set()
        self._idle: deque[_Child | None] = deque()
        self._waiters: deque[asyncio.Future[_Child | None]] = deque()
        self._tasks: set[asyncio.Task[None]] = set()
        self._start_lock = asyncio.Lock()
        self._started = False
        self._closed = False

    @property
    def pids(self) -> list[int]:
        """The process ids of the pool's live children, idle or busy."""
        return sorted(child.pid for child in self._children if child.process.returncode is None)

    async def __aenter__(self) -> ScriptPool:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def start(self) -> None:
        """Start `size` children and wait until each is ready; later calls do nothing."""
        self._check_open()
        if not self._started:
            async with self._start_lock:
                await self._start_children()

    async def _start_children(self) -> None:
        if self._started:
            return
        await asyncio.to_thread(sweep_directories)  # what pools killed with their children left
        results = await asyncio.gather(
            *(self._spawn() for _ in range(self.size)), return_exceptions=True
        )
        children = [result for result in results if isinstance(result, _Child)]
        failures = [result for result in results if not isinstance(result, _Child)]
        if failures:
            await asyncio.gather(*(self._retire(child, 0) for child in children))
            raise failures[0]
        self._started = True
        for child in children:
            self._release(child)

    async def run(
        self, call: ScriptCall, *, on_output: Callable[[str, str], None] | None = None
    ) -> ScriptOutcome:
        """Run `call` in a free child (waiting for one) and return what it did.

        A failure of the script, whatever it is, comes back as an outcome with
        `ok` False. If the awaiting task is cancelled, the child running the
        call is killed (and replaced) before the cancellation propagates.

        `on_output` is called with `("stdout" | "stderr", text)` as the call
        writes (every `output_poll` seconds), and with the rest when it ends,
        is killed at its timeout, or is cancelled; joined, the pieces are the
        outcome's `stdout` and `stderr`.

        Raises:
            SerializationError: `call.args` is not JSON.
            EngineError: The pool is closed (or closed during the call), or a
                child could not be started.
        """
        message: dict[str, Any] = {"args": dict(call.args), "env": dict(call.env)}
        if call.code is not None:
            message["code"] = call.code
        else:
            message["function"] = call.function
        message["cwd"] = None if call.cwd is None else os.fspath(call.cwd)
        try:
            frame = _frame(message)
        except (TypeError, ValueError) as error:
            raise SerializationError(f"A script's arguments must be JSON: {error}") from error
        await self.start()
        for attempt in range(1, _ATTEMPTS + 1):
            outcome = await self._call(
                frame, call.timeout, may_retry=attempt < _ATTEMPTS, on_output=on_output
            )
            if outcome is not None:
                return outcome
        raise AssertionError("the last attempt returns an outcome")  # pragma: no cover

    async def close(self) -> None:
        """Stop every child: close its pipe, wait `close_timeout`, then kill it."""
        self._closed = True
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_exception(EngineError("The script pool is closed."))
        self._idle.clear()
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await asyncio.gather(
            *(self._retire(child, self.close_timeout) for child in list(self._children))
        )

    async def _call(
        self,
        frame: bytes,
        limit: float | None,
        *,
        may_retry: bool,
        on_output: Callable[[str, str], None] | None,
    ) -> ScriptOutcome | None:
        """One attempt at a call; None when its child died before taking it."""
        child = await self._acquire()
        child.calls += 1
        child.clear_output()
        child.mark_pending()
        follow = _Follow(self, child, on_output)
        started = time.perf_counter()
        try:
            async with asyncio.timeout(limit):
                await child.send(frame)
                reply = await child.receive()
        except TimeoutError:
            kind, text = "Timeout", f"The script ran longer than {limit} s and was killed."
        except _ChildGone:
            if may_retry and child.pending and not self._closed:
                follow.end()
                self._discard(child, kill=True)  # it died idle: the call never ran
                return None
            kind, text = "ProcessExited", ""
        except _ProtocolError as error:
            kind, text = "ProtocolError", f"The script process sent {error}; it was killed."
        except BaseException:
            child.kill()
            follow.end()  # what it printed before it was stopped
            await asyncio.shield(self._discard(child, kill=True))
            raise
        else:
            follow.end()
            stdout = child.read("stdout", reply.get("stdout"), self.max_output)
            stderr = child.read("stderr", reply.get("stderr"), self.max_output)
            self._release(child)
            return ScriptOutcome(
                ok=bool(reply.get("ok")),
                result=reply.get("result"),
                error=reply.get("error"),
                stdout=stdout,
                stderr=stderr,
                duration=time.perf_counter() - started,
                pid=child.pid,
            )
        duration = time.perf_counter() - started
        if kind != "ProcessExited":
            child.kill()
        follow.end()
        stdout, stderr = await asyncio.shield(self._discard(child, kill=kind != "ProcessExited"))
        if kind == "ProcessExited":
            if self._closed:
                raise EngineError("The script pool was closed while the script ran.")
            text = _describe_exit(child.process.returncode)
        return ScriptOutcome(
            ok=False,
            error=_failure(kind, text),
            stdout=stdout,
            stderr=stderr,
            duration=duration,
            pid=child.pid,
        )

    def _check_open(self) -> None:
        if self._closed:
            raise EngineError("The script pool is closed.")

    async def _acquire(self) -> _Child:
        """A ready child, waiting for one; starts one if its slot has none."""
        while True:
            self._check_open()
            if self._idle:
                token = self._idle.pop()  # the most recently used child: its caches are warm
            else:
                waiter: asyncio.Future[_Child | None] = asyncio.get_running_loop().create_future()
                self._waiters.append(waiter)
                try:
                    token = await waiter
                except asyncio.CancelledError:
                    if waiter.done() and not waiter.cancelled() and waiter.exception() is None:
                        self._release(waiter.result())
                    else:
                        with contextlib.suppress(ValueError):
                            self._waiters.remove(waiter)
                    raise
            if token is None:
                try:
                    return await self._spawn()
                except BaseException:
                    self._release(None)
                    raise
            if token.usable:
                return token
            self._discard(token, kill=True)

    def _release(self, token: _Child | None) -> None:
        """Give a slot back: to the first waiter, else to the idle queue."""
        if self._closed:
            return
        if (
            token is not None
            and self.max_calls_per_child is not None
            and token.calls >= self.max_calls_per_child
        ):
            self._discard(token, kill=False)
            return
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(token)
                return
        self._idle.append(token)

    async def _spawn(self) -> _Child:
        directory = make_directory()
        try:
            process = await asyncio.create_subprocess_exec(
                self.python,
                "-u",
                str(_CHILD),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                start_new_session=True,
                limit=_READ_LIMIT,
            )
        except BaseException:
            shutil.rmtree(directory, ignore_errors=True)
            raise
        child = _Child(process, directory)
        self._children.add(child)
        try:
            async with asyncio.timeout(self.start_timeout):
                await child.send(_frame({"sys_path": _child_sys_path(), "capture": directory}))
                ready = await child.receive()
            if ready.get("ready") != child.pid:
                raise _ProtocolError(f"{ready!r} instead of its ready message")
        except Exception as error:
            _, stderr = await asyncio.shield(self._retire(child, 0))
            raise EngineError(
                f"A script process could not start: {type(error).__name__} {error}".strip(),
                context={"python": self.python, "stderr": stderr[-2000:]},
            ) from error
        except BaseException:
            await asyncio.shield(self._retire(child, 0))
            raise
        return child

    def _discard(self, child: _Child, *, kill: bool) -> asyncio.Task[tuple[str, str]]:
        """Retire `child` (killing it, or letting it finish) and start its replacement."""
        if kill:
            child.kill()
        retiring = self._retire(child, 0 if kill else self.close_timeout)
        if not child.replaced:
            child.replaced = True
            self._replace()
        return retiring

    def _replace(self) -> None:
        if self._closed:
            return
        task = asyncio.get_running_loop().create_task(self._refill())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _refill(self) -> None:
        try:
            child = await self._spawn()
        except asyncio.CancelledError:
            raise
        except Exception:  # the next caller to take this slot retries and sees why
            self._release(None)
            return
        if self._closed:
            await self._retire(child, 0)
        else:
            self._release(child)

    def _retire(self, child: _Child, grace: float) -> asyncio.Task[tuple[str, str]]:
        """End `child` (once) and return its last call's stdout and stderr."""
        if child.retiring is None:
            child.retiring = asyncio.get_running_loop().create_task(self._end(child, grace))
        elif grace == 0:
            child.kill()
        return child.retiring

    async def _end(self, child: _Child, grace: float) -> tuple[str, str]:
        try:
            child.stdin.close()
            if grace <= 0:
                child.kill()
            try:
                await asyncio.wait_for(child.process.wait(), grace if grace > 0 else None)
            except TimeoutError:
                child.kill()
                await child.process.wait()
            with contextlib.suppress(OSError):
                await child.stdin.wait_closed()
            return (
                child.read("stdout", None, self.max_output),
                child.read("stderr", None, self.max_output),
            )
        finally:
            if child.process.returncode is None:
                child.kill()
            with contextlib.suppress(OSError):
                os.close(child.marker)
            shutil.rmtree(child.directory, ignore_errors=True)
            self._children.discard(child)
