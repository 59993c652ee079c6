"""The `tidemill` command line.

Each command lives in a module of its own that adds a subparser and the
function that runs it (see `_proxy`); `main` assembles them. Commands import
what they need only when they run, so `tidemill --help` works with no extra
installed.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Callable, Sequence

from tidemill._version import __version__
from tidemill.cli import (
    _approvals,
    _common,
    _copilot,
    _db,
    _events,
    _flow,
    _memory,
    _proxy,
    _run,
    _runs,
    _schedules,
    _server,
    _sync,
    _worker,
    _ws,
)
from tidemill.errors import FlowInputError, TidemillError

__all__ = ["build_parser", "main"]

Run = Callable[[argparse.Namespace], int]
"""What a command does with its parsed arguments; returns the exit status."""

_COMMANDS: tuple[Callable[[argparse._SubParsersAction[argparse.ArgumentParser]], Run], ...] = (
    _run.register,
    _worker.register,
    _runs.register,
    _approvals.register,
    _events.register,
    _schedules.register,
    _memory.register,
    _flow.register,
    _db.register,
    _proxy.register,
    _server.register,
    _ws.register,
    _sync.register,
    _copilot.register,
)

_BROKEN_PIPE = 128 + getattr(signal, "SIGPIPE", 13)
"""The exit status when the output's reader went away (`tidemill runs list | head -1`): 141."""


def build_parser() -> tuple[argparse.ArgumentParser, dict[str, Run]]:
    """The argument parser, and the function that runs each command.

    Examples:
        >>> parser, commands = build_parser()
        >>> print(" ".join(sorted(commands)))
        approvals copilot db events flow memory proxy run runs schedules server sync worker ws
    """
    parser = argparse.ArgumentParser(
        prog="tidemill",
        description="Run AI agents as durable steps of workflows.",
    )
    parser.add_argument(
        "--version", action="version", version=f"tidemill {__version__}",
        help="print the version of Tidemill and exit",
    )  # fmt: skip
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands: dict[str, Run] = {}
    for register in _COMMANDS:
        before = set(subparsers.choices)
        run = register(subparsers)
        for name in set(subparsers.choices) - before:
            commands[name] = run
    return parser, commands


def main(argv: Sequence[str] | None = None) -> int:
    """Run the `tidemill` command line; return the exit status.

    A Tidemill error (a missing extra, a bad option) is printed with its hint
    and exits with status 2; `--help` exits with status 0. When the reader of
    the output goes away (`| head -1`), the command stops quietly with status
    141, as Unix tools do.
    """
    try:
        try:
            return _main(argv)
        finally:
            sys.stdout.flush()  # here, not at exit, so that a closed pipe is caught below
    except BrokenPipeError:
        _discard_output()
        return _BROKEN_PIPE


def _main(argv: Sequence[str] | None) -> int:
    parser, commands = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    try:
        return commands[args.command](args)
    except TidemillError as exc:
        if isinstance(exc, FlowInputError):
            exc.hint = _common.quoting_hint(exc, getattr(args, "inputs", None) or ()) or exc.hint
        print(f"tidemill {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


def _discard_output() -> None:
    """Point stdout at the null device: what is still buffered for the closed pipe goes nowhere."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(null, sys.stdout.fileno())
        finally:
            os.close(null)
    except (OSError, ValueError):  # no file descriptor (stdout replaced, as in tests)
        pass
