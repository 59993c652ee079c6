"""`tidemill copilot`: ask the copilot to build or change a workspace flow, from a terminal.

The copilot acts as the local user (or `--as USER`), in the workspace's
store, with a worker of this process to run its test runs. Each tool it
calls is shown on stderr as it happens; its answer goes to stdout. A test
run waits for a yes: asked on the terminal (y/N), or, with no terminal,
refused unless `--yes` approves every test run up front.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import uuid
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TextIO

from tidemill.cli._ws_people import add_ws_options
from tidemill.errors import ConfigurationError, ItemNotFound

if TYPE_CHECKING:
    from tidemill.copilot import Copilot
    from tidemill.llm import Model
    from tidemill.types import AgentResponse, ToolCall
    from tidemill.workspace import AsyncWorkspace

__all__ = ["MODEL_ENV", "register", "run"]

MODEL_ENV = "TIDEMILL_COPILOT_MODEL"
"""The environment variable naming the copilot's model when `--model` is not given."""

_NO_TTY = (
    "Test runs need your approval, and there is no terminal to ask on: "
    "this test run was refused. Pass --yes to approve test runs up front."
)

_EPILOG = """\
examples:
  tidemill copilot "build a flow that sends a notification after processing an invoice"
  tidemill copilot "add an approval before the refund" --flow f/billing/refund
  tidemill copilot "test it with invoice INV-7" --flow f/billing/notify --yes
"""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> Callable[..., int]:
    """Add the `copilot` command; return the function that runs it."""
    parser = subparsers.add_parser(
        "copilot",
        help="ask the copilot to build or change a flow (saved as your draft)",
        description="Ask the copilot to build or change a workspace flow. It searches the "
        "workspace's flows and scripts first, reuses what fits, and saves what it proposes "
        "as your draft (validated, never deployed): deploy it with `tidemill ws deploy "
        "PATH`. Each tool it calls is shown as it happens; a test run waits for your yes.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("request", metavar="REQUEST", help="what to build or change")
    parser.add_argument(
        "--flow", metavar="PATH", default=None,
        help="the flow to build or change (default: the copilot picks a path)",
    )  # fmt: skip
    parser.add_argument(
        "--model", metavar="SPEC", default=None,
        help=f"the model, e.g. openai:gpt-4o (default: ${MODEL_ENV}, else "
        "$TIDEMILL_DEFAULT_MODEL)",
    )  # fmt: skip
    parser.add_argument(
        "--yes", action="store_true",
        help="approve every test run without asking (for scripts and CI)",
    )  # fmt: skip
    add_ws_options(parser)
    return run


def model_spec(args: argparse.Namespace) -> str | Model:
    """The model `--model` names, else `$TIDEMILL_COPILOT_MODEL`, else the default model's.

    Raises:
        ConfigurationError: None is named anywhere.
    """
    spec = args.model or os.environ.get(MODEL_ENV) or os.environ.get("TIDEMILL_DEFAULT_MODEL")
    if not spec:
        raise ConfigurationError(
            "The copilot needs a model, and none was named.",
            hint=f"Pass --model openai:gpt-4o (or another spec), or set ${MODEL_ENV}.",
        )
    return str(spec)


def run(args: argparse.Namespace) -> int:
    """Run the copilot on the request; return the exit status."""
    return asyncio.run(_session(args, model_spec(args)))


async def _session(args: argparse.Namespace, model: str | Model) -> int:
    from tidemill.cli._common import db_url
    from tidemill.copilot import Copilot
    from tidemill.engine import AsyncEngine
    from tidemill.workspace import DEFAULT_WORKSPACE, AsyncWorkspace

    engine = AsyncEngine(db_url(args))
    ws = AsyncWorkspace(engine.store, workspace=args.workspace or DEFAULT_WORKSPACE)
    try:
        user = await ws.acting_as(args.actor) if args.actor else ws
        bot = Copilot(user, model=model, engine=engine, flow=args.flow, status=_show)
        async with engine.worker():
            response = await _converse(bot, args.request, yes=args.yes, stdin=sys.stdin)
        await bot.aclose()
        drafted = bot.session.flow is not None and await _has_draft(user, bot.session.flow)
    finally:
        await ws.close()
        await engine.close()
    print(response.output)
    if drafted:
        print(
            f"Your draft: {bot.session.flow} (deploy it with: tidemill ws deploy "
            f"{bot.session.flow})",
            file=sys.stderr,
        )
    return 0


def _show(tool: str, text: str) -> None:
    print(f"  [{tool}] {text}", file=sys.stderr, flush=True)


async def _converse(bot: Copilot, request: str, *, yes: bool, stdin: TextIO) -> AgentResponse:
    """Ask, then decide each test run it pauses on, until it answers."""
    from tidemill.errors import AgentInterrupt

    thread = f"copilot-{uuid.uuid4().hex[:12]}"
    try:
        return await bot.ask(request, thread_id=thread)
    except AgentInterrupt as pause:
        pending: Sequence[ToolCall] = pause.pending
    while True:
        approved, feedback = _decide(pending, yes=yes, stdin=stdin)
        try:
            return await bot.decide(thread, approved=approved, feedback=feedback)
        except AgentInterrupt as pause:
            pending = pause.pending


def _decide(pending: Sequence[ToolCall], *, yes: bool, stdin: TextIO) -> tuple[bool, str]:
    """Whether to run the test runs the copilot waits for, and what to tell it if not."""
    for call in pending:
        print(f"The copilot wants to {_described(call)}.", file=sys.stderr)
    if yes:
        print("Approved (--yes).", file=sys.stderr)
        return True, ""
    if stdin is None or not stdin.isatty():
        print(_NO_TTY, file=sys.stderr)
        return False, _NO_TTY
    print("Run it? [y/N] ", end="", file=sys.stderr, flush=True)
    answer = stdin.readline().strip().lower()
    if answer in ("y", "yes"):
        return True, ""
    return False, "The user answered no to this test run."


async def _has_draft(ws: AsyncWorkspace, path: str) -> bool:
    """Whether the user has a draft at `path` (what the copilot proposed, or one from before)."""
    try:
        await ws.draft(path)
    except ItemNotFound:
        return False
    return True


def _described(call: ToolCall) -> str:
    arguments: dict[str, Any] = dict(call.arguments)
    inputs = arguments.get("inputs") or {}
    if call.name == "test_run_step":
        return f"test-run step {arguments.get('step_id')!r} of your draft with inputs {inputs}"
    return f"test-run your draft with inputs {inputs}"
