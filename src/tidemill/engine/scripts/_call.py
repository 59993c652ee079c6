"""What one script call is, and what it did: `ScriptCall`, `ScriptOutcome`, `ScriptError`."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypedDict

from tidemill.errors import ConfigurationError

__all__ = ["ScriptCall", "ScriptError", "ScriptOutcome"]


class ScriptError(TypedDict):
    """Why a script call failed.

    Besides the name of the exception the script raised, `type` is one of
    ``Timeout`` (killed after its timeout), ``ProcessExited`` (the process
    died, or the script called ``sys.exit``), ``SyntaxError``, ``NoMain``
    (the code defines no ``main``), ``ImportError`` (a bad function
    reference), ``ResultNotSerializable`` (the result is not JSON) and
    ``ProtocolError`` (the child broke the pipe protocol).
    """

    type: str
    message: str
    traceback: str


@dataclass(frozen=True, slots=True)
class ScriptCall:
    r"""One script to run: inline `code` defining ``main``, or an importable `function`.

    Examples:
        >>> ScriptCall(code="def main(x):\n    return x * 2\n", args={"x": 21}).timeout is None
        True
        >>> ScriptCall(function="json:dumps", args={"obj": [1]}).function
        'json:dumps'
        >>> ScriptCall(code="def main(): pass", function="json:dumps")
        Traceback (most recent call last):
        ...
        tidemill.errors.ConfigurationError: A script call needs exactly one of code and function.
    """

    code: str | None = None
    """Python source defining ``main`` (plain or ``async``), called as ``main(**args)``."""
    function: str | None = None
    """``package.module:function`` (the function may be ``Class.method``), imported in the child."""
    args: Mapping[str, Any] = field(default_factory=dict)
    """Keyword arguments, JSON values."""
    env: Mapping[str, str] = field(default_factory=dict)
    """Variables set in ``os.environ`` for this call only."""
    timeout: float | None = None
    """Seconds the call may run before its process is killed; None waits forever."""
    cwd: str | os.PathLike[str] | None = None
    """The working directory for this call; None keeps the pool's."""

    def __post_init__(self) -> None:
        if (self.code is None) == (self.function is None):
            raise ConfigurationError("A script call needs exactly one of code and function.")
        if self.function is not None:
            module, colon, name = self.function.partition(":")
            if not (module and colon and name):
                raise ConfigurationError(
                    f"Bad function reference {self.function!r}.",
                    hint="Write it as 'package.module:function'.",
                )
        if self.timeout is not None and not self.timeout > 0:
            raise ConfigurationError(f"A script timeout must be positive, not {self.timeout!r}.")
        for name, value in self.env.items():
            if not (isinstance(name, str) and isinstance(value, str)):
                raise ConfigurationError(f"Script environment variables are strings: {name!r}.")


@dataclass(frozen=True, slots=True)
class ScriptOutcome:
    """What one script call did.

    Examples:
        >>> ScriptOutcome(ok=True, result=42).error is None
        True
    """

    ok: bool
    """Whether the script returned a JSON value."""
    result: Any = None
    """The value it returned (None when it failed)."""
    error: ScriptError | None = None
    """Why it failed (None when it did not)."""
    stdout: str = ""
    """What it wrote to standard output, from Python or below (subprocesses, C code)."""
    stderr: str = ""
    """What it wrote to standard error."""
    duration: float = 0.0
    """Seconds from handing the call to its process to the answer (or the kill)."""
    pid: int | None = None
    """The process that ran it."""
