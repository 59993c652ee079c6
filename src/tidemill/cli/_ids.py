"""Ids by their start: `tidemill runs show 01a2f3` finds the one run whose id starts so.

Run and approval ids are time-ordered UUIDs (`tidemill.engine`): long to
type, and their first digits are shared by everything made in the same
minute. A command takes any unique start of one, in any case; a start that
several share is refused with the list of them.
"""

from __future__ import annotations

import argparse
import re
from typing import TYPE_CHECKING

from tidemill.errors import RunNotFound

if TYPE_CHECKING:
    from tidemill.engine import AsyncEngine

__all__ = ["resolve_id", "resolve_ids"]

_ID_ARGUMENTS = {"run_id": "run", "run": "run", "approval_id": "approval"}
"""The attributes of parsed arguments that hold ids, and what each names."""

_ID_PREFIX = re.compile(r"[0-9a-f-]{1,35}")
_SHOWN = 10
"""How many candidates an ambiguous prefix lists."""


async def resolve_id(engine: AsyncEngine, kind: str, given: str) -> str:
    """The whole id of the top-level run (or approval, `kind`) that `given` is the start of.

    An id is matched by a unique prefix, in any case. `given` comes back as it
    is when it is a whole id or the start of none (the engine then says there
    is no such run), and lower-cased when it is a whole id in upper case.

    Raises:
        RunNotFound: `given` is the start of several; the message lists them.
    """
    wanted = given.strip().lower()
    if len(wanted) == 36:
        return wanted if re.fullmatch(r"[0-9a-f-]{36}", wanted) else given
    if not _ID_PREFIX.fullmatch(wanted):
        return given
    from tidemill.store import Tx

    def read(tx: Tx) -> list[str]:
        if kind == "approval":
            return tx.approval_ids_starting(wanted, limit=_SHOWN + 1)
        return tx.run_ids_starting(wanted, limit=_SHOWN + 1)

    found = await engine.store.transact(read)
    if len(found) == 1:
        return found[0]
    if not found:
        return given
    listed = ", ".join(found[:_SHOWN]) + (", and more" if len(found) > _SHOWN else "")
    count = f"{len(found)}" if len(found) <= _SHOWN else f"more than {_SHOWN}"
    where = "tidemill runs list" if kind == "run" else "tidemill approvals list --all"
    raise RunNotFound(
        f"{given} is the start of {count} {kind}s: {listed}.",
        hint=f"Give more of the id ({where} shows them).",
        context={"prefix": given, "candidates": found[:_SHOWN]},
    )


async def resolve_ids(engine: AsyncEngine, args: argparse.Namespace) -> None:
    """Replace each id prefix in `args` (`run_id`, `run`, `approval_id`) by the whole id."""
    for name, kind in _ID_ARGUMENTS.items():
        given = getattr(args, name, None)
        if isinstance(given, str):
            setattr(args, name, await resolve_id(engine, kind, given))
