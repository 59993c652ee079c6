"""`Mailbox`: what a subscriber of a shared event reader has waiting, and how it waits for more.

The run feed and the per-run event hub each read the store once for all
their subscribers and hand every subscriber its deliveries here; the
subscriber's stream takes them out when it writes.

Examples:
    >>> import asyncio
    >>> box = Mailbox()
    >>> box.put("event 1")
    >>> asyncio.run(box.take(idle=0.01))
    ['event 1']
    >>> asyncio.run(box.take(idle=0.01))  # nothing came within the wait
    []
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

__all__ = ["END", "LET_GO", "Mailbox"]

END = object()
"""Delivered last when the stream has nothing more to send (its run ended, the server stops)."""
LET_GO = object()
"""Delivered last to a subscriber that fell too far behind: it reads the rest from the store."""


@dataclass(eq=False, slots=True, kw_only=True)
class Mailbox:
    """Deliveries waiting to be taken, then maybe one of `END`, `LET_GO` or an error."""

    pending: list[Any] = field(default_factory=list)
    waiter: asyncio.Future[None] | None = None
    attached: bool = True
    """Whether the reader still delivers here (False once it let the subscriber go)."""

    def put(self, item: Any) -> None:
        self.pending.append(item)
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)

    async def take(self, idle: float | None) -> list[Any]:
        """What is pending, once something is (nothing, after `idle` s without)."""
        if not self.pending:
            self.waiter = asyncio.get_running_loop().create_future()
            try:
                async with asyncio.timeout(idle):
                    await self.waiter
            except TimeoutError:
                return []
            finally:
                self.waiter = None
        taken, self.pending = self.pending, []
        return taken
