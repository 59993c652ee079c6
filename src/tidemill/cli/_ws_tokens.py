"""`tidemill ws tokens create|create-hook|list|revoke` and `tidemill ws password`: signing in."""

from __future__ import annotations

import argparse
import json
import shlex
import time

from tidemill.cli._ws_people import Actions, add_ws_options, handler, open_workspace, read_secret

__all__ = ["register_tokens"]


def register_tokens(actions: Actions) -> None:
    """Add `ws tokens` and `ws password`."""
    tokens = actions.add_parser(
        "tokens", help="personal access tokens for the server's API",
        description="Make, list and revoke your tokens (shown once; stored hashed).",
    ).add_subparsers(dest="ws_action", metavar="ACTION", required=True)  # fmt: skip
    sub = handler(tokens.add_parser("create", help="make a token; it is printed once"), _create)
    sub.description = "Make a token; its text is printed once and never stored."
    sub.add_argument("name", metavar="NAME", help="what it is for (shown when listed)")
    sub.add_argument(
        "--scope", dest="scopes", action="append", metavar="SCOPE", default=None,
        help="what it may do, {domain}:{action}[:{path glob}], e.g. runs:write:f/support/* "
        "(repeatable; default: * , everything you may do)",
    )  # fmt: skip
    sub.add_argument(
        "--days", type=float, default=90.0, metavar="N",
        help="how long it lives (default: 90; 0: it never expires)",
    )  # fmt: skip
    add_ws_options(sub, json_output=True)
    sub = handler(
        tokens.add_parser("create-hook", help="make a token that starts one flow by webhook"),
        _create_hook,
    )
    sub.description = (
        "Make a token whose only scope is hooks:write:PATH: it may start the flow at PATH by "
        "POST /hooks/PATH, and do nothing else. Its text is printed once, with a curl line."
    )
    sub.add_argument("path", metavar="PATH", help="the flow's path, e.g. f/support/triage")
    sub.add_argument("--name", default=None, help="what it is for (default: webhook PATH)")
    sub.add_argument(
        "--days", type=float, default=0.0, metavar="N",
        help="how long it lives (default: 0, it never expires)",
    )  # fmt: skip
    sub.add_argument(
        "--url", default="http://127.0.0.1:8000", metavar="URL",
        help="the server's address, for the curl line (default: http://127.0.0.1:8000)",
    )  # fmt: skip
    add_ws_options(sub, json_output=True)
    sub = handler(tokens.add_parser("list", help="your tokens (never their text)"), _list)
    sub.description = "Your tokens: prefix, name, scopes, expiry and last use."
    sub.add_argument("--user", metavar="USER", default=None, help="another user's (admins)")
    add_ws_options(sub, json_output=True)
    sub = handler(tokens.add_parser("revoke", help="revoke a token at once"), _revoke)
    sub.description = "Revoke a token: the next request that presents it is refused."
    sub.add_argument("token", metavar="ID", help="its id or prefix (tm_pat_<id>)")
    add_ws_options(sub)
    sub = handler(actions.add_parser("password", help="set a password to sign in with"), _password)
    sub.description = (
        "Set your password (or, as an admin, USER's) for signing in to the server from a "
        "browser; it is read from standard input, never from the command line."
    )
    sub.add_argument("user", metavar="USER", nargs="?", default=None, help="whose (default: you)")
    add_ws_options(sub)


def _create(args: argparse.Namespace) -> int:
    days = None if args.days == 0 else args.days
    with open_workspace(args) as ws:
        made = ws.create_token(args.name, scopes=args.scopes or ["*"], expires_in_days=days)
    if args.json:
        print(json.dumps({"token": made.text, "prefix": made.token.prefix, "id": made.token.id}))
    else:
        print(made.text)
        print(f"# {made.token.prefix}: shown once; send it as Authorization: Bearer <token>")
    return 0


def _create_hook(args: argparse.Namespace) -> int:
    seconds = None if args.days == 0 else args.days * 86400
    with open_workspace(args) as ws:
        made = ws.create_hook_token(args.path, name=args.name, expires_in=seconds)
    url = f"{args.url.rstrip('/')}/hooks/{args.path}"
    curl = (
        f"curl -X POST {shlex.quote(url)} -H {shlex.quote('Authorization: Bearer ' + made.text)} "
        "-H 'Content-Type: application/json' -d '{}'"
    )
    if args.json:
        print(json.dumps({"token": made.text, "prefix": made.token.prefix, "id": made.token.id,
                          "url": url, "curl": curl}))  # fmt: skip
    else:
        print(made.text)
        print(f"# {made.token.prefix}: shown once; it may only start {args.path}. Call it with:")
        print(curl)
    return 0


def _when(at: float | None) -> str:
    return "-" if at is None else time.strftime("%Y-%m-%d %H:%M", time.gmtime(at))


def _list(args: argparse.Namespace) -> int:
    with open_workspace(args) as ws:
        tokens = ws.tokens(user=args.user)
    if args.json:
        print(json.dumps([_row(t) for t in tokens]))
        return 0
    print(f"{'PREFIX':<22} {'NAME':<16} {'SCOPES':<28} {'EXPIRES':<16} {'LAST USED':<16} STATE")
    for t in tokens:
        state = "revoked" if t.revoked_at else "active"
        print(
            f"{t.prefix:<22} {t.name[:16]:<16} {','.join(t.scopes)[:28]:<28} "
            f"{_when(t.expires_at):<16} {_when(t.last_used_at):<16} {state}"
        )
    return 0


def _row(token: object) -> dict[str, object]:
    names = ("id", "prefix", "name", "scopes", "created_at", "expires_at", "last_used_at")
    return {name: getattr(token, name) for name in (*names, "revoked_at")}


def _revoke(args: argparse.Namespace) -> int:
    with open_workspace(args) as ws:
        token = ws.revoke_token(args.token)
    print(f"revoked {token.prefix} ({token.name})")
    return 0


def _password(args: argparse.Namespace) -> int:
    with open_workspace(args) as ws:
        user = args.user or ws.whoami().name
        ws.set_password(user, read_secret(f"New password for {user}: ", what="password"))
    print(f"set the password of {user}")
    return 0
