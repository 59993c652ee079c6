"""Which fires of a schedule are due, and which of them its catch-up policy runs.

Pure functions of a `Cron`, a cursor (the schedule's fires up to it are
dealt with) and the time: the scheduler asks them on every tick.

Examples:
    >>> from tidemill.flows import Cron
    >>> every_second = Cron.parse("* * * * * *")
    >>> due = due_fires(every_second, 100.0, 105.0)
    >>> due
    [101.0, 102.0, 103.0, 104.0, 105.0]
    >>> choose("latest", due, now=105.0)  # late by at most ON_TIME: each runs
    ([101.0, 102.0, 103.0, 104.0, 105.0], [])
    >>> choose("latest", due, now=120.0)  # missed: the most recent runs
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

    A fire at most `ON_TIME` seconds old is on time, and runs whatever the
    policy (a busy scheduler is late, not down). The older ones were missed
    while nothing ran, and the policy says which of them run:

    - `latest`: the most recent missed one, unless a fire on time runs; the
      others are skipped;
    - `all`: each, up to `Schedule.CATCH_UP_ALL_LIMIT` (the most recent ones);
    - `skip`: none.
    """
    on_time = [fire for fire in due if now - fire <= ON_TIME]
    missed = [fire for fire in due if now - fire > ON_TIME]
    if catch_up == "latest":
        run = missed[-1:] if not on_time else []
    elif catch_up == "all":
        run = missed[-Schedule.CATCH_UP_ALL_LIMIT :]
    elif catch_up == "skip":
        run = []
    else:
        assert_never(catch_up)
    ran = set(run)
    return run + on_time, [fire for fire in missed if fire not in ran]
