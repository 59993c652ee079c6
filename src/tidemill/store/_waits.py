"""`WaitQueries`: steps waiting for a time or an event, and the events sent to runs."""

from __future__ import annotations

from tidemill.store._events import EventQueries

__all__ = ["WaitQueries"]


class WaitQueries(EventQueries):
    """The statements about `tm_waits` (waiting steps) and `tm_signals` (events sent)."""
