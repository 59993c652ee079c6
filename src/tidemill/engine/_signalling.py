"""`Signalling`: `AsyncEngine`'s events sent from outside to steps that wait for them.

A `wait_for_event` step waits for an event by name and key; `send_event`
sends one. Every step waiting for it when it is sent takes it (its payload
is the step's result); if none waits, the event is kept (a week by default)
and the first step to come and wait for that name and key takes it at once.

Events are addressed like the runs that wait for them: a run started from a
workspace flow waits for events sent to that flow's workspace and path
(`tidemill events send --path f/shop/checkout`); a run of a flow from a file
or from Python waits for events sent with no path.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Sequence
from typing import Any

from tidemill.engine._engine_core import EngineCore
from tidemill.engine.runs._transition import Transition
from tidemill.engine.runs._waiting import Delivery
from tidemill.errors import InvalidOption
from tidemill.flows._waiting import EVENT_NAME_PATTERN
from tidemill.store import SignalRow

__all__ = ["EVENT_KEEP", "Signalling", "check_event"]

EVENT_KEEP = 7 * 86400.0
"""How long an event nobody waits for is kept by default: seven days."""

_KEY_LIMIT = 512
_PAYLOAD_LIMIT = 1_000_000


def check_event(name: str, key: str, payload: Any, keep: float) -> None:
    """Refuse an event that could not be delivered as sent (`InvalidOption`, with a hint)."""
    if not isinstance(name, str) or not re.match(EVENT_NAME_PATTERN, name):
        raise InvalidOption(
            f"{name!r} is not an event name.",
            hint="Use letters, digits and _ . : - (up to 128 characters), e.g. order_paid.",
        )
    if not isinstance(key, str) or len(key) > _KEY_LIMIT:
        raise InvalidOption(
            f"An event key is a string of at most {_KEY_LIMIT} characters.",
            hint="Send the key the waiting step's `key` expression gives, e.g. an order id.",
        )
    if not math.isfinite(keep) or keep <= 0:
        raise InvalidOption(
            f"keep must be a positive number of seconds, not {keep!r}.",
            hint="Keep an event nobody waits for yet for, say, 7 days (604800).",
        )
    try:
        size = len(json.dumps(payload))
    except (TypeError, ValueError):
        raise InvalidOption(
            "An event's payload must be JSON (objects, lists, strings, numbers, true/false/null).",
            hint="Send plain data; it becomes the waiting step's result.",
        ) from None
    if size > _PAYLOAD_LIMIT:
        raise InvalidOption(
            f"The event's payload is {size} bytes of JSON; at most {_PAYLOAD_LIMIT} are kept.",
            hint="Send a reference (an id, a URL) instead of the data itself.",
        )


class Signalling(EngineCore):
    """Send events to the steps that wait for them; list the events kept for later."""

    async def send_event(
        self,
        name: str,
        key: str = "",
        payload: Any = None,
        *,
        workspace: str = "",
        path: str = "",
        dedupe_id: str | None = None,
        sent_by: str | None = None,
        keep: float = EVENT_KEEP,
    ) -> Delivery:
        """Send an event: it ends every `wait_for_event` step waiting for `name` and `key`.

        Args:
            name: The event's name (what the steps wait for).
            key: The key (the steps' `key` expression's value, as a string).
            payload: JSON data: the result of each step it ends.
            workspace: With `path`, the workspace flow whose runs it is for
                (both empty: runs of flows from files or Python).
            path: The workspace path of the flow whose runs it is for.
            dedupe_id: The sender's id for this event: a second send with
                the same id (and name, workspace and path), while the first
                is kept, does nothing (`Delivery.duplicate`).
            sent_by: Who sent it (recorded with it).
            keep: How long, in seconds, to keep it when no step waits for it
                yet (default `EVENT_KEEP`, seven days).

        Raises:
            InvalidOption: A bad name, key, payload or `keep`.

        Examples:
            >>> import asyncio
            >>> from tidemill.engine import AsyncEngine
            >>> async def main():
            ...     async with AsyncEngine("sqlite:///:memory:") as engine:
            ...         sent = await engine.send_event("order_paid", "42", {"amount": 10})
            ...         again = await engine.send_event("order_paid", "43", dedupe_id="x")
            ...         twice = await engine.send_event("order_paid", "43", dedupe_id="x")
            ...         return sent.delivered_to, sent.kept_until is not None, twice.duplicate
            >>> asyncio.run(main())
            ((), True, True)
        """
        check_event(name, key, payload, keep)
        now = time.time()
        delivery: Delivery = await self._transact(
            lambda tx: Transition(tx, self.defs, now).deliver_event(
                workspace=workspace,
                path=path,
                name=name,
                key=key,
                payload=payload,
                dedupe_id=dedupe_id,
                sent_by=sent_by,
                keep=keep,
            )
        )
        if delivery.delivered_to:
            self._wake_workers()
        return delivery

    async def kept_events(
        self,
        *,
        name: str | None = None,
        limit: int = 100,
        after: int = 0,
        workspaces: Sequence[str] | None = None,
    ) -> list[SignalRow]:
        """Events sent that no step has taken yet and still kept, oldest first.

        `after` is an event id: the page after it. `workspaces` keeps to the
        events addressed to these workspaces' flows (`""` in it: the events
        for runs of no path); None: every one.
        """
        now = time.time()
        rows: list[SignalRow] = await self._transact(
            lambda tx: tx.kept_signals(
                name=name, limit=limit, after=after, now=now, workspaces=workspaces
            )
        )
        return rows
