"""`tidemill events`: send an event to the runs waiting for it; list the events kept for later.

`events send NAME --key K --data JSON --path f/<folder>/<flow>` ends every
`wait_for_event` step of that flow's runs waiting for `NAME` and `K` (the
payload is each step's result); when none waits, the event is kept
(`--keep`, 7 days by default) for the first step that comes to wait for it.
With `--path`, the sender must be allowed to run the flow (asked of the
workspace as the local user, or `--as USER`); with no path the event is for
runs of flows from files or Python (with `--as`, a workspace admin's).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tidemill.cli._common import add_db_option, dump_json, positive_int, require_store, stamp, table
from tidemill.cli._ws_people import add_ws_options, handler
from tidemill.errors import ConfigurationError
from tidemill.flows import iso_time

if TYPE_CHECKING:
    from tidemill.engine import AsyncEngine, Delivery

__all__ = ["register", "run"]

_EPILOG = """\
examples:
  tidemill events send order_paid --key 42 --data '{"amount": 10}' --path f/shop/checkout
  echo '{"amount": 10}' | tidemill events send order_paid --key 42 --data-file - \
      --path f/shop/checkout
  tidemill events send nightly_done --keep 1h            # runs of flows from files
  tidemill events kept --name order_paid
"""

_MAX_KEEP = 366 * 86400.0


def keep_duration(text: str) -> float:
    """Read `--keep`: a duration (`7d`, `12h`, seconds), at most 366 days.

    Examples:
        >>> keep_duration("7d"), keep_duration("90")
        (604800.0, 90.0)
        >>> keep_duration("400d")
        Traceback (most recent call last):
        ...
        argparse.ArgumentTypeError: an event is kept at most 366 days, not '400d'
    """
    from tidemill.flows import parse_duration

    try:
        seconds = parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if seconds > _MAX_KEEP:
        raise argparse.ArgumentTypeError(f"an event is kept at most 366 days, not {text!r}")
    return seconds


def register(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
) -> Callable[[argparse.Namespace], int]:
    """Add the `events` command and its actions; return the function that runs them."""
    parser = subparsers.add_parser(
        "events",
        help="send events to the runs waiting for them",
        description="Send an event to the wait_for_event steps waiting for it; list the "
        "events kept for steps to come.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    sub = handler(actions.add_parser("send", help="send an event"), _send)
    sub.description = (
        "Send an event: it ends each wait_for_event step waiting for NAME and --key (its "
        "payload becomes the step's result), or is kept for a step to come."
    )
    sub.add_argument("name", metavar="NAME", help="the event's name (as the steps name it)")
    sub.add_argument("--key", default="", help="the event's key (what the steps' key gives)")
    data = sub.add_mutually_exclusive_group()
    data.add_argument("--data", metavar="JSON", help="the payload, as JSON (default: null)")
    data.add_argument(
        "--data-file", metavar="FILE", help="a file of JSON for the payload (- for stdin)"
    )
    sub.add_argument(
        "--path",
        metavar="PATH",
        help="the workspace flow whose runs it is for (none: runs of flow files)",
    )
    sub.add_argument(
        "--dedupe-id",
        metavar="ID",
        help="your id for it: sending it again while it is kept does nothing",
    )
    sub.add_argument(
        "--keep",
        type=keep_duration,
        default=None,
        metavar="DURATION",
        help="how long to keep it when no step waits yet (default: 7d)",
    )
    add_ws_options(sub, json_output=True)
    sub = handler(actions.add_parser("kept", help="events no step has taken yet"), _kept)
    sub.description = (
        "Events sent that no step has taken yet, oldest first, and until when each is kept."
    )
    sub.add_argument("--name", metavar="NAME", help="only events of this name")
    sub.add_argument("--limit", type=positive_int, default=100, metavar="N",
                     help="the most to show (default: %(default)s)")  # fmt: skip
    add_db_option(sub)
    sub.add_argument("--json", action="store_true", help="print JSON")
    return run


def run(args: argparse.Namespace) -> int:
    """Run one `events` action; return its exit status."""
    action: Callable[[argparse.Namespace], int] = args.handler
    return action(args)


def _payload(args: argparse.Namespace) -> Any:
    if args.data is None and args.data_file is None:
        return None
    if args.data is not None:
        text, where = args.data, "--data"
    elif args.data_file == "-":
        text, where = sys.stdin.read(), "standard input"
    else:
        file = Path(args.data_file)
        if not file.is_file():
            raise ConfigurationError(
                f"No file {file}.", hint="Give --data-file the path of a JSON file, or - for stdin."
            )
        text, where = file.read_text(encoding="utf-8"), str(file)
    try:
        return json.loads(text)
    except ValueError as exc:
        raise ConfigurationError(
            f"The payload from {where} is not JSON: {exc}.",
            hint="""Give JSON, e.g. --data '{"amount": 10}' (quote it for the shell), """
            """or --data '"text"' for a string.""",
        ) from None


def _engine_run(args: argparse.Namespace, action: Callable[[AsyncEngine], Any]) -> Any:
    from tidemill.engine import AsyncEngine

    url = require_store(args)

    async def main() -> Any:
        async with AsyncEngine(url) as engine:
            return await action(engine)

    return asyncio.run(main())


def _send(args: argparse.Namespace) -> int:
    from tidemill.engine import EVENT_KEEP
    from tidemill.workspace import DEFAULT_WORKSPACE, AsyncWorkspace, local_user

    payload = _payload(args)
    name = args.workspace or DEFAULT_WORKSPACE

    async def send(engine: AsyncEngine) -> Delivery:
        options: dict[str, Any] = {
            "dedupe_id": args.dedupe_id, "keep": EVENT_KEEP if args.keep is None else args.keep
        }  # fmt: skip
        if not args.path and not args.actor:  # runs of flow files, from the store's own host
            return await engine.send_event(
                args.name, args.key, payload, sent_by=local_user(), **options
            )
        async with AsyncWorkspace(engine.store, workspace=name) as ws:
            acting = await ws.acting_as(args.actor) if args.actor else ws
            target = await acting.check_event_target(args.path)
            delivery = await engine.send_event(
                args.name, args.key, payload, workspace=name if target else "", path=target,
                sent_by=acting.user, **options,
            )  # fmt: skip
            if not delivery.duplicate:
                await acting.record_event_sent(
                    target, name=args.name, key=args.key, event_id=delivery.event_id,
                    delivered_to=delivery.delivered_to,
                )  # fmt: skip
            return delivery

    delivery: Delivery = _engine_run(args, send)
    if args.json:
        print(dump_json(_delivery_dict(delivery)))
    elif delivery.duplicate:
        print(f"not sent again: an event with dedupe id {args.dedupe_id!r} was sent already")
    elif delivery.delivered_to:
        count = len(delivery.delivered_to)
        print(f"delivered to {count} run{'s' if count != 1 else ''}:")
        for run_id in delivery.delivered_to:
            print(f"  {run_id}")
    else:
        assert delivery.kept_until is not None
        print(f"no step waits for it yet: kept until {stamp(delivery.kept_until)}")
    return 0


def _delivery_dict(delivery: Delivery) -> dict[str, Any]:
    until = delivery.kept_until
    return {
        "event_id": delivery.event_id,
        "delivered_to": list(delivery.delivered_to),
        "kept_until": None if until is None else iso_time(until),
        "duplicate": delivery.duplicate,
    }


def _kept(args: argparse.Namespace) -> int:
    rows = _engine_run(args, lambda engine: engine.kept_events(name=args.name, limit=args.limit))
    if args.json:
        shown = [
            {
                "event_id": r.id, "name": r.name, "key": r.key, "workspace": r.workspace or None,
                "path": r.path or None, "payload": r.payload, "dedupe_id": r.dedupe_id,
                "sent_by": r.sent_by, "sent_at": iso_time(r.sent_at),
                "kept_until": iso_time(r.keep_until),
            }
            for r in rows
        ]  # fmt: skip
        print(dump_json(shown))
        return 0
    if not rows:
        print("no events are kept", file=sys.stderr)
        return 0
    print(
        table(
            ["ID", "NAME", "KEY", "PATH", "SENT BY", "SENT", "KEPT UNTIL"],
            [
                [
                    str(r.id),
                    r.name,
                    r.key or "-",
                    r.path or "-",
                    r.sent_by or "-",
                    stamp(r.sent_at),
                    stamp(r.keep_until),
                ]
                for r in rows
            ],
        )
    )
    return 0
