"""`tidemill approvals`: list the decisions runs wait for, approve or reject them.

Runs wait for approval steps, and for tool calls of `ai_agent` steps whose
tool requires approval (kind `tool_call`): those are listed with the tool's
name and arguments; approving one may replace its arguments (`--edit-args`),
rejecting one tells the agent's model why (`--comment`). A reconciliation
(kind `reconcile`) asks whether a call of a non-idempotent tool, cut short
by a crash, took effect: `reconcile ID --happened [--result TEXT]` or
`--not-happened` (it then runs again with the same idempotency key). An
agent's question to a person (kind `question`, a call of `ask_person`) is
answered with `answer ID --text TEXT`: the text is the call's result. A
budget request (kind `budget`, an agent that used up a bound with
`on_exceeded: ask`) is decided with `extend ID --to N` (a larger limit: the
agent goes on) or `extend ID --stop` (the step fails with `LimitExceeded`).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tidemill.cli._common import (
    Painter,
    add_db_option,
    approval_dict,
    dump_json,
    duration,
    positive_int,
    stamp,
    table,
    with_engine,
)

if TYPE_CHECKING:
    from tidemill.engine import AsyncEngine
    from tidemill.store import ApprovalRow

__all__ = ["register", "run"]

_LISTED = ", or enough of its start to be unique (tidemill approvals list shows them)"
"""How the help of an `ID` argument ends."""

_EPILOG = """\
examples:
  tidemill approvals list
  tidemill approvals approve APPROVAL --as alice --comment "looks good"
  tidemill approvals reject APPROVAL --as alice --comment "too risky"
  tidemill approvals approve APPROVAL --edit-args '{"amount": 20}'   # a tool call's
  tidemill approvals reconcile APPROVAL --happened --result "refund R-7 issued"
  tidemill approvals reconcile APPROVAL --not-happened
  tidemill approvals answer APPROVAL --text "ship it to Berlin" --as alice
  tidemill approvals extend APPROVAL --to 20 --as alice              # a budget's
  tidemill approvals extend APPROVAL --stop
"""


def _json_object(text: str) -> dict[str, Any]:
    """Read `--edit-args`: a JSON object.

    Examples:
        >>> _json_object('{"amount": 20}')
        {'amount': 20}
        >>> _json_object("[1]")
        Traceback (most recent call last):
        ...
        argparse.ArgumentTypeError: expected a JSON object of arguments, e.g. '{"amount": 20}'
    """
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(
            """expected a JSON object of arguments, e.g. '{"amount": 20}'"""
        )
    return value


def register(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
) -> Callable[[argparse.Namespace], int]:
    """Add the `approvals` command and its actions; return the function that runs them."""
    parser = subparsers.add_parser(
        "approvals",
        help="list, approve and reject the decisions runs wait for",
        description="The approval steps runs are waiting on, and the decisions on them.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    listing = actions.add_parser(
        "list",
        help="pending approvals",
        description="Pending approvals, oldest first: who may decide each (APPROVERS) and, "
        "with --all, who decided (DECIDED BY).",
    )
    listing.add_argument(
        "--run", metavar="RUN", help="only those of this run (its id, or a unique start of it)"
    )
    listing.add_argument("--all", action="store_true", help="decided ones too")
    listing.add_argument("--json", action="store_true", help="print JSON")
    subs = [listing]
    for name, verb in (("approve", "Approve"), ("reject", "Reject")):
        effect = (
            "the run goes on (a tool call runs, as it is or with --edit-args)"
            if name == "approve"
            else "an approval step fails, and with it the run; a tool call does not run, "
            "and the agent's model is told why (--comment)"
        )
        sub = actions.add_parser(
            name, help=f"{verb.lower()} an approval", description=f"{verb}: {effect}."
        )
        sub.add_argument("approval_id", metavar="ID", help="the approval's id" + _LISTED)
        _add_actor(sub, "who decides (must be one of the approvers when the step names them)")
        sub.add_argument("--comment", metavar="TEXT", help="why; kept with the decision")
        if name == "approve":
            sub.add_argument(
                "--edit-args",
                dest="edited_arguments",
                metavar="JSON",
                type=_json_object,
                help="a tool call's arguments to run it with instead of the model's",
            )
        subs.append(sub)
    subs.append(_reconcile_parser(actions))
    subs.append(_answer_parser(actions))
    subs.append(_extend_parser(actions))
    for sub in subs:
        add_db_option(sub)
    return run


def _add_actor(sub: argparse.ArgumentParser, help: str) -> None:
    """The `--as NAME` option: who decides or answers."""
    sub.add_argument("--as", dest="actor", metavar="NAME", help=help)


def _reconcile_parser(
    actions: argparse._SubParsersAction[argparse.ArgumentParser],
) -> argparse.ArgumentParser:
    sub = actions.add_parser(
        "reconcile",
        help="say whether a tool call cut short by a crash took effect",
        description="Answer a reconciliation: a call of a non-idempotent tool was running "
        "when its worker died. --happened: it is recorded as finished (with --result as "
        "what the model sees) and not run again; --not-happened: it runs again with the "
        "same idempotency key.",
    )
    sub.add_argument("approval_id", metavar="ID", help="the reconciliation's id" + _LISTED)
    answer = sub.add_mutually_exclusive_group(required=True)
    answer.add_argument(
        "--happened", dest="happened", action="store_true", default=None,
        help="the call took effect: record it as finished, do not run it again",
    )  # fmt: skip
    answer.add_argument(
        "--not-happened", dest="happened", action="store_false",
        help="the call did not take effect: run it again with the same idempotency key",
    )  # fmt: skip
    sub.add_argument("--result", metavar="TEXT", help="the call's result, when it happened")
    _add_actor(sub, "who answers (must be one of the tool's approvers when it names them)")
    return sub


def _answer_parser(
    actions: argparse._SubParsersAction[argparse.ArgumentParser],
) -> argparse.ArgumentParser:
    sub = actions.add_parser(
        "answer",
        help="answer an agent's question (ask_person)",
        description="Answer a question an agent asked with ask_person: the text is the "
        "result of that call, and the agent goes on.",
    )
    sub.add_argument("approval_id", metavar="ID", help="the question's id" + _LISTED)
    sub.add_argument("--text", required=True, metavar="TEXT", help="the answer")
    _add_actor(sub, "who answers (one of the questions' approvers, when the step names them)")
    return sub


def _extend_parser(
    actions: argparse._SubParsersAction[argparse.ArgumentParser],
) -> argparse.ArgumentParser:
    sub = actions.add_parser(
        "extend",
        help="extend an agent's budget, or stop it",
        description="Decide a budget request: an agent step used up a bound (max_requests, "
        "max_tool_calls, a token bound, or max_duration, in seconds) with on_exceeded: ask. "
        "--to N raises the bound to N (larger than its limit; for max_duration, than the "
        "time already used) and the agent goes on from its journal; --stop fails the step "
        "with LimitExceeded.",
    )
    sub.add_argument("approval_id", metavar="ID", help="the budget request's id" + _LISTED)
    decision = sub.add_mutually_exclusive_group(required=True)
    decision.add_argument(
        "--to", dest="new_limit", type=positive_int, metavar="N",
        help="the new limit of the bound (larger than the current one)",
    )  # fmt: skip
    decision.add_argument(
        "--stop", action="store_true", help="do not extend: the step fails with LimitExceeded"
    )
    _add_actor(sub, "who decides (must be one of the approvers when the request names them)")
    return sub


def run(args: argparse.Namespace) -> int:
    """Run one `approvals` action; return its exit status."""
    if args.action == "list":
        return with_engine(args, lambda engine: _list(engine, args))
    return with_engine(args, lambda engine: _decide(engine, args))


async def _list(engine: AsyncEngine, args: argparse.Namespace) -> int:
    if args.run is not None:
        await engine.get(args.run)  # an unknown run is an error, not an empty list
    rows = await engine.approvals(args.run, status=None if args.all else "pending")
    if args.json:
        print(dump_json([approval_dict(row) for row in rows]))
        return 0
    if not rows:
        print("no pending approvals" if not args.all else "no approvals", file=sys.stderr)
        return 0
    paint = Painter(sys.stdout)
    lines = [
        [
            row.id,
            row.root_id,
            row.step_id,
            paint(row.status),
            _approvers(row),
            *([row.decided_by or "-"] if args.all else []),
            stamp(row.created_at),
            _expiry(row),
            _what(row),
        ]
        for row in rows
    ]
    decider = ["DECIDED BY"] if args.all else []
    headers = ["ID", "RUN", "STEP", "STATUS", "APPROVERS", *decider, "CREATED", "EXPIRES"]
    print(table([*headers, "MESSAGE"], lines))
    return 0


def _what(row: ApprovalRow) -> str:
    """The message, or for a tool call its tool and arguments (and a reconciliation's question)."""
    if row.kind == "question":
        return f"question: {row.message}"
    if row.kind not in ("tool_call", "reconcile"):
        return row.message
    details = row.details or {}
    arguments = json.dumps(details.get("arguments", {}), ensure_ascii=False)
    call = f"tool call {details.get('tool', '?')} {arguments}"
    return f"{details.get('question', '')} {call}" if row.kind == "reconcile" else call


def _approvers(row: ApprovalRow) -> str:
    """Who may decide: the approvers the step names, or anyone."""
    return ",".join(row.approvers) if row.approvers else "anyone"


def _expiry(row: ApprovalRow) -> str:
    if row.expires_at is None or row.status != "pending":
        return "-"
    return f"in {duration(row.expires_at - time.time())} ({row.on_timeout})"


async def _decide(engine: AsyncEngine, args: argparse.Namespace) -> int:
    if args.action == "extend":
        return await _extend(engine, args)
    if args.action == "answer":
        row = await engine.answer(args.approval_id, args.text, actor=args.actor)
        by = f" by {row.decided_by}" if row.decided_by else ""
        print(f"approval {row.id}: answered{by} (run {row.root_id}, step {row.step_id})")
        return 0
    if args.action == "reconcile":
        row = await engine.reconcile(
            args.approval_id, args.happened, actor=args.actor, result=args.result
        )
        answer = "took effect" if args.happened else "did not take effect (it runs again)"
        by = f" by {row.decided_by}" if row.decided_by else ""
        print(f"approval {row.id}: the call {answer}{by} (run {row.root_id}, step {row.step_id})")
        return 0
    if args.action == "approve":
        row = await engine.approve(
            args.approval_id,
            actor=args.actor,
            comment=args.comment,
            edited_arguments=args.edited_arguments,
        )
    else:
        row = await engine.reject(args.approval_id, actor=args.actor, comment=args.comment)
    by = f" by {row.decided_by}" if row.decided_by else ""
    print(f"approval {row.id} {row.status}{by} (run {row.root_id}, step {row.step_id})")
    return 0


async def _extend(engine: AsyncEngine, args: argparse.Namespace) -> int:
    new_limit = None if args.stop else args.new_limit
    row = await engine.extend(args.approval_id, new_limit, actor=args.actor)
    bound = (row.details or {}).get("bound", "its bound")
    by = f" by {row.decided_by}" if row.decided_by else ""
    if args.stop:
        outcome = f"stopped{by}: the step fails with LimitExceeded"
    else:
        outcome = f"{bound} extended to {args.new_limit}{by}"
    print(f"approval {row.id}: {outcome} (run {row.root_id}, step {row.step_id})")
    return 0
