"""`Cron`: fields, seconds first, aliases, refusals, and daylight saving the way cron does it."""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from tidemill.errors import ConfigurationError, InvalidOption, InvalidSchedule
from tidemill.flows import Cron


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0) -> float:
    """Epoch seconds of a UTC date and time."""
    return datetime(year, month, day, hour, minute, second, tzinfo=UTC).timestamp()


def shown(fires: list[float]) -> list[str]:
    return [datetime.fromtimestamp(f, UTC).strftime("%m-%d %H:%M:%S") for f in fires]


# -- Fields, seconds, aliases --------------------------------------------------------------


def test_five_fields_are_minute_hour_day_month_weekday() -> None:
    cron = Cron.parse("30 2 * * *")
    assert cron.next_fires(utc(2026, 1, 1), 2) == [utc(2026, 1, 1, 2, 30), utc(2026, 1, 2, 2, 30)]
    assert not cron.has_seconds


def test_six_fields_put_the_seconds_first() -> None:
    cron = Cron.parse("15 30 2 * * *")
    assert cron.has_seconds
    assert cron.next_after(utc(2026, 1, 1)) == utc(2026, 1, 1, 2, 30, 15)
    every_ten = Cron.parse("*/10 * * * * *")
    assert every_ten.next_fires(utc(2026, 1, 1), 3) == [
        utc(2026, 1, 1, 0, 0, 10),
        utc(2026, 1, 1, 0, 0, 20),
        utc(2026, 1, 1, 0, 0, 30),
    ]


def test_names_lists_ranges_and_last_day() -> None:
    weekdays = Cron.parse("0 9 * JAN MON-FRI")  # 2026-01-02 is a Friday
    assert shown(weekdays.next_fires(utc(2026, 1, 1, 12), 2)) == [
        "01-02 09:00:00",
        "01-05 09:00:00",
    ]
    last_day = Cron.parse("0 0 L * ?")
    assert last_day.next_after(utc(2026, 2, 1)) == utc(2026, 2, 28)
    listed = Cron.parse("0,30 8-9 * * *")
    assert shown(listed.next_fires(utc(2026, 1, 1), 5)) == [
        "01-01 08:00:00",
        "01-01 08:30:00",
        "01-01 09:00:00",
        "01-01 09:30:00",
        "01-02 08:00:00",
    ]


@pytest.mark.parametrize(
    ("alias", "first"),
    [
        ("@yearly", utc(2027, 1, 1)),
        ("@annually", utc(2027, 1, 1)),
        ("@monthly", utc(2026, 2, 1)),
        ("@weekly", utc(2026, 1, 4)),  # a Sunday
        ("@daily", utc(2026, 1, 2)),
        ("@midnight", utc(2026, 1, 2)),
        ("@hourly", utc(2026, 1, 1, 13)),
        ("@DAILY", utc(2026, 1, 2)),
    ],
)
def test_aliases(alias: str, first: float) -> None:
    assert Cron.parse(alias).next_after(utc(2026, 1, 1, 12, 30)) == first


def test_parse_normalises_whitespace_and_equal_schedules_compare_equal() -> None:
    cron = Cron.parse("  0   0 * * *  ", " Europe/Paris ")
    assert cron == Cron("0 0 * * *", "Europe/Paris")
    assert hash(cron) == hash(Cron("0 0 * * *", "Europe/Paris"))
    assert repr(cron) == "Cron(expression='0 0 * * *', timezone='Europe/Paris')"
    assert cron != Cron("0 0 * * *")


def test_fires_are_whole_seconds_strictly_after_t() -> None:
    cron = Cron.parse("* * * * * *")
    assert cron.next_after(0.5) == 1.0
    assert cron.next_after(1.0) == 2.0
    assert cron.next_after(-0.5) == 0.0
    assert all(isinstance(f, float) and f == int(f) for f in cron.next_fires(10.25, 5))


# -- Refusals -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "field"),
    [
        ("60 * * * * *", "second"),
        ("60 * * * *", "minute"),
        ("* 24 * * *", "hour"),
        ("* * 0 * *", "day of month"),
        ("* * 32 * *", "day of month"),
        ("* * * 13 *", "month"),
        ("* * * 0 *", "month"),
        ("* * * * 8", "day of week"),
        ("1-70 * * * *", "minute"),
        ("-1 * * * *", "minute"),
        ("0 0 25 * * *", "hour"),
    ],
)
def test_a_field_out_of_range_is_named(expression: str, field: str) -> None:
    with pytest.raises(InvalidSchedule) as info:
        Cron.parse(expression)
    assert info.value.reason.startswith(f"{field}: ")
    assert "out of range" in info.value.reason
    assert info.value.hint is not None and "30 2 * * *" in info.value.hint
    assert isinstance(info.value, ConfigurationError)


@pytest.mark.parametrize(
    ("expression", "count"),
    [("* * * *", "it has 4"), ("* * * * * * *", "it has 7"), ("", "it is empty"), ("   ", "empty")],
)
def test_the_wrong_number_of_fields(expression: str, count: str) -> None:
    with pytest.raises(InvalidSchedule, match="5 or 6 fields") as info:
        Cron.parse(expression)
    assert count in info.value.reason


@pytest.mark.parametrize(
    ("expression", "reason"),
    [
        ("hello * * * *", "minute: 'hello' is not a valid value"),
        ("1,,2 * * * *", "minute: '1,,2' is not a valid value"),
        ("*/0 * * * *", "minute: '*/0' has a step"),
        ("* * * FOO *", "month: 'FOO' is not a valid value"),
        ("* ? * * *", "hour: '?' is only allowed"),
        ("H * * * *", "not supported"),
        ("@reboot", "not a known alias"),
        ("0 0 30 2 *", "never fires"),
        ("0 0 31 4 *", "never fires"),
    ],
)
def test_garbage_is_refused_with_what_is_wrong(expression: str, reason: str) -> None:
    with pytest.raises(InvalidSchedule) as info:
        Cron.parse(expression)
    assert reason in info.value.reason
    assert info.value.expression == expression
    assert "Hint:" in str(info.value)


def test_constructing_directly_checks_too() -> None:
    with pytest.raises(InvalidSchedule, match="hour"):
        Cron("0 99 * * *")


@pytest.mark.parametrize(
    ("zone", "guess"),
    [
        ("Mars/Olympus_Mons", None),
        ("europe/paris", "Europe/Paris"),
        ("Europe/Pariss", "Europe/Paris"),
        ("", None),
        ("../../etc/passwd", None),
    ],
)
def test_an_unknown_time_zone_is_refused_with_a_hint(zone: str, guess: str | None) -> None:
    with pytest.raises(InvalidSchedule, match="time zone") as info:
        Cron.parse("0 0 * * *", zone)
    assert info.value.hint is not None and "IANA" in info.value.hint
    if guess is not None:
        assert f"Did you mean {guess!r}?" in info.value.hint


def test_bad_arguments_to_the_queries() -> None:
    cron = Cron.parse("@hourly")
    with pytest.raises(InvalidOption):
        cron.next_after(float("nan"))
    with pytest.raises(InvalidOption):
        cron.fires_between(0, 10, limit=-1)
    with pytest.raises(InvalidOption):
        cron.next_fires(0, -1)


# -- Ranges, limits, counts -----------------------------------------------------------------


def test_fires_between_excludes_start_and_includes_end() -> None:
    hourly = Cron.parse("0 * * * *")
    assert hourly.fires_between(0, 3600) == [3600.0]
    assert hourly.fires_between(3600, 7200) == [7200.0]
    assert hourly.fires_between(3600, 7199) == []
    assert hourly.fires_between(7200, 3600) == []
    assert hourly.fires_between(0, 4 * 3600) == [3600.0, 7200.0, 10800.0, 14400.0]


def test_limit_caps_an_every_second_day() -> None:
    every_second = Cron.parse("* * * * * *")
    fires = every_second.fires_between(0, 86400)
    assert len(fires) == 1000
    assert fires[0] == 1.0 and fires[-1] == 1000.0
    assert every_second.fires_between(0, 86400, limit=3) == [1.0, 2.0, 3.0]
    assert every_second.fires_between(0, 86400, limit=0) == []


def test_next_fires_counts() -> None:
    daily = Cron.parse("@daily")
    assert daily.next_fires(0, 3) == [86400.0, 2 * 86400.0, 3 * 86400.0]
    assert daily.next_fires(0, 0) == []
    assert daily.next_fires(0, 3) == daily.fires_between(0, 3 * 86400)


# -- Daylight saving --------------------------------------------------------------------------
# Europe/Paris: 2026-03-29 01:00Z clocks go 02:00 -> 03:00; 2026-10-25 01:00Z 03:00 -> 02:00.
# America/New_York: 2026-03-08 07:00Z 02:00 -> 03:00; 2026-11-01 06:00Z 02:00 -> 01:00.


def test_a_skipped_wall_time_fires_once_at_the_end_of_the_gap() -> None:
    paris = Cron.parse("30 2 * * *", "Europe/Paris")
    assert paris.next_fires(utc(2026, 3, 27, 12), 3) == [
        utc(2026, 3, 28, 1, 30),  # 02:30 CET
        utc(2026, 3, 29, 1, 0),  # 02:30 does not exist: 03:00 CEST
        utc(2026, 3, 30, 0, 30),  # 02:30 CEST
    ]
    new_york = Cron.parse("30 2 * * *", "America/New_York")
    assert new_york.next_fires(utc(2026, 3, 7), 3) == [
        utc(2026, 3, 7, 7, 30),
        utc(2026, 3, 8, 7, 0),  # 03:00 EDT
        utc(2026, 3, 9, 6, 30),
    ]


def test_a_repeated_wall_time_fires_once_at_its_first_occurrence() -> None:
    paris = Cron.parse("30 2 * * *", "Europe/Paris")
    assert paris.next_fires(utc(2026, 10, 24), 3) == [
        utc(2026, 10, 24, 0, 30),
        utc(2026, 10, 25, 0, 30),  # 02:30 CEST, not again at 02:30 CET (01:30Z)
        utc(2026, 10, 26, 1, 30),
    ]
    new_york = Cron.parse("30 1 * * *", "America/New_York")
    assert new_york.next_fires(utc(2026, 10, 31), 3) == [
        utc(2026, 10, 31, 5, 30),
        utc(2026, 11, 1, 5, 30),  # 01:30 EDT, not again at 01:30 EST (06:30Z)
        utc(2026, 11, 2, 6, 30),
    ]
    # Asked from inside the second pass, the repeated time is not due again.
    assert new_york.next_after(utc(2026, 11, 1, 6, 10)) == utc(2026, 11, 2, 6, 30)


def test_a_fixed_hour_with_a_minute_step_fires_in_the_first_pass_only() -> None:
    cron = Cron.parse("*/30 1 * * *", "America/New_York")
    assert cron.next_fires(utc(2026, 11, 1), 3) == [
        utc(2026, 11, 1, 5, 0),
        utc(2026, 11, 1, 5, 30),
        utc(2026, 11, 2, 6, 0),
    ]


def test_times_that_exist_once_are_not_moved() -> None:
    one_thirty = Cron.parse("30 1 * * *", "Europe/Paris")
    assert one_thirty.next_after(utc(2026, 3, 29)) == utc(2026, 3, 29, 0, 30)  # 01:30 CET
    new_york = Cron.parse("30 1 * * *", "America/New_York")
    assert new_york.next_after(utc(2026, 3, 8)) == utc(2026, 3, 8, 6, 30)  # 01:30 EST
    late = Cron.parse("30 2 * * *", "America/New_York")
    assert late.next_after(utc(2026, 11, 1)) == utc(2026, 11, 1, 7, 30)  # 02:30 EST


def test_every_fifteen_minutes_keeps_real_time_through_both_transitions() -> None:
    for zone, start in [
        ("America/New_York", utc(2026, 11, 1, 4)),
        ("Europe/Paris", utc(2026, 10, 24, 23)),
        ("America/New_York", utc(2026, 3, 8, 5)),
        ("Europe/Paris", utc(2026, 3, 28, 23)),
    ]:
        fires = Cron.parse("*/15 * * * *", zone).next_fires(start, 16)
        assert fires[0] == start + 900
        assert [b - a for a, b in itertools.pairwise(fires)] == [900.0] * 15, zone


def test_hourly_fires_in_both_copies_of_the_repeated_hour() -> None:
    hourly = Cron.parse("@hourly", "America/New_York")
    assert hourly.fires_between(utc(2026, 11, 1, 3, 30), utc(2026, 11, 1, 7)) == [
        utc(2026, 11, 1, 4),  # 00:00 EDT
        utc(2026, 11, 1, 5),  # 01:00 EDT
        utc(2026, 11, 1, 6),  # 01:00 EST
        utc(2026, 11, 1, 7),  # 02:00 EST
    ]
    # From inside the first pass, the second pass is still ahead.
    quarter = Cron.parse("*/15 * * * *", "America/New_York")
    assert quarter.next_after(utc(2026, 11, 1, 5, 50)) == utc(2026, 11, 1, 6)


def test_every_second_crosses_the_gap_without_a_repeat() -> None:
    every_second = Cron.parse("* * * * * *", "Europe/Paris")
    assert every_second.next_fires(utc(2026, 3, 29, 0, 59, 57), 4) == [
        utc(2026, 3, 29, 0, 59, 58),
        utc(2026, 3, 29, 0, 59, 59),  # 01:59:59 CET
        utc(2026, 3, 29, 1, 0, 0),  # 03:00:00 CEST (every skipped second lands here once)
        utc(2026, 3, 29, 1, 0, 1),
    ]
    new_york = Cron.parse("* * * * * *", "America/New_York")
    assert new_york.next_fires(utc(2026, 11, 1, 5, 59, 58), 3) == [
        utc(2026, 11, 1, 5, 59, 59),  # 01:59:59 EDT
        utc(2026, 11, 1, 6, 0, 0),  # 01:00:00 EST, by the clock
        utc(2026, 11, 1, 6, 0, 1),
    ]


def test_utc_has_no_transitions() -> None:
    cron = Cron.parse("30 2 * * *")
    assert cron.next_fires(utc(2026, 3, 28), 3) == [
        utc(2026, 3, 28, 2, 30),
        utc(2026, 3, 29, 2, 30),
        utc(2026, 3, 30, 2, 30),
    ]
    assert Cron.parse("*/15 * * * *").fires_between(utc(2026, 10, 25), utc(2026, 10, 25, 4)) == [
        utc(2026, 10, 25) + 900.0 * i for i in range(1, 17)
    ]


TRANSITIONS = [
    ("Europe/Paris", utc(2026, 3, 28, 20)),
    ("Europe/Paris", utc(2026, 10, 24, 20)),
    ("America/New_York", utc(2026, 3, 8, 2)),
    ("America/New_York", utc(2026, 10, 31, 23)),
]


@pytest.mark.parametrize(("zone", "start"), TRANSITIONS)
@pytest.mark.parametrize(
    "expression",
    [
        "30 2 * * *",
        "30 1 * * *",
        "*/15 * * * *",
        "*/7 * * * *",
        "@hourly",
        "0 */2 * * *",
        "*/20 1-3 * * *",
        "30 * * * * *",
    ],
)
def test_fires_are_strictly_increasing_and_agree_across_queries(
    zone: str, start: float, expression: str
) -> None:
    cron = Cron.parse(expression, zone)
    end = start + 12 * 3600
    fires = cron.fires_between(start, end, limit=10_000)
    assert fires, expression
    assert all(a < b for a, b in itertools.pairwise(fires))
    assert all(start < f <= end for f in fires)
    assert cron.next_fires(start, len(fires)) == fires
    # Starting from any fire gives the rest: no fire depends on where the query began.
    for index in range(0, len(fires) - 1, max(1, len(fires) // 7)):
        assert cron.next_after(fires[index]) == fires[index + 1]
        assert cron.next_after(fires[index] - 0.5) == fires[index]


@pytest.fixture
def other_process_zone() -> Iterator[None]:
    if not hasattr(time, "tzset"):
        pytest.skip("no time.tzset on this platform")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TZ", "Asia/Tokyo")
        time.tzset()
        yield
    time.tzset()


@pytest.mark.usefixtures("other_process_zone")
def test_the_process_time_zone_does_not_matter() -> None:
    assert Cron.parse("30 2 * * *", "Europe/Paris").next_after(utc(2026, 3, 29)) == utc(
        2026, 3, 29, 1
    )
    assert Cron.parse("30 2 * * *").next_after(utc(2026, 3, 29)) == utc(2026, 3, 29, 2, 30)


def test_a_wildcard_hour_schedule_skips_the_times_a_gap_skips() -> None:
    # Paris springs forward at 01:00 UTC on 2026-03-29 (02:00 CET -> 03:00 CEST): `30 * * * *`
    # fires at 01:30 CET and 03:30 CEST, by the clock, and not at the gap's end (03:00 CEST).
    start = datetime(2026, 3, 29, 0, 0, tzinfo=UTC).timestamp()
    end = datetime(2026, 3, 29, 2, 0, tzinfo=UTC).timestamp()
    fires = Cron.parse("30 * * * *", "Europe/Paris").fires_between(start, end)
    assert [datetime.fromtimestamp(f, UTC).strftime("%H:%M") for f in fires] == ["00:30", "01:30"]
