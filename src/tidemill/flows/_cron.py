"""`Cron`: when a schedule fires, as epoch seconds, from a cron expression and a time zone.

An expression has 5 fields (`minute hour day-of-month month day-of-week`),
or 6 with the seconds first (`second minute hour day-of-month month
day-of-week`, as Windmill and Quartz write them), or is one of the aliases
`@yearly` (`@annually`), `@monthly`, `@weekly`, `@daily` (`@midnight`) and
`@hourly`. Fields take what cron takes: `*`, numbers, lists `1,15`, ranges
`1-5`, steps `*/15` and `10-50/20`, names `JAN`-`DEC` and `SUN`-`SAT`, `?`
in either day field, `L` (last day of the month, last `FRI` of the month as
`5L`), `15W` (nearest weekday) and `FRI#2` (second Friday). When both day
fields are restricted a day matching either fires, as in cron. The parsing
and the calendar search are `croniter`'s.

Times are wall-clock times in the schedule's IANA time zone (`Europe/Paris`;
`UTC` by default). Daylight saving is handled as Debian's (ISC) cron handles
it:

- A wall time that does not exist (the hour skipped when clocks spring
  forward) fires once, at the first instant after the gap: a daily `02:30`
  in Paris fires at 03:00 CEST on 2026-03-29.
- A wall time that happens twice (the hour repeated when clocks fall back)
  fires once, at its first occurrence: a daily `01:30` in New York fires at
  01:30 EDT on 2026-11-01, not again at 01:30 EST.
- Except when the hour field is a wildcard (`*`, or a step over it such as
  `*/2`; `@hourly` too): such a schedule runs by the clock, so it fires in
  both copies of the repeated hour, and an every-15-minutes schedule keeps
  firing every 15 minutes of real time; the times a gap skips are skipped
  (its next fire is the next time that exists).
- No instant is ever listed twice: fires are strictly increasing.

The module iterates naive wall times with `croniter` and maps each to UTC
itself (with `zoneinfo` and `fold`), which keeps those rules in one place.
"""

from __future__ import annotations

import difflib
import heapq
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from croniter import croniter

from tidemill.errors import InvalidOption, InvalidSchedule

__all__ = ["Cron"]

_FIELDS_5 = ("minute", "hour", "day of month", "month", "day of week")
_FIELDS_6 = ("second", *_FIELDS_5)

_ALLOWED = {
    "second": "0-59",
    "minute": "0-59",
    "hour": "0-23",
    "day of month": "1-31, or L for the last day",
    "month": "1-12 or JAN-DEC",
    "day of week": "0-7 or SUN-SAT, 0 and 7 are Sunday",
}

_ALIASES = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}

_HINT = (
    "Write 5 fields `minute hour day-of-month month day-of-week` (`30 2 * * *` is 02:30 "
    "every day), 6 with the seconds first (`*/10 * * * * *` is every 10 seconds), "
    "or an alias: " + ", ".join(_ALIASES) + "."
)

_ZONE_HINT = "Use an IANA time zone name, such as 'UTC', 'Europe/Paris' or 'America/New_York'."

# Wall times are naive on purpose: croniter walks the calendar, `_iterate` maps to UTC.
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC).replace(tzinfo=None)
_SECOND = timedelta(seconds=1)
_NEVER_FROM = datetime(2000, 1, 1, tzinfo=UTC).replace(tzinfo=None)


def _fields(expression: str) -> tuple[str, ...]:
    """The fields of `expression` (aliases expanded); raise `InvalidSchedule` if it is wrong."""
    text = " ".join(expression.split())
    lowered = text.lower()
    if lowered.startswith("@"):
        if lowered not in _ALIASES:
            raise InvalidSchedule(
                expression, f"{text!r} is not a known alias", hint=_HINT
            ) from None
        text = _ALIASES[lowered]
    fields = tuple(text.split())
    if len(fields) not in (5, 6):
        got = "it is empty" if not fields else f"it has {len(fields)}"
        raise InvalidSchedule(
            expression, f"a cron expression has 5 or 6 fields; {got}", hint=_HINT
        ) from None
    names = _FIELDS_6 if len(fields) == 6 else _FIELDS_5
    seconds = len(fields) == 6
    for index, (name, value) in enumerate(zip(names, fields, strict=True)):
        probe = ["*"] * len(fields)
        probe[index] = value
        try:
            croniter.expand(" ".join(probe), second_at_beginning=seconds)
        except (ValueError, TypeError, KeyError, IndexError) as exc:
            raise InvalidSchedule(
                expression, _field_reason(name, value, str(exc)), hint=_HINT
            ) from None
    try:
        croniter(" ".join(fields), _NEVER_FROM, second_at_beginning=seconds).get_next(datetime)
    except (ValueError, TypeError, KeyError, IndexError, OverflowError):
        day, month = fields[-3], fields[-2]
        raise InvalidSchedule(
            expression,
            f"it never fires: day of month {day!r} does not occur in month {month!r}",
            hint="Pick a day that month has (February has no 30th); " + _HINT,
        ) from None
    return fields


def _field_reason(name: str, value: str, detail: str) -> str:
    allowed = _ALLOWED[name]
    if "hash" in detail.lower():
        return f"{name}: {value!r} uses H (hashed values), which is not supported"
    if "out of range" in detail or "out of bands" in detail or "negative" in detail:
        return f"{name}: {value!r} is out of range ({allowed})"
    if "step" in detail:
        return f"{name}: {value!r} has a step that is not a positive number"
    if "question mark" in detail.lower():
        return f"{name}: '?' is only allowed in the day of month and day of week fields"
    return (
        f"{name}: {value!r} is not a valid value ({allowed}; "
        "or `*`, a list `1,5`, a range `1-5`, a step `*/15`)"
    )


def _zone(expression: str, name: str) -> ZoneInfo:
    """The zone named `name`; raise `InvalidSchedule` with a did-you-mean when there is none."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, TypeError, OSError):
        pass
    known = available_timezones()
    by_case = {zone.lower(): zone for zone in known}
    close = [by_case[name.lower()]] if name.lower() in by_case else []
    close = close or difflib.get_close_matches(name, sorted(known), n=1)
    guess = f"Did you mean {close[0]!r}? " if close else ""
    raise InvalidSchedule(
        expression, f"time zone {name!r} is unknown", hint=guess + _ZONE_HINT
    ) from None


def _seconds(moment: float, what: str) -> int:
    """`moment` (epoch seconds) rounded down to a whole second; fires are whole seconds."""
    if not math.isfinite(moment):
        raise InvalidOption(f"{what} must be a finite number of epoch seconds, not {moment!r}.")
    return math.floor(moment)


def _offset(moment: datetime) -> int:
    delta = moment.utcoffset()
    assert delta is not None  # an aware datetime in a ZoneInfo
    return int(delta.total_seconds())


@dataclass(frozen=True, slots=True)
class Cron:
    """A cron expression in a time zone: when a schedule fires.

    Build one with `Cron.parse` (or `Cron(expression, timezone)`; both check
    it and raise `InvalidSchedule`). Fire times are epoch seconds (floats
    holding whole seconds). Expressions have 5 fields, 6 with the seconds
    first, or are an alias (`@daily`, `@hourly`, ...).

    Daylight saving follows Debian's cron: times are wall-clock times in
    `timezone`; a wall time skipped by a spring-forward gap fires once at
    the first instant after the gap; a wall time repeated by a fall-back
    fires once, at its first occurrence, unless the hour field is a
    wildcard (`*`, `*/2`, `@hourly`), in which case the schedule runs by the
    clock: through both copies of a repeated hour, and past the times a gap
    skips. No instant is listed twice.

    Examples:
        >>> from datetime import datetime, timezone
        >>> def utc(t): return datetime.fromtimestamp(t, timezone.utc).strftime("%m-%d %H:%M")
        >>> daily = Cron.parse("30 2 * * *", "Europe/Paris")
        >>> start = datetime(2026, 3, 27, tzinfo=timezone.utc).timestamp()
        >>> [utc(t) for t in daily.next_fires(start, 3)]  # 02:30 does not exist on 03-29
        ['03-27 01:30', '03-28 01:30', '03-29 01:00']
        >>> every = Cron.parse("*/10 * * * * *")  # seconds first
        >>> every.next_after(start) - start
        10.0
    """

    expression: str
    """The cron expression, as written."""

    timezone: str = "UTC"
    """The IANA time zone its wall-clock times are in."""

    _fields: tuple[str, ...] = field(init=False, repr=False, compare=False)
    _zone: ZoneInfo = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_fields", _fields(self.expression))
        object.__setattr__(self, "_zone", _zone(self.expression, self.timezone))

    @classmethod
    def parse(cls, expression: str, timezone: str = "UTC") -> Cron:
        """Check a cron expression and a time zone; return the schedule.

        Whitespace around and between the fields is normalised.

        Raises:
            InvalidSchedule: Naming the field that is wrong (or the zone), with an example.
        """
        if not isinstance(expression, str) or not isinstance(timezone, str):
            raise InvalidSchedule(
                repr(expression), "the expression and the time zone must be text", hint=_HINT
            )
        return cls(" ".join(expression.split()), timezone.strip())

    @property
    def has_seconds(self) -> bool:
        """Whether the expression has a seconds field (6 fields)."""
        return len(self._fields) == 6

    @property
    def _hour_wildcard(self) -> bool:
        return self._fields[-4].startswith("*")

    def next_after(self, t: float) -> float:
        """The first fire strictly after `t` (epoch seconds).

        Raises:
            InvalidSchedule: When the schedule never fires again (past year 9999).
        """
        for fire in self._iterate(_seconds(t, "t")):
            return float(fire)
        raise InvalidSchedule(
            self.expression,
            f"it does not fire after {t}",
            hint="Check the expression's day and month fields.",
        )

    def fires_between(self, start: float, end: float, *, limit: int = 1000) -> list[float]:
        """The fires `f` with `start < f <= end`, ascending, at most `limit` of them (the first)."""
        if limit < 0:
            raise InvalidOption(f"limit must be 0 or more, not {limit}.")
        last = _seconds(end, "end")
        found: list[float] = []
        if limit == 0 or end <= start:
            return found
        for fire in self._iterate(_seconds(start, "start")):
            if fire > last:
                break
            found.append(float(fire))
            if len(found) >= limit:
                break
        return found

    def next_fires(self, after: float, count: int) -> list[float]:
        """The next `count` fires strictly after `after`, ascending (fewer if it stops firing)."""
        if count < 0:
            raise InvalidOption(f"count must be 0 or more, not {count}.")
        found: list[float] = []
        if count == 0:
            return found
        for fire in self._iterate(_seconds(after, "after")):
            found.append(float(fire))
            if len(found) >= count:
                break
        return found

    # -- Iteration ----------------------------------------------------------------------

    def _wall_start(self, after: int) -> datetime:
        """The naive wall time to iterate from: `after`'s, or earlier in a repeated hour."""
        try:
            now = datetime.fromtimestamp(after, self._zone)
        except (OverflowError, ValueError, OSError):
            raise InvalidOption(f"{after} is out of the range of dates.") from None
        start = now.replace(tzinfo=None)
        second_pass = now.replace(fold=1)
        if now.fold == 0 and _offset(second_pass) < _offset(now):
            # `after` is in the first pass of a repeated hour: its second pass,
            # at earlier wall times, is still ahead.
            start -= timedelta(seconds=_offset(now) - _offset(second_pass))
        return start

    def _iterate(self, after: int) -> Iterator[int]:
        """Fire instants strictly after `after` (whole epoch seconds), strictly increasing."""
        zone = self._zone
        start = self._wall_start(after)
        walls = croniter(
            " ".join(self._fields), start, ret_type=datetime, second_at_beginning=self.has_seconds
        )
        pending: list[int] = []  # second passes of a repeated hour, due after its first pass
        last = after
        gap: tuple[int, int, int] | None = None  # (after, up to, transition) found last
        while True:
            try:
                wall = walls.get_next(datetime)
            except (ValueError, OverflowError):  # nothing within croniter's horizon
                break
            local = (wall - _EPOCH) // _SECOND
            first_offset = _offset(wall.replace(tzinfo=zone))
            second_offset = _offset(wall.replace(tzinfo=zone, fold=1))
            again: int | None = None
            if first_offset == second_offset:
                fire = local - first_offset
            elif first_offset > second_offset:  # repeated: the first pass, maybe both
                fire = local - first_offset
                if self._hour_wildcard:
                    again = local - second_offset
            elif self._hour_wildcard:  # skipped, by the clock: the next time after the gap
                continue
            else:  # skipped: the first instant after the gap
                low, high = local - second_offset, local - first_offset
                if gap is None or not low < gap[2] <= high:
                    gap = (low, high, self._transition(low, high))
                fire = gap[2]
            while pending and pending[0] < fire:
                earlier = heapq.heappop(pending)
                if earlier > last:
                    last = earlier
                    yield earlier
            if fire > last:
                last = fire
                yield fire
            if again is not None:
                heapq.heappush(pending, again)
        while pending:
            earlier = heapq.heappop(pending)
            if earlier > last:
                last = earlier
                yield earlier

    def _transition(self, low: int, high: int) -> int:
        """The first instant in `(low, high]` with the offset `high` has (the end of a gap)."""
        zone = self._zone
        target = _offset(datetime.fromtimestamp(high, zone))
        while high - low > 1:
            middle = (low + high) // 2
            if _offset(datetime.fromtimestamp(middle, zone)) == target:
                high = middle
            else:
                low = middle
        return high
