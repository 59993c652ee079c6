"""`tidemill schedules`: make, list, show, pause and resume schedules; their next and past fires.

A schedule is a workspace item (kind `schedule`) that runs a flow or script
at the times of a cron expression in a time zone, as its owner (who saved it
last). A running `tidemill worker` or `tidemill server` fires it. Each
command opens the workspace as the local user or `--as USER`, as `tidemill
ws` does, and the workspace's permission module decides.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tidemill.cli._common import dump_json, positive_int, table
from tidemill.cli._times import in_zone
from tidemill.cli._ws_people import Actions, add_ws_options, handler, open_workspace
from tidemill.errors import ConfigurationError, ItemNotFound
from tidemill.flows import iso_time

if TYPE_CHECKING:
    from tidemill.workspace import ScheduleFire, ScheduleInfo

__all__ = ["register", "run"]

_EPILOG = """\
examples:
  tidemill schedules create f/ops/nightly --cron "0 30 2 * * *" --timezone Europe/Paris \\
      --target f/ops/report --inputs '{"days": 1}' --on-failure f/ops/page-someone
  tidemill schedules list --under f/ops/
  tidemill schedules show f/ops/nightly
  tidemill schedules next f/ops/nightly --count 10
  tidemill schedules pause f/ops/nightly
  tidemill schedules resume f/ops/nightly
  tidemill schedules fires f/ops/nightly --limit 20
"""

_MAX_NEXT = 1000


def _inputs(text: str) -> dict[str, Any]:
    """Read `--inputs`: a JSON object.

    Examples:
        >>> _inputs('{"days": 1}')
        {'days': 1}
        >>> _inputs("1")
        Traceback (most recent call last):
        ...
        argparse.ArgumentTypeError: expected a JSON object of inputs, e.g. '{"days": 1}'
    """
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("""expected a JSON object of inputs, e.g. '{"days": 1}'""")
    return value


def register(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
) -> Callable[[argparse.Namespace], int]:
    """Add the `schedules` command and its actions; return the function that runs them."""
    parser = subparsers.add_parser(
        "schedules",
        help="run flows on a cron schedule: create, list, pause, resume, fires",
        description="Schedules run a workspace flow or script at the times of a cron "
        "expression (with seconds and a time zone), as their owner.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    _create(actions)
    sub = handler(actions.add_parser("list", help="the schedules you may read"), _list)
    sub.description = "The schedules you may read, by path, with their next fire."
    sub.add_argument("--under", metavar="PREFIX", help="only paths starting so (f/ops/)")
    add_ws_options(sub, json_output=True)
    for name, fn, text in (
        ("show", _show, "a schedule's settings and next fires"),
        ("pause", _pause, "stop a schedule firing (from its next fire on)"),
        ("resume", _resume, "start it firing again, as you (you become its owner)"),
    ):
        sub = handler(actions.add_parser(name, help=text), fn)
        sub.description = text[0].upper() + text[1:] + "."
        sub.add_argument("path", metavar="PATH", help="the schedule's path")
        add_ws_options(sub, json_output=True)
    sub = handler(actions.add_parser("next", help="when a schedule fires next"), _next)
    sub.description = "Its next fire times, in its time zone and in UTC (paused: if resumed)."
    sub.add_argument("path", metavar="PATH", help="the schedule's path")
    sub.add_argument("--count", type=positive_int, default=10, metavar="N",
                     help=f"how many (default: %(default)s, at most {_MAX_NEXT})")  # fmt: skip
    add_ws_options(sub, json_output=True)
    sub = handler(actions.add_parser("fires", help="a schedule's past fires"), _fires)
    sub.description = "Its fires, newest first: started (with the run), skipped or failed."
    sub.add_argument("path", metavar="PATH", help="the schedule's path")
    sub.add_argument("--limit", type=positive_int, default=50, metavar="N",
                     help="the most to show (default: %(default)s)")  # fmt: skip
    add_ws_options(sub, json_output=True)
    return run


def _create(actions: Actions) -> None:
    sub = handler(actions.add_parser("create", help="make (or replace) a schedule"), _write)
    sub.description = (
        "Write a schedule item at PATH (a new version if one is there): it runs --target "
        "at the times of --cron, as you."
    )
    sub.add_argument("path", metavar="PATH", help="where: f/<folder>/<name> or u/<user>/<name>")
    sub.add_argument(
        "--cron",
        required=True,
        metavar="EXPR",
        help='5 fields, 6 with the seconds first, or @daily ... ("0 30 2 * * *")',
    )
    sub.add_argument("--target", required=True, metavar="FLOW",
                     help="the workspace flow or script each fire runs")  # fmt: skip
    sub.add_argument("--timezone", default="UTC", metavar="ZONE",
                     help="the IANA zone the cron times are in (default: UTC)")  # fmt: skip
    sub.add_argument("--inputs", type=_inputs, default={}, metavar="JSON",
                     help="the input each run gets, a JSON object")  # fmt: skip
    sub.add_argument(
        "--catch-up",
        choices=("latest", "all", "skip"),
        default="latest",
        help="fires missed while nothing ran: run the latest (default), all, or none",
    )
    sub.add_argument("--on-failure", metavar="FLOW", help="a flow run when a fired run fails")
    sub.add_argument("--on-recovery", metavar="FLOW",
                     help="a flow run on the first success after failures")  # fmt: skip
    sub.add_argument("--paused", action="store_true", help="make it paused (it fires nothing)")
    sub.add_argument("-m", "--message", default="", help="the version's message")
    add_ws_options(sub, json_output=True)


def run(args: argparse.Namespace) -> int:
    """Run one `schedules` action; return its exit status."""
    action: Callable[[argparse.Namespace], int] = args.handler
    return action(args)


def _dict(info: ScheduleInfo) -> dict[str, Any]:
    return {
        "path": info.path,
        **info.spec.model_dump(mode="json"),
        "owner": info.owner,
        "version": info.version,
        "updated_at": iso_time(info.updated_at),
        "next_fires": [iso_time(at) for at in info.next_fires],
    }


def _state(info: ScheduleInfo) -> str:
    return "active" if info.spec.enabled else "paused"


def _print_one(info: ScheduleInfo, args: argparse.Namespace) -> None:
    if args.json:
        print(dump_json(_dict(info)))
        return
    spec = info.spec
    rows = [
        ("path", info.path), ("state", _state(info)), ("cron", spec.cron),
        ("timezone", spec.timezone), ("target", spec.target),
        ("inputs", json.dumps(spec.inputs)), ("catch up", spec.catch_up),
        ("on failure", spec.on_failure or "-"), ("on recovery", spec.on_recovery or "-"),
        ("owner", f"{info.owner} (it runs as them)"), ("version", str(info.version)),
    ]  # fmt: skip
    for label, value in rows:
        print(f"{label + ':':13} {value}")
    if info.next_fires:
        print("next fires:")
        _print_fires(info.next_fires, spec.timezone)
    else:
        print("next fires:   none while paused (tidemill schedules resume " + info.path + ")")


def _print_fires(fires: tuple[float, ...] | list[float], zone: str) -> None:
    headers = [zone, "UTC"] if zone != "UTC" else ["UTC", "UTC (ISO 8601)"]
    print(table(headers, [[in_zone(at, zone), iso_time(at)] for at in fires]))


def _write(args: argparse.Namespace) -> int:
    value: dict[str, Any] = {
        "cron": args.cron, "timezone": args.timezone, "target": args.target,
        "inputs": args.inputs, "enabled": not args.paused, "catch_up": args.catch_up,
    }  # fmt: skip
    for key in ("on_failure", "on_recovery"):
        if getattr(args, key):
            value[key] = getattr(args, key)
    with open_workspace(args) as ws:
        item = ws.write(args.path, "schedule", value, message=args.message)
        info = ws.schedule(item.path)
    _print_one(info, args)
    return 0


def _list(args: argparse.Namespace) -> int:
    with open_workspace(args) as ws:
        found = ws.schedules(args.under)
    if args.json:
        print(dump_json([_dict(info) for info in found]))
        return 0
    if not found:
        print("no schedules" + (f" under {args.under}" if args.under else ""))
        return 0
    rows = [
        [info.path, info.spec.cron, info.spec.timezone, info.spec.target, _state(info),
         in_zone(info.next_fires[0], info.spec.timezone) if info.next_fires else "-"]
        for info in found
    ]  # fmt: skip
    print(table(["PATH", "CRON", "TIMEZONE", "TARGET", "STATE", "NEXT FIRE"], rows))
    return 0


def _show(args: argparse.Namespace) -> int:
    with open_workspace(args) as ws:
        info = ws.schedule(args.path)
    _print_one(info, args)
    return 0


def _pause(args: argparse.Namespace) -> int:
    with open_workspace(args) as ws:
        info = ws.pause_schedule(args.path)
    if args.json:
        _print_one(info, args)
    else:
        print(f"paused {info.path}: it fires nothing until resumed")
    return 0


def _resume(args: argparse.Namespace) -> int:
    with open_workspace(args) as ws:
        info = ws.resume_schedule(args.path)
    if args.json:
        _print_one(info, args)
        return 0
    first = in_zone(info.next_fires[0], info.spec.timezone) if info.next_fires else "-"
    print(f"resumed {info.path}: it runs as {info.owner}; next fire {first}")
    return 0


def _next(args: argparse.Namespace) -> int:
    if args.count > _MAX_NEXT:
        raise ConfigurationError(
            f"--count is at most {_MAX_NEXT}, not {args.count}.",
            hint="Ask for fewer fires, e.g. --count 100.",
        )
    with open_workspace(args) as ws:
        info = ws.schedule(args.path)
    fires = info.spec.cron_schedule().next_fires(time.time(), args.count)
    if args.json:
        print(dump_json({"path": info.path, "enabled": info.spec.enabled,
                         "next_fires": [iso_time(at) for at in fires]}))  # fmt: skip
        return 0
    if not info.spec.enabled:
        print(f"{info.path} is paused: these are its times once resumed")
    _print_fires(fires, info.spec.timezone)
    return 0


def _fire_dict(fire: ScheduleFire) -> dict[str, Any]:
    shown = dataclasses.asdict(fire)
    shown["fire_at"], shown["created_at"] = iso_time(fire.fire_at), iso_time(fire.created_at)
    return shown


def _fires(args: argparse.Namespace) -> int:
    with open_workspace(args) as ws:
        found = ws.schedule_fires(args.path, limit=args.limit)
        zone = "UTC"
        with contextlib.suppress(ItemNotFound):  # a deleted schedule's fires are in UTC
            zone = ws.schedule(args.path).spec.timezone
    if args.json:
        print(dump_json([_fire_dict(f) for f in found]))
        return 0
    if not found:
        print(f"{args.path} has not fired yet")
        return 0
    rows = [
        [in_zone(f.fire_at, zone), f.status, f.run_id or "-", f.outcome or "-",
         f.handler_id or "-", f.error or "-"]
        for f in found
    ]  # fmt: skip
    print(table(["FIRE AT", "STATUS", "RUN", "OUTCOME", "HANDLER", "ERROR"], rows))
    return 0
