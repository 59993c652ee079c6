"""Which fires of a schedule are due, and which of them its catch-up policy runs.

Pure functions of a `Cron`, a cursor (the schedule's fires up to it are
dealt with) and the time: the scheduler asks them on every tick.

Examples:
    >>> from tidemill.flows import Cron
    >>> every_second = Cron.parse("* * * * * *")
    >>> due = due_fires(every_second, 100.0, 105.0)
    >>> due
    [101.0, 102.0, 103.0, 104.0, 105.0]
    >>> choose("latest", due, now=105.0)
    ([105.0], [101.0, 102.0, 103.0, 104.0])
    >>> choose("skip", due, now=120.0)
    ([], [101.0, 102.0, 103.0, 104.0, 105.0])
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import assert_never

from tidemill.flows import Cron, Schedule
from tidemill.flows._schedule import CatchUp

__all__ = ["KEEP", "ON_TIME", "choose", "due_fires"]

ON_TIME = 10.0
"""Seconds after its time a fire is still on time; an older one is a missed fire."""

KEEP = 2 * Schedule.CATCH_UP_ALL_LIMIT
"""The most recent missed fires looked at: those run, and those recorded skipped."""


def due_fires(cron: Cron, after: float, now: float, *, keep: int = KEEP) -> list[float]:
    """The fires in `(after, now]`, oldest first: the most recent `keep` of them.

    When there are more (everything was down for long), the start is moved
    forward by halves until at most `keep` are left, so the cost does not
    grow with how long it was down.
    """
    fires = cron.fires_between(after, now, limit=keep + 1)
    if len(fires) <= keep:
        return fires
    low, high = after, now  # more than `keep` fires after `low`; none after `high`
    while high - low > 0.5:
        middle = (low + high) / 2
        if len(cron.fires_between(middle, now, limit=keep + 1)) > keep:
            low = middle
        else:
            high = middle
    return cron.fires_between(high, now, limit=keep + 1)[-keep:]


def choose(
    catch_up: CatchUp, due: Sequence[float], *, now: float
) -> tuple[list[float], list[float]]:
    """(the fires to run, oldest first; the fires to record skipped) of those `due`.

    - `latest`: the most recent runs (on time or not), the others are skipped;
    - `all`: each runs, up to `Schedule.CATCH_UP_ALL_LIMIT` (the most recent ones);
    - `skip`: only a fire still on time (`ON_TIME`) runs; the missed ones are skipped.
    """
    fires = list(due)
    if not fires:
        return [], []
    if catch_up == "latest":
        return fires[-1:], fires[:-1]
    if catch_up == "all":
        limit = Schedule.CATCH_UP_ALL_LIMIT
        return fires[-limit:], fires[:-limit]
    if catch_up == "skip":
        if now - fires[-1] <= ON_TIME:
            return fires[-1:], fires[:-1]
        return [], fires
    assert_never(catch_up)
