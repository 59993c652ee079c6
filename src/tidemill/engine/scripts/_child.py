"""The script process: what each child of a `ScriptPool` runs (standard library only).

The pool starts this file as ``python -u _child.py`` with its stdin and stdout
as the control pipe. The child moves that pipe to fresh descriptors, points
fd 0 at ``/dev/null`` and fds 1 and 2 at two capture files in a directory the
pool made for it, so whatever a script prints (from Python, a C extension or a
subprocess) lands in the files and never on the control pipe. A third file,
``call``, is the pool's "call sent" mark: the child empties it when it takes
a call, so a pool whose child died can tell whether the call ever started.

Frames on the pipe are a 4-byte big-endian length and that many bytes of
UTF-8 JSON. The pool sends ``{"sys_path", "capture"}`` first; the child
answers ``{"ready": pid}``. Then each call is one frame each way: the pool
sends ``{"code" | "function", "args", "env", "cwd"}``, the child answers
``{"ok", "result" | "error", "stdout", "stderr"}``, the last two being how
many bytes the call wrote to each capture file. The pool empties the capture
files before it sends a call, and may read them while the call runs.

A thread reads the pipe; when it closes (the pool closed it, or the pool's
process died) the child exits at once, even in the middle of a call, so no
child outlives its pool. SIGINT is ignored: Ctrl-C in a terminal is the
pool's business, not its children's.
"""

from __future__ import annotations

import contextlib
import faulthandler
import hashlib
import importlib
import json
import linecache
import os
import queue
import signal
import struct
import sys
import threading
import traceback
import types
from collections.abc import Callable
from typing import Any

__all__ = ["main"]

_HEADER = struct.Struct(">I")
_SCRIPT_MODULE = "__tidemill_script__"
_MAX_CACHED_SCRIPTS = 256
_CAPTURE_FILES = ("stdout", "stderr", "call")


class _Failure(Exception):
    """A call failed before user code ran, for a reason with its own error type."""

    def __init__(self, kind: str, message: str, trace: str = "") -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.trace = trace


def _read_exactly(fd: int, size: int) -> bytes | None:
    chunks: list[bytes] = []
    while size:
        chunk = os.read(fd, size)
        if not chunk:
            return None
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def _read_frame(fd: int) -> bytes | None:
    header = _read_exactly(fd, _HEADER.size)
    if header is None:
        return None
    return _read_exactly(fd, _HEADER.unpack(header)[0])


def _write_frame(fd: int, body: bytes) -> None:
    view = memoryview(_HEADER.pack(len(body)) + body)
    while view:
        view = view[os.write(fd, view) :]


def _listen(fd: int, inbox: queue.SimpleQueue[bytes], capture: str) -> None:
    """Hand each frame to the main thread; exit the process when the pipe closes.

    The capture directory goes too, in case the pool died without removing it.
    """
    try:
        while (frame := _read_frame(fd)) is not None:
            inbox.put(frame)
        for name in _CAPTURE_FILES:
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(capture, name))
        with contextlib.suppress(OSError):
            os.rmdir(capture)
    except BaseException:
        os._exit(70)
    os._exit(0)


def _open_flush() -> Callable[[], None]:
    """C's ``fflush(NULL)``, so buffered C-level output reaches the capture files."""
    try:
        import ctypes

        fflush = ctypes.CDLL(None).fflush
        fflush.argtypes = [ctypes.c_void_p]
    except (ImportError, OSError, AttributeError):  # pragma: no cover - not a libc platform
        return lambda: None
    return lambda: fflush(None)


def _user_traceback(error: BaseException) -> str:
    """The traceback without this file's own frames."""
    tb = error.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename == __file__:
        tb = tb.tb_next
    return "".join(traceback.format_exception(type(error), error, tb))


class _Runner:
    """Runs calls one at a time, restoring the process between them."""

    def __init__(self, out_fd: int, err_fd: int, marker: int) -> None:
        self.marker = marker
        self.out_fd = out_fd
        self.err_fd = err_fd
        self.pid = os.getpid()
        self.home = os.getcwd()
        self.streams = (sys.stdin, sys.stdout, sys.stderr)
        self.fflush = _open_flush()
        self.scripts: dict[str, types.CodeType] = {}
        self.functions: dict[str, Callable[..., Any]] = {}

    def call(self, request: dict[str, Any]) -> dict[str, Any]:
        os.ftruncate(self.marker, 0)  # tells the pool this call was taken
        # The pool emptied the capture files before it sent the call (and reads them as
        # they grow); emptying them here could drop what it has not read yet.
        for fd, target in ((self.out_fd, 1), (self.err_fd, 2)):
            os.dup2(fd, target)
        environ = _environ_data().copy()
        reply: dict[str, Any]
        try:
            os.environ.update(request.get("env") or {})
            if request.get("cwd") is not None:
                os.chdir(request["cwd"])
            value = self._resolve(request)(**(request.get("args") or {}))
            if hasattr(type(value), "__await__"):
                value = _await(value)
            reply = {"ok": True, "result": value}
        except _Failure as failure:
            reply = _error(failure.kind, failure.message, failure.trace)
        except SystemExit as exit_:
            code = exit_.code
            reply = _error("ProcessExited", f"The script called sys.exit({code!r}).")
        except BaseException as error:
            reply = _error(type(error).__name__, str(error), _user_traceback(error))
        finally:
            if os.getpid() != self.pid:  # user code forked and the fork returned here
                os._exit(0)
            self._restore(environ)
        reply["stdout"] = os.fstat(self.out_fd).st_size
        reply["stderr"] = os.fstat(self.err_fd).st_size
        return reply

    def _restore(self, environ: dict[bytes, bytes]) -> None:
        sys.modules.pop(_SCRIPT_MODULE, None)
        for stream in (sys.stdout, sys.stderr, *self.streams[1:]):
            with contextlib.suppress(Exception):  # a script's own stream may be broken
                stream.flush()
        sys.stdin, sys.stdout, sys.stderr = self.streams
        self.fflush()
        data = _environ_data()
        if data != environ:  # the call's variables, and whatever the script changed
            for key in [key for key in data if key not in environ]:
                del os.environ[os.fsdecode(key)]
            for key, value in environ.items():
                if data.get(key) != value:
                    os.environ[os.fsdecode(key)] = os.fsdecode(value)
        if os.getcwd() != self.home:
            os.chdir(self.home)

    def _resolve(self, request: dict[str, Any]) -> Callable[..., Any]:
        code = request.get("code")
        if code is None:
            return self._import(str(request["function"]))
        compiled = self.scripts.get(code)
        if compiled is None:
            compiled = self._compile(code)
        module = types.ModuleType(_SCRIPT_MODULE)
        sys.modules[_SCRIPT_MODULE] = module
        exec(compiled, module.__dict__)
        main: object = module.__dict__.get("main")
        if not callable(main):
            raise _Failure("NoMain", "The script defines no main() function to call.")
        return main

    def _compile(self, code: str) -> types.CodeType:
        digest = hashlib.sha256(code.encode(errors="surrogatepass")).hexdigest()[:12]
        filename = f"<script {digest}>"
        try:
            compiled = compile(code, filename, "exec")
        except SyntaxError as error:
            trace = "".join(traceback.format_exception_only(type(error), error))
            raise _Failure(type(error).__name__, str(error), trace) from None
        if len(self.scripts) >= _MAX_CACHED_SCRIPTS:
            oldest = next(iter(self.scripts))
            linecache.cache.pop(self.scripts.pop(oldest).co_filename, None)
        self.scripts[code] = compiled
        linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
        return compiled

    def _import(self, reference: str) -> Callable[..., Any]:
        function = self.functions.get(reference)
        if function is not None:
            return function
        module_name, _, qualname = reference.partition(":")
        try:
            target: Any = importlib.import_module(module_name)
            for part in qualname.split("."):
                target = getattr(target, part)
        except BaseException as error:
            message = f"Could not import {reference!r}: {type(error).__name__}: {error}"
            raise _Failure("ImportError", message, _user_traceback(error)) from None
        if not callable(target):
            raise _Failure("ImportError", f"{reference!r} is not callable.")
        self.functions[reference] = target
        return target  # type: ignore[no-any-return]


def _environ_data() -> dict[bytes, bytes]:
    """The encoded variables behind `os.environ` (CPython keeps them in `_data`).

    Copying and comparing this dict are single C operations; going through
    `os.environ` decodes every variable, which cost most of a short call.
    Where there is no `_data` (not CPython), an encoded copy does the same, slowly.
    """
    data = getattr(os.environ, "_data", None)
    if isinstance(data, dict):
        return data
    return {os.fsencode(key): os.fsencode(value) for key, value in os.environ.items()}


def _await(awaitable: Any) -> Any:
    import asyncio

    async def wait() -> Any:
        return await awaitable

    return asyncio.run(wait())


def _error(kind: str, message: str, trace: str = "") -> dict[str, Any]:
    return {"ok": False, "error": {"type": kind, "message": message, "traceback": trace}}


def _encode(reply: dict[str, Any]) -> bytes:
    """`reply` as JSON, or the error saying its result is not JSON."""
    try:
        return json.dumps(reply, allow_nan=False).encode()
    except (TypeError, ValueError, RecursionError) as error:
        failed = _error(
            "ResultNotSerializable",
            f"The script returned a value that is not JSON: {type(error).__name__}: {error}",
        )
        failed["stdout"], failed["stderr"] = reply["stdout"], reply["stderr"]
        return json.dumps(failed).encode()


def main() -> None:
    """Serve calls until the control pipe closes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    control_in, control_out = os.dup(0), os.dup(1)
    first = _read_frame(control_in)
    if first is None:
        return
    config = json.loads(first)
    sys.path[:] = config["sys_path"]
    capture = config["capture"]
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT
    out_fd = os.open(os.path.join(capture, "stdout"), flags, 0o600)
    err_fd = os.open(os.path.join(capture, "stderr"), flags, 0o600)
    marker = os.open(os.path.join(capture, "call"), os.O_WRONLY | os.O_CREAT, 0o600)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(out_fd, 1)
    os.dup2(err_fd, 2)
    faulthandler.enable(file=sys.stderr, all_threads=False)
    runner = _Runner(out_fd, err_fd, marker)
    inbox: queue.SimpleQueue[bytes] = queue.SimpleQueue()
    threading.Thread(target=_listen, args=(control_in, inbox, capture), daemon=True).start()
    try:
        _write_frame(control_out, _encode({"ready": runner.pid}))
        while True:
            _write_frame(control_out, _encode(runner.call(json.loads(inbox.get()))))
    except OSError:  # the pool is gone
        os._exit(0)


if __name__ == "__main__":
    main()
