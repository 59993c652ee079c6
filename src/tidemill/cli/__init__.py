"""The `tidemill` command line.

Each command lives in a module of its own that adds a subparser and the
function that runs it (see `_proxy`); `main` assembles them. Commands import
what they need only when they run, so `tidemill --help` works with no extra
installed.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from tidemill.cli import _approvals, _db, _flow, _proxy, _run, _runs, _worker
from tidemill.errors import TidemillError

__all__ = ["build_parser", "main"]

Run = Callable[[argparse.Namespace], int]
"""What a command does with its parsed arguments; returns the exit status."""

_COMMANDS: tuple[Callable[[argparse._SubParsersAction[argparse.ArgumentParser]], Run], ...] = (
    _run.register,
    _worker.register,
    _runs.register,
    _approvals.register,
    _flow.register,
    _db.register,
    _proxy.register,
)


def build_parser() -> tuple[argparse.ArgumentParser, dict[str, Run]]:
    """The argument parser, and the function that runs each command.

    Examples:
        >>> parser, commands = build_parser()
        >>> sorted(commands)
        ['approvals', 'db', 'flow', 'proxy', 'run', 'runs', 'worker']
    """
    parser = argparse.ArgumentParser(
        prog="tidemill",
        description="Run AI agents as durable steps of workflows.",
    )
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
    and exits with status 2; `--help` exits with status 0.
    """
    parser, commands = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    try:
        return commands[args.command](args)
    except TidemillError as exc:
        print(f"tidemill {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
