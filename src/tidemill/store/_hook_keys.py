"""`HookKeyQueries`: webhooks' idempotency keys, each naming the run its first call started."""

from __future__ import annotations

from tidemill.store._statements import Statements

__all__ = ["HookKeyQueries"]


class HookKeyQueries(Statements):
    """The statements about `tm_hook_keys`."""
