"""`tidemill ws` for people and keys: whoami, users, groups, folders, grants, audit, keys.

Also what every `ws` command shares: the `--db`, `--workspace` and `--as`
options (`add_ws_options`), opening the workspace as the acting user
(`open_workspace`), and reading a secret from standard input (`read_secret`).
Managing users, groups and folders, reading the audit log and rotating keys
need a workspace admin: the workspace refuses anyone else.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import getpass
import json
import os
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, TypeAlias

from tidemill.cli._common import add_db_option, db_url, dump_json, positive_int, stamp, table
from tidemill.errors import ConfigurationError, ItemNotFound

if TYPE_CHECKING:
    from tidemill.workspace import Workspace

__all__ = [
    "Actions",
    "add_ws_options",
    "handler",
    "open_workspace",
    "read_secret",
    "register_people",
]

Actions: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
"""The subparsers of a command group."""

Handler = Callable[[argparse.Namespace], int]

_ROLES = ("viewer", "writer", "admin")


# --- what every ws command shares -------------------------------------------------------------


def add_ws_options(parser: argparse.ArgumentParser, *, json_output: bool = False) -> None:
    """Add `--db`, `--workspace`, `--as` (and `--json`) to a `ws` command."""
    add_db_option(parser)
    parser.add_argument(
        "--workspace",
        metavar="NAME",
        default=None,
        help="the workspace (default: default)",
    )
    parser.add_argument(
        "--as",
        dest="actor",
        metavar="USER",
        default=None,
        help="act as this user (workspace admins only)",
    )
    if json_output:
        parser.add_argument("--json", action="store_true", help="print JSON")


def handler(parser: argparse.ArgumentParser, fn: Handler) -> argparse.ArgumentParser:
    """Make `fn` what runs `parser`'s command."""
    parser.set_defaults(handler=fn)
    return parser


@contextlib.contextmanager
def open_workspace(args: argparse.Namespace) -> Iterator[Workspace]:
    """The workspace named by `args`, as the local user or, with `--as`, as that user."""
    from tidemill.workspace import DEFAULT_WORKSPACE, Workspace

    name = getattr(args, "workspace", None) or DEFAULT_WORKSPACE
    ws = Workspace(db_url(args), workspace=name)
    try:
        actor = getattr(args, "actor", None)
        yield ws.acting_as(actor) if actor else ws
    finally:
        ws.close()


def read_secret(prompt: str, *, what: str) -> str:
    """A value from standard input, never from the command line.

    On a terminal, asked for with no echo; otherwise read to the end, with one
    trailing newline stripped.

    Raises:
        ConfigurationError: Nothing was given.
    """
    stream = sys.stdin
    if stream is not None and stream.isatty():
        text = getpass.getpass(prompt)
    else:
        text = stream.read() if stream is not None else ""
        if text.endswith("\r\n"):
            text = text[:-2]
        elif text.endswith("\n"):
            text = text[:-1]
    if not text:
        raise ConfigurationError(
            f"No {what} on standard input.",
            hint='Pipe it in (printf %s "$VALUE" | tidemill ws ...) or type it when asked.',
        )
    return text


# --- the commands -----------------------------------------------------------------------------


def register_people(actions: Actions) -> None:
    """Add whoami, users, groups, folders, grant, revoke, audit and keys to `ws`."""
    sub = handler(actions.add_parser("whoami", help="who you act as here"), _whoami)
    sub.description = "The acting user: its name, whether it is an admin, its groups."
    add_ws_options(sub, json_output=True)
    _users(actions)
    _groups(actions)
    _folders(actions)
    sub = handler(actions.add_parser("grant", help="give a role on a folder or an item"), _grant)
    sub.description = "Give a user or a group (g/NAME) a role on a folder (f/NAME) or an item."
    sub.add_argument("target", metavar="TARGET", help="f/<folder>, or an item's path")
    sub.add_argument("grantee", metavar="GRANTEE", help="a user's name, or g/<group>")
    sub.add_argument("role", metavar="ROLE", choices=_ROLES, help="viewer, writer or admin")
    add_ws_options(sub)
    sub = handler(actions.add_parser("revoke", help="take a role away"), _revoke)
    sub.description = "Remove the role a user or group has on a folder or an item."
    sub.add_argument("target", metavar="TARGET", help="f/<folder>, or an item's path")
    sub.add_argument("grantee", metavar="GRANTEE", help="a user's name, or g/<group>")
    add_ws_options(sub)
    _audit(actions)
    _keys(actions)


def _group(actions: Actions, name: str, help: str, description: str) -> Actions:
    parser = actions.add_parser(name, help=help, description=description)
    return parser.add_subparsers(dest="ws_action", metavar="ACTION", required=True)


def _users(actions: Actions) -> None:
    users = _group(actions, "users", "list, add and change users", "The workspace's users.")
    sub = handler(users.add_parser("list", help="every user"), _users_list)
    add_ws_options(sub, json_output=True)
    sub = handler(users.add_parser("add", help="add a user (admins only)"), _users_add)
    sub.add_argument("name", metavar="NAME", help="the user's name")
    sub.add_argument("--admin", action="store_true", help="make it a workspace admin")
    add_ws_options(sub)
    sub = handler(users.add_parser("set", help="change a user (admins only)"), _users_set)
    sub.add_argument("name", metavar="NAME", help="the user's name")
    admin = sub.add_mutually_exclusive_group()
    admin.add_argument("--admin", dest="admin", action="store_true", default=None,
                       help="make it a workspace admin")  # fmt: skip
    admin.add_argument("--no-admin", dest="admin", action="store_false",
                       help="make it an ordinary user")  # fmt: skip
    state = sub.add_mutually_exclusive_group()
    state.add_argument("--disable", dest="disabled", action="store_true", default=None,
                       help="disable it: it may do nothing")  # fmt: skip
    state.add_argument("--enable", dest="disabled", action="store_false",
                       help="enable it again")  # fmt: skip
    add_ws_options(sub)


def _groups(actions: Actions) -> None:
    groups = _group(actions, "groups", "list, add and change groups", "Groups of users.")
    sub = handler(groups.add_parser("list", help="every group, with its members"), _groups_list)
    add_ws_options(sub, json_output=True)
    sub = handler(groups.add_parser("add", help="add a group (admins only)"), _groups_add)
    sub.add_argument("name", metavar="NAME", help="the group's name")
    sub.add_argument("--summary", metavar="TEXT", default="", help="what the group is")
    add_ws_options(sub)
    sub = handler(groups.add_parser("delete", help="delete a group and its grants"), _groups_del)
    sub.add_argument("name", metavar="NAME", help="the group's name")
    add_ws_options(sub)
    for name, help in (("add-member", "add a user to a group"),
                       ("remove-member", "remove a user from a group")):  # fmt: skip
        sub = handler(groups.add_parser(name, help=help), _groups_member)
        sub.add_argument("group", metavar="GROUP", help="the group's name")
        sub.add_argument("user", metavar="USER", help="the user's name")
        add_ws_options(sub)


def _folders(actions: Actions) -> None:
    folders = _group(actions, "folders", "list, add and show folders", "Folders of items.")
    sub = handler(folders.add_parser("list", help="the folders you can see"), _folders_list)
    add_ws_options(sub, json_output=True)
    sub = handler(folders.add_parser("add", help="create a folder (admins only)"), _folders_add)
    sub.add_argument("name", metavar="NAME", help="the folder's name")
    sub.add_argument("--summary", metavar="TEXT", default="", help="what the folder holds")
    add_ws_options(sub)
    sub = handler(folders.add_parser("show", help="a folder and its grants"), _folders_show)
    sub.add_argument("name", metavar="NAME", help="the folder's name")
    add_ws_options(sub, json_output=True)


def _audit(actions: Actions) -> None:
    sub = handler(actions.add_parser("audit", help="the audit log (admins only)"), _audit_list)
    sub.description = "Audited actions, oldest first: who did what to which path, and when."
    sub.add_argument("--actor", dest="by", metavar="USER", help="only what this user did")
    sub.add_argument("--action", metavar="ACTION", help="only this action, e.g. item.write")
    sub.add_argument("--path", metavar="PATH", help="only paths starting with this")
    sub.add_argument("--after", metavar="ID", type=int, default=0,
                     help="only rows after this id (the previous page's last)")  # fmt: skip
    sub.add_argument("--limit", metavar="N", type=positive_int, default=100,
                     help="the most rows to show (default: %(default)s)")  # fmt: skip
    add_ws_options(sub, json_output=True)


def _keys(actions: Actions) -> None:
    keys = _group(actions, "keys", "make and rotate the master key", "The master key.")
    sub = handler(keys.add_parser("new", help="print a new master key"), _keys_new)
    sub.description = "Print a fresh master key, for TIDEMILL_MASTER_KEY or a key file."
    sub = handler(keys.add_parser("rotate", help="wrap the secrets with a new key"), _rotate)
    sub.description = (
        "Read the NEW master key from standard input (never the command line) and wrap the "
        "workspace's data key with it (admins only); the current key must still be set."
    )
    sub.add_argument(
        "--write-key-file", action="store_true",
        help="SQLite: replace <db>.key with the new key (mode 0600) once rotated",
    )  # fmt: skip
    add_ws_options(sub)


# --- what they do -----------------------------------------------------------------------------


def _whoami(args: argparse.Namespace) -> int:
    with open_workspace(args) as ws:
        me = ws.whoami()
    if args.json:
        print(dump_json({**dataclasses.asdict(me), "groups": sorted(me.groups)}))
        return 0
    notes = [w for w, on in (("admin", me.is_admin), ("disabled", me.disabled)) if on]
    groups = f"  groups: {', '.join(sorted(me.groups))}" if me.groups else ""
    print(f"{me.name}{' (' + ', '.join(notes) + ')' if notes else ''}{groups}")
    return 0


def _users_list(args: argparse.Namespace) -> int:
    with open_workspace(args) as ws:
        users = ws.users()
    if args.json:
        print(dump_json([dataclasses.asdict(u) for u in users]))
        return 0
    rows = [
        [u.name, "yes" if u.is_admin else "-", "yes" if u.disabled else "-",
         ", ".join(u.groups) or "-", stamp(u.created_at)]
        for u in users
    ]  # fmt: skip
    print(table(["NAME", "ADMIN", "DISABLED", "GROUPS", "CREATED"], rows))
    return 0


def _users_add(args: argparse.Namespace) -> int:
    with open_workspace(args) as ws:
        user = ws.add_user(args.name, admin=args.admin)
    print(f"added user {user.name}{' (admin)' if user.is_admin else ''}")
    return 0


def _users_set(args: argparse.Namespace) -> int:
    if args.admin is None and args.disabled is None:
        raise ConfigurationError(
            "Nothing to change.", hint="Pass --admin, --no-admin, --disable or --enable."
        )
    with open_workspace(args) as ws:
        user = ws.set_user(args.name, admin=args.admin, disabled=args.disabled)
    role = "admin" if user.is_admin else "user"
    print(f"user {user.name}: {role}, {'disabled' if user.disabled else 'enabled'}")
    return 0


def _groups_list(args: argparse.Namespace) -> int:
    with open_workspace(args) as ws:
        groups = ws.groups()
    if args.json:
        print(dump_json([dataclasses.asdict(g) for g in groups]))
        return 0
    rows = [[g.name, ", ".join(g.members) or "-", g.summary] for g in groups]
    print(table(["NAME", "MEMBERS", "SUMMARY"], rows))
    return 0


def _groups_add(args: argparse.Namespace) -> int:
    with open_workspace(args) as ws:
        ws.add_group(args.name, summary=args.summary)
    print(f"added group {args.name} (grant it roles as g/{args.name})")
    return 0


def _groups_del(args: argparse.Namespace) -> int:
    with open_workspace(args) as ws:
        ws.delete_group(args.name)
    print(f"deleted group {args.name}")
    return 0


def _groups_member(args: argparse.Namespace) -> int:
    member = args.ws_action == "add-member"
    with open_workspace(args) as ws:
        ws.set_member(args.group, args.user, member=member)
    print(f"{'added' if member else 'removed'} {args.user} {'to' if member else 'from'} "
          f"group {args.group}")  # fmt: skip
    return 0


def _folders_list(args: argparse.Namespace) -> int:
    with open_workspace(args) as ws:
        folders = ws.folders()
    if args.json:
        print(dump_json([dataclasses.asdict(f) for f in folders]))
        return 0
    rows = [
        [f.name, _roles(f.roles), f.created_by, stamp(f.created_at), f.summary] for f in folders
    ]
    print(table(["NAME", "ROLES", "CREATED BY", "CREATED", "SUMMARY"], rows))
    return 0


def _roles(roles: Mapping[str, str]) -> str:
    return ", ".join(f"{who}={role}" for who, role in sorted(roles.items())) or "-"


def _folders_add(args: argparse.Namespace) -> int:
    with open_workspace(args) as ws:
        folder = ws.add_folder(args.name, summary=args.summary)
    print(f"added folder {folder.name}: its items live at f/{folder.name}/...")
    return 0


def _folders_show(args: argparse.Namespace) -> int:
    with open_workspace(args) as ws:
        found = [f for f in ws.folders() if f.name == args.name]
    if not found:
        raise ItemNotFound(
            f"There is no folder {args.name!r} that you can see.", hint="tidemill ws folders list"
        )
    folder = found[0]
    if args.json:
        print(dump_json(dataclasses.asdict(folder)))
        return 0
    print(f"folder:   {folder.name}\nsummary:  {folder.summary or '-'}\n"
          f"created:  {stamp(folder.created_at)} by {folder.created_by}\nroles:")  # fmt: skip
    for who, role in sorted(folder.roles.items()):
        print(f"  {who}  {role}")
    if not folder.roles:
        print("  - (only workspace admins)")
    return 0


def _grant(args: argparse.Namespace) -> int:
    with open_workspace(args) as ws:
        ws.grant(args.target, args.grantee, args.role)
    print(f"{args.grantee} is {args.role} on {args.target}")
    return 0


def _revoke(args: argparse.Namespace) -> int:
    with open_workspace(args) as ws:
        ws.grant(args.target, args.grantee, None)
    print(f"{args.grantee} has no role of its own on {args.target} now")
    return 0


def _audit_list(args: argparse.Namespace) -> int:
    with open_workspace(args) as ws:
        rows = ws.audit(
            actor=args.by, action=args.action, path=args.path, after=args.after,
            limit=args.limit,
        )  # fmt: skip
    if args.json:
        print(dump_json([dataclasses.asdict(row) for row in rows]))
        return 0
    if not rows:
        print("no audit rows", file=sys.stderr)
        return 0
    lines = [
        [str(r.id), stamp(r.at), r.actor, r.action, r.path or "-",
         json.dumps(r.details, ensure_ascii=False, default=str, sort_keys=True)]
        for r in rows
    ]  # fmt: skip
    print(table(["ID", "AT", "ACTOR", "ACTION", "PATH", "DETAILS"], lines))
    return 0


def _keys_new(args: argparse.Namespace) -> int:
    from tidemill.workspace import MasterKey

    print(MasterKey.generate().encoded())
    print(
        "a new master key: keep it outside the database, with a copy in a safe place; a "
        "process reads it from TIDEMILL_MASTER_KEY (or TIDEMILL_MASTER_KEY_FILE, a file "
        "holding it). To switch a workspace to it: tidemill ws keys rotate < keyfile",
        file=sys.stderr,
    )
    return 0


def _rotate(args: argparse.Namespace) -> int:
    from tidemill.store import StoreURL
    from tidemill.workspace import MasterKey

    sqlite = StoreURL.parse(db_url(args)).path
    if args.write_key_file and sqlite is None:
        raise ConfigurationError(
            "--write-key-file is for SQLite stores: a PostgreSQL store keeps no key file.",
            hint="Set TIDEMILL_MASTER_KEY to the new key wherever the workspace is opened.",
        )
    new = MasterKey.parse(read_secret("new master key: ", what="new master key"),
                          source="The new master key on standard input")  # fmt: skip
    with open_workspace(args) as ws:
        ws.rotate_key(new)
    print(f"rotated: the workspace's secrets are now wrapped by key {new.key_id}")
    if args.write_key_file and sqlite is not None:
        path = sqlite.with_name(sqlite.name + ".key")
        _write_key_file(path, new.encoded())
        print(f"wrote the new key to {path} (mode 0600)", file=sys.stderr)
    else:
        print(
            "now set TIDEMILL_MASTER_KEY to the new key (or replace the key file) wherever "
            "this workspace is opened: the old key no longer opens its secrets",
            file=sys.stderr,
        )
    return 0


def _write_key_file(path: Path, text: str) -> None:
    """Replace `path` with `text` atomically, readable by its owner only."""
    temporary = path.with_name(path.name + ".new")
    temporary.unlink(missing_ok=True)
    fd = os.open(temporary, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="ascii") as out:
            out.write(text + "\n")
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
