"""Times on the command line: `--at` (ISO 8601, or `+10m` from now), and times shown in a zone."""

from __future__ import annotations

import argparse
import time
from datetime import datetime
from zoneinfo import ZoneInfo

__all__ = ["at_time", "in_zone"]


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


def in_zone(at: float, zone: str) -> str:
    """`at` as wall-clock time in the IANA `zone`, with its offset and the zone's abbreviation.

    Examples:
        >>> in_zone(1893484800.0, "Europe/Paris")
        '2030-01-01 09:00:00 +01:00 CET'
    """
    local = datetime.fromtimestamp(at, tz=ZoneInfo(zone))
    offset = local.strftime("%z")
    return f"{local:%Y-%m-%d %H:%M:%S} {offset[:3]}:{offset[3:5]} {local.tzname()}"
