"""`tidemill ws`: the workspace's items, drafts, variables, people and keys from a terminal.

Each command opens the workspace (`--db`, `--workspace`) as the local user
(`TIDEMILL_USER`, else the login name) or, with `--as USER`, as that user
(workspace admins only). Values go to stdout and notes to stderr, so
`tidemill ws show f/x/flow > flow.yaml` and `tidemill ws write f/x/flow
--kind flow --file flow.yaml` round-trip. A secret is read from standard input
only, and printed only by `ws show --reveal`.

`tidemill run f/<folder>/<flow>` runs a deployed flow by its path:
`submit_path` below is what `tidemill run` calls.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tidemill.cli._common import dump_json, positive_int, stamp, table
from tidemill.cli._ws_agents import register_agents
from tidemill.cli._ws_people import (
    Actions,
    add_ws_options,
    handler,
    open_workspace,
    read_secret,
    register_people,
)
from tidemill.cli._ws_tokens import register_tokens
from tidemill.errors import ConfigurationError

if TYPE_CHECKING:
    from tidemill.engine import AsyncEngine
    from tidemill.flows import Flow
    from tidemill.workspace import Item

__all__ = ["is_workspace_target", "register", "run", "submit_flow"]

_KINDS = ("script", "flow", "resource", "variable", "resource_type", "schedule")

_EPILOG = """\
examples:
  tidemill ws folders add support
  tidemill ws write f/support/triage --kind flow --file triage.yaml -m "first"
  tidemill ws list f/support/
  tidemill ws show f/support/triage > triage.yaml
  printf %s "$TOKEN" | tidemill ws variables set f/support/token --secret
  tidemill ws grant f/support alice writer
  tidemill run f/support/triage -i ticket=42
"""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> Callable[..., int]:
    """Add the `ws` command and its actions; return the function that runs them."""
    parser = subparsers.add_parser(
        "ws",
        help="the workspace: items at paths, drafts, variables, users, folders, keys",
        description="Read and change what the workspace holds: scripts, flows, resources, "
        "variables and resource types at u/<user>/... and f/<folder>/... paths.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    _items(actions)
    _drafts(actions)
    _variables(actions)
    sub = handler(actions.add_parser("search", help="find items by words"), _search)
    sub.description = "Items whose paths, summaries or descriptions match, best first (fuzzy)."
    sub.add_argument("query", metavar="QUERY", help="words to look for")
    sub.add_argument("--kind", action="append", choices=_KINDS, metavar="KIND",
                     help="only items of this kind (repeatable)")  # fmt: skip
    sub.add_argument("--limit", type=positive_int, default=20, metavar="N",
                     help="the most hits to show (default: %(default)s)")  # fmt: skip
    add_ws_options(sub, json_output=True)
    sub = handler(actions.add_parser("types", help="the built-in resource types"), _types)
    sub.description = "The built-in resource types a resource's --type may name."
    sub.add_argument("--json", action="store_true", help="print JSON (with each type's schema)")
    register_people(actions)
    register_agents(actions)
    register_tokens(actions)
    return run


def run(args: argparse.Namespace) -> int:
    """Run one `ws` action; return its exit status."""
    action: Callable[[argparse.Namespace], int] = args.handler
    return action(args)


def _items(actions: Actions) -> None:
    sub = handler(actions.add_parser("list", help="items under a path"), _list)
    sub.description = (
        "The items you may read under `PREFIX` (default: every one), by path, a page at a "
        "time (values left out)."
    )
    sub.add_argument("prefix", metavar="PREFIX", nargs="?", default="",
                     help="a start of paths: f/<folder>/, u/<user>/ (default: all)")  # fmt: skip
    _kind_option(sub)
    sub.add_argument("--after", metavar="PATH", help="the last path of the previous page")
    sub.add_argument("--limit", type=positive_int, default=100, metavar="N",
                     help="the most items to show (default: %(default)s)")  # fmt: skip
    add_ws_options(sub, json_output=True)
    sub = handler(actions.add_parser("show", help="an item's value"), _show)
    sub.description = (
        "Print an item's value: a script's code; a flow, resource or resource type as "
        "YAML; a variable's text (<secret> for a secret one, unless --reveal)."
    )
    sub.add_argument("path", metavar="PATH", help="the item's path")
    sub.add_argument("--version", type=positive_int, metavar="N", help="a past version")
    sub.add_argument("--reveal", action="store_true",
                     help="print a secret variable's value (audited)")  # fmt: skip
    add_ws_options(sub, json_output=True)
    sub = handler(_mixed(actions, "write", help="write an item (a new version)"), _write)
    sub.description = (
        "Write an item from --file FILE or, given `-`, from standard input: YAML or JSON "
        "for flows, resources and resource types, text for scripts and variables (use `ws "
        "variables set` for secrets)."
    )
    sub.add_argument("path", metavar="PATH", help="where: f/<folder>/<name> or u/<user>/<name>")
    sub.add_argument("source", metavar="-", nargs="?", choices=["-"],
                     help="read the value from standard input")  # fmt: skip
    _value_options(sub)
    sub.add_argument("-m", "--message", metavar="TEXT", default="", help="why; kept with it")
    add_ws_options(sub)
    sub = handler(actions.add_parser("history", help="an item's versions"), _history)
    sub.description = "Every kept version of an item, newest first."
    sub.add_argument("path", metavar="PATH", help="the item's path")
    add_ws_options(sub, json_output=True)
    sub = handler(actions.add_parser("diff", help="what changed between versions"), _diff)
    sub.description = "A unified diff between versions `OLD` and `NEW` (default: the current)."
    sub.add_argument("path", metavar="PATH", help="the item's path")
    sub.add_argument("old", metavar="OLD", type=positive_int, help="the older version")
    sub.add_argument("new", metavar="NEW", type=positive_int, nargs="?", help="the newer one")
    add_ws_options(sub)
    sub = handler(actions.add_parser("restore", help="write an old version forward"), _restore)
    sub.add_argument("path", metavar="PATH", help="the item's path")
    sub.add_argument("version", metavar="VERSION", type=positive_int, help="the version")
    sub.add_argument("-m", "--message", metavar="TEXT", default="", help="why")
    add_ws_options(sub)
    sub = handler(actions.add_parser("clear-history", help="drop past versions"), _clear)
    sub.description = "Drop every past version of an item, keeping the current one."
    sub.add_argument("path", metavar="PATH", help="the item's path")
    add_ws_options(sub)
    sub = handler(actions.add_parser("delete", help="delete an item"), _delete)
    sub.description = "Delete an item; its history stays readable."
    sub.add_argument("path", metavar="PATH", help="the item's path")
    add_ws_options(sub)


class _Intermixed(argparse.ArgumentParser):
    """A parser that takes its positionals between its options: `write PATH --kind K -`."""

    _mixing = False

    def parse_known_args(  # type: ignore[override]
        self, args: Any = None, namespace: Any = None
    ) -> tuple[argparse.Namespace, list[str]]:
        if self._mixing:
            return super().parse_known_args(args, namespace)
        self._mixing = True
        try:
            return self.parse_known_intermixed_args(args, namespace)
        finally:
            self._mixing = False


def _mixed(actions: Actions, name: str, **kwargs: Any) -> argparse.ArgumentParser:
    """`actions.add_parser(name, ...)`, made an `_Intermixed` parser."""
    saved = actions._parser_class
    actions._parser_class = _Intermixed
    try:
        return actions.add_parser(name, **kwargs)
    finally:
        actions._parser_class = saved


def _kind_option(sub: argparse.ArgumentParser, *, required: bool = False) -> None:
    sub.add_argument("--kind", choices=_KINDS, required=required, metavar="KIND",
                     help=f"the kind: {', '.join(_KINDS)}")  # fmt: skip


def _value_options(sub: argparse.ArgumentParser) -> None:
    _kind_option(sub, required=True)
    sub.add_argument("--file", "-f", metavar="FILE", help="read the value from FILE (- for stdin)")
    sub.add_argument("--type", dest="resource_type", metavar="TYPE",
                     help="a resource's type: built-in (tidemill ws types) or a path")  # fmt: skip
    sub.add_argument("--summary", metavar="TEXT", help="one line on what it is")


def _drafts(actions: Actions) -> None:
    drafts = actions.add_parser(
        "drafts", help="your drafts: changes nobody runs until deployed",
        description="Your drafts of scripts, flows and resources.",
    ).add_subparsers(dest="ws_action", metavar="ACTION", required=True)  # fmt: skip
    sub = handler(drafts.add_parser("list", help="your drafts"), _drafts_list)
    add_ws_options(sub, json_output=True)
    sub = handler(_mixed(drafts, "save", help="save a draft"), _drafts_save)
    sub.description = "Save your draft of an item from --file FILE or, given `-`, standard input."
    sub.add_argument("path", metavar="PATH", help="the item's path")
    sub.add_argument("source", metavar="-", nargs="?", choices=["-"],
                     help="read the value from standard input")  # fmt: skip
    _value_options(sub)
    add_ws_options(sub)
    sub = handler(drafts.add_parser("show", help="a draft's value"), _drafts_show)
    sub.add_argument("path", metavar="PATH", help="the item's path")
    add_ws_options(sub, json_output=True)
    sub = handler(drafts.add_parser("discard", help="drop a draft"), _drafts_discard)
    sub.add_argument("path", metavar="PATH", help="the item's path")
    add_ws_options(sub)
    sub = handler(actions.add_parser("deploy", help="deploy your draft"), _deploy)
    sub.description = "Write your draft of an item as its new version, and drop the draft."
    sub.add_argument("path", metavar="PATH", help="the item's path")
    sub.add_argument("-m", "--message", metavar="TEXT", default="", help="why; kept with it")
    add_ws_options(sub)


def _variables(actions: Actions) -> None:
    variables = actions.add_parser(
        "variables", help="set and list variables (secrets from stdin only)",
        description="Variables: text values, secret ones encrypted at rest.",
    ).add_subparsers(dest="ws_action", metavar="ACTION", required=True)  # fmt: skip
    sub = handler(variables.add_parser("set", help="set a variable from stdin"), _variables_set)
    sub.description = (
        "Set a variable to what standard input holds (one trailing newline stripped); on a "
        "terminal, it is asked for without echo. Never pass a value on the command line."
    )
    sub.add_argument("path", metavar="PATH", help="the variable's path")
    sub.add_argument("--secret", action="store_true", help="encrypt it; it is never shown")
    sub.add_argument("--summary", metavar="TEXT", help="one line on what it is")
    add_ws_options(sub)
    sub = handler(variables.add_parser("list", help="the variables"), _variables_list)
    sub.description = "The variables you may read under `PREFIX` (default: every one)."
    sub.add_argument("prefix", metavar="PREFIX", nargs="?", default="", help="a start of paths")
    add_ws_options(sub, json_output=True)


# --- values -----------------------------------------------------------------------------------


def _read_source(args: argparse.Namespace) -> tuple[str, str]:
    """The text named by `--file F` or `-`, and what to call it in messages."""
    given = [name for name in (args.source, args.file) if name is not None]
    if len(given) != 1:
        raise ConfigurationError(
            "Give the value once: --file FILE, or - to read standard input.",
            hint=f"For example: tidemill ws write {args.path} --kind {args.kind} --file F",
        )
    name = given[0]
    if name == "-":
        return sys.stdin.read(), "standard input"
    try:
        return Path(name).read_text("utf-8"), name
    except OSError as exc:
        raise ConfigurationError(f"Cannot read {name}: {exc.strerror or exc}.") from None
    except UnicodeDecodeError:
        raise ConfigurationError(f"{name} is not UTF-8 text.") from None


def _parse(kind: str, text: str, label: str) -> Any:
    """The value of an item of `kind` written as `text`."""
    if kind == "script":
        return text
    if kind == "variable":
        return text[:-1] if text.endswith("\n") else text
    import yaml

    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        raise ConfigurationError(  # the text is not quoted: a value may hold a secret
            f"{label} is not YAML or JSON{where}.",
            hint=f"A {kind.replace('_', ' ')} is written as a YAML or JSON document.",
        ) from None
    if kind == "flow" and not isinstance(value, dict):
        raise ConfigurationError(f"{label} does not hold a flow document (a mapping).")
    return value


def _render(kind: str, value: Any, *, secret: bool = False) -> str:
    """How `show` prints a value."""
    if kind == "variable":
        return "<secret>" if secret and value is None else str(value)
    if kind == "script":
        return str(value).rstrip("\n")
    import yaml

    return yaml.safe_dump(value, sort_keys=False, allow_unicode=True).rstrip("\n")


def _item_dict(item: Item) -> dict[str, Any]:
    return dataclasses.asdict(item)


def _note(text: str) -> None:
    print(text, file=sys.stderr)


# --- items ------------------------------------------------------------------------------------


def _list(args: argparse.Namespace, *, kind: str | None = None) -> int:
    kind = kind or getattr(args, "kind", None)
    limit = getattr(args, "limit", 100)
    with open_workspace(args) as ws:
        items = ws.list(args.prefix, kind=kind, after=getattr(args, "after", None), limit=limit)  # type: ignore[arg-type]
    if args.json:
        print(dump_json([_item_dict(item) for item in items]))
        return 0
    if not items:
        _note(f"no items{' under ' + args.prefix if args.prefix else ''}")
        return 0
    rows = [
        [i.path, i.kind + (" (secret)" if i.secret else ""), str(i.version or "-"),
         i.summary or "-", i.updated_by, stamp(i.updated_at)]
        for i in items
    ]  # fmt: skip
    print(table(["PATH", "KIND", "VERSION", "SUMMARY", "UPDATED BY", "UPDATED AT"], rows))
    if len(items) == limit:
        _note(f"more: tidemill ws list {args.prefix or chr(39) * 2} --after {items[-1].path}")
    return 0


def _show(args: argparse.Namespace) -> int:
    with open_workspace(args) as ws:
        item = ws.get(args.path, version=args.version, reveal=args.reveal)
    if args.json:
        print(dump_json(_item_dict(item)))
        return 0
    by = f"by {item.updated_by} at {stamp(item.updated_at)}"
    version = f", version {item.version}" if item.version else ""
    _note(f"{item.path}: {item.kind}{' (secret)' if item.secret else ''}{version}, {by}")
    print(_render(item.kind, item.value, secret=item.secret))
    return 0


def _write(args: argparse.Namespace) -> int:
    text, label = _read_source(args)
    value = _parse(args.kind, text, label)
    with open_workspace(args) as ws:
        item = ws.write(
            args.path, args.kind, value, summary=args.summary,
            resource_type=args.resource_type, message=args.message,
        )  # fmt: skip
    version = f", version {item.version}" if item.version else ""
    print(f"wrote {item.path} ({item.kind}{version})")
    return 0


def _history(args: argparse.Namespace) -> int:
    with open_workspace(args) as ws:
        versions = ws.history(args.path)
    if args.json:
        print(dump_json([dataclasses.asdict(v) for v in versions]))
        return 0
    if not versions:
        _note(f"{args.path} keeps no versions")
        return 0
    rows = [[str(v.version), v.created_by, stamp(v.created_at), v.message or "-"]
            for v in versions]  # fmt: skip
    print(table(["VERSION", "BY", "AT", "MESSAGE"], rows))
    return 0


def _diff(args: argparse.Namespace) -> int:
    with open_workspace(args) as ws:
        text = ws.diff(args.path, args.old, args.new)
    if text:
        print(text.rstrip("\n"))
    else:
        _note("no differences")
    return 0


def _restore(args: argparse.Namespace) -> int:
    with open_workspace(args) as ws:
        item = ws.restore(args.path, args.version, message=args.message)
    print(f"restored {item.path} version {args.version} as version {item.version}")
    return 0


def _clear(args: argparse.Namespace) -> int:
    with open_workspace(args) as ws:
        dropped = ws.clear_history(args.path)
    print(f"dropped {dropped} past version(s) of {args.path}")
    return 0


def _delete(args: argparse.Namespace) -> int:
    with open_workspace(args) as ws:
        ws.delete(args.path)
    print(f"deleted {args.path}")
    return 0


# --- drafts -----------------------------------------------------------------------------------


def _drafts_list(args: argparse.Namespace) -> int:
    with open_workspace(args) as ws:
        drafts = ws.drafts()
    if args.json:
        print(dump_json([dataclasses.asdict(d) for d in drafts]))
        return 0
    if not drafts:
        _note("no drafts")
        return 0
    rows = [[d.path, d.kind, stamp(d.updated_at), d.summary or "-"] for d in drafts]
    print(table(["PATH", "KIND", "UPDATED AT", "SUMMARY"], rows))
    return 0


def _drafts_save(args: argparse.Namespace) -> int:
    text, label = _read_source(args)
    value = _parse(args.kind, text, label)
    with open_workspace(args) as ws:
        draft = ws.save_draft(
            args.path, args.kind, value, summary=args.summary, resource_type=args.resource_type
        )
    print(f"saved your draft of {draft.path} ({draft.kind}); deploy it: tidemill ws deploy "
          f"{draft.path}")  # fmt: skip
    return 0


def _drafts_show(args: argparse.Namespace) -> int:
    with open_workspace(args) as ws:
        draft = ws.draft(args.path)
    if args.json:
        print(dump_json(dataclasses.asdict(draft)))
        return 0
    _note(f"{draft.path}: {draft.kind}, draft of {draft.owner} at {stamp(draft.updated_at)}")
    print(_render(draft.kind, draft.value))
    return 0


def _drafts_discard(args: argparse.Namespace) -> int:
    with open_workspace(args) as ws:
        ws.discard_draft(args.path)
    print(f"discarded your draft of {args.path}")
    return 0


def _deploy(args: argparse.Namespace) -> int:
    with open_workspace(args) as ws:
        item = ws.deploy(args.path, message=args.message)
    print(f"deployed {item.path} as version {item.version}")
    return 0


# --- variables, search, types -----------------------------------------------------------------


def _variables_set(args: argparse.Namespace) -> int:
    value = read_secret(f"value of {args.path} (not echoed): ", what=f"value for {args.path}")
    with open_workspace(args) as ws:
        item = ws.write(args.path, "variable", value, summary=args.summary, secret=args.secret)
    print(f"set {'secret ' if item.secret else ''}variable {item.path}")
    return 0


def _variables_list(args: argparse.Namespace) -> int:
    return _list(args, kind="variable")


def _search(args: argparse.Namespace) -> int:
    with open_workspace(args) as ws:
        hits = ws.search(args.query, kinds=args.kind, limit=args.limit)
    if args.json:
        print(dump_json([dataclasses.asdict(hit) for hit in hits]))
        return 0
    if not hits:
        _note(f"nothing matches {args.query!r}")
        return 0
    rows = [[f"{hit.score:.0f}", hit.path, hit.kind, hit.summary or "-"] for hit in hits]
    print(table(["SCORE", "PATH", "KIND", "SUMMARY"], rows))
    return 0


def _types(args: argparse.Namespace) -> int:
    from tidemill.workspace import BUILTIN_TYPES

    if args.json:
        print(dump_json([{"name": t.name, "summary": t.summary, "schema": t.schema}
                         for t in BUILTIN_TYPES]))  # fmt: skip
        return 0
    print(table(["NAME", "SUMMARY"], [[t.name, t.summary] for t in BUILTIN_TYPES]))
    return 0


# --- tidemill run PATH ------------------------------------------------------------------------


def is_workspace_target(target: str) -> bool:
    """Whether `tidemill run TARGET` names a workspace flow: a path such as f/x/y, not a file.

    Examples:
        >>> is_workspace_target("f/support/triage"), is_workspace_target("flow.yaml")
        (True, False)
    """
    from tidemill.flows import WORKSPACE_PATH

    return WORKSPACE_PATH.match(target) is not None and not Path(target).exists()


async def submit_flow(
    engine: AsyncEngine, args: argparse.Namespace, flow: Flow | None, inputs: dict[str, Any]
) -> tuple[str, str]:
    """Submit what `tidemill run` was given; return the run's id and how to name the flow.

    `flow` is the loaded flow file, or None for a workspace path (`args.flow`),
    run as deployed or, with `--draft`, as the caller's draft. Either runs as
    the local user, or as `--as USER` (which the workspace allows admins only).
    """
    from tidemill.workspace import DEFAULT_WORKSPACE, AsyncWorkspace, local_user

    name = args.workspace or DEFAULT_WORKSPACE
    if flow is not None:
        user = local_user()
        if args.actor:
            async with AsyncWorkspace(engine.store, workspace=name) as ws:
                user = (await ws.acting_as(args.actor)).user
        run_id = await engine.submit(
            flow, inputs, run_as=user, source={"workspace": name}, memory_id=args.memory_id,
            start_at=args.at,
        )  # fmt: skip
        return run_id, repr(flow.name or args.flow)
    async with AsyncWorkspace(engine.store, workspace=name) as ws:
        acting = await ws.acting_as(args.actor) if args.actor else ws
        run_id = await engine.submit_path(
            acting, args.flow, inputs, draft=args.draft, memory_id=args.memory_id,
            start_at=args.at,
        )  # fmt: skip
    return run_id, f"{args.flow}{' (your draft)' if args.draft else ''}"
