"""`ScheduleFireQueries`: a schedule's fires, one row per (schedule, fire time)."""

from __future__ import annotations

from tidemill.store._statements import Statements

__all__ = ["ScheduleFireQueries"]


class ScheduleFireQueries(Statements):
    """The statements about `tm_schedule_fires`."""
