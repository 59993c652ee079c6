"""Times on the command line: `--at` (ISO 8601, or `+10m` from now), ages, and times in a zone."""

from __future__ import annotations

import argparse
import time
from datetime import datetime
from zoneinfo import ZoneInfo

__all__ = ["age_text", "at_time", "in_zone", "run_age"]


def at_time(text: str) -> float:
    """Read `--at`: an ISO 8601 time (local time without an offset), or `+DURATION` from now.

    Examples:
        >>> at_time("2030-01-01T09:00:00+01:00")
        1893484800.0
        >>> 590 < at_time("+10m") - time.time() <= 600
        True
        >>> at_time("soon")
        Traceback (most recent call last):
        ...
        argparse.ArgumentTypeError: 'soon' is no time: write ISO 8601 ... or +DURATION from now ...
    """
    from tidemill.flows import parse_duration

    text = text.strip()
    if text.startswith("+"):
        try:
            return time.time() + parse_duration(text[1:])
        except ValueError:
            pass
    else:
        try:
            at = datetime.fromisoformat(text)
        except ValueError:
            pass
        else:
            return (at if at.tzinfo is not None else at.astimezone()).timestamp()
    raise argparse.ArgumentTypeError(
        f"{text!r} is no time: write ISO 8601 (2030-01-01T09:00:00+01:00) "
        "or +DURATION from now (+10m, +2h, +3d)"
    )


def run_age(text: str) -> float:
    """Read `--older-than` and `--keep-runs`: a positive duration (`30d`, `12h`, seconds).

    Examples:
        >>> run_age("30d"), run_age("12h"), run_age("90")
        (2592000.0, 43200.0, 90.0)
        >>> run_age("-1d")
        Traceback (most recent call last):
        ...
        argparse.ArgumentTypeError: '-1d' is not a positive duration: write 30d, 12h, 45m or ...
    """
    from tidemill.flows import parse_duration

    try:
        return parse_duration(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a positive duration: write 30d, 12h, 45m or seconds (90)"
        ) from None


def age_text(seconds: float) -> str:
    """A duration as `run_age` reads it, in its largest whole unit: `30d`, `36h`, `90s`.

    Examples:
        >>> [age_text(s) for s in (2592000.0, 129600.0, 5400.0, 90.0, 0.5)]
        ['30d', '36h', '90m', '90s', '0.5s']
    """
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:g}{unit}"
    return f"{seconds:g}s"


def in_zone(at: float, zone: str) -> str:
    """`at` as wall-clock time in the IANA `zone`, with its offset and the zone's abbreviation.

    Examples:
        >>> in_zone(1893484800.0, "Europe/Paris")
        '2030-01-01 09:00:00 +01:00 CET'
    """
    local = datetime.fromtimestamp(at, tz=ZoneInfo(zone))
    offset = local.strftime("%z")
    return f"{local:%Y-%m-%d %H:%M:%S} {offset[:3]}:{offset[3:5]} {local.tzname()}"
