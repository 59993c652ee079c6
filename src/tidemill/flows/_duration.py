"""Durations: a number of seconds, or a string such as `500ms`, `30s`, `5m`, `2h`, `3d`."""

from __future__ import annotations

import math
import re
from typing import Annotated, Any

from pydantic import BeforeValidator, WithJsonSchema

__all__ = ["DURATION_PATTERN", "Duration", "parse_duration"]

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}

DURATION_PATTERN = r"^\s*(\d+(\.\d*)?|\.\d+)\s*(ms|s|m|h|d)?\s*$"
"""The string form of a duration: a number, optionally followed by ms, s, m, h or d."""

_DURATION = re.compile(DURATION_PATTERN)


def parse_duration(value: Any) -> float:
    """Return a duration in seconds.

    Numbers are seconds; strings may carry a unit (`ms`, `s`, `m`, `h`, `d`).
    The duration must be finite and greater than zero.

    Raises:
        ValueError: When `value` is not a duration.

    Examples:
        >>> parse_duration("500ms"), parse_duration("5m"), parse_duration(1.5), parse_duration("2")
        (0.5, 300.0, 1.5, 2.0)
        >>> parse_duration(10**400)
        Traceback (most recent call last):
          ...
        ValueError: a duration must be finite and greater than zero, got 1000...
        >>> parse_duration("soon")
        Traceback (most recent call last):
          ...
        ValueError: 'soon' is not a duration; use seconds, or a number with ms, s, m, h or d ...
    """
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValueError(f"{value!r} is not a duration; use seconds or a string such as '30s'")
    if isinstance(value, str):
        match = _DURATION.match(value)
        if match is None:
            raise ValueError(
                f"{value!r} is not a duration; use seconds, or a number with ms, s, m, h "
                "or d (500ms, 30s, 5m, 2h, 3d)"
            )
        seconds = float(match.group(1)) * _UNITS[match.group(3) or "s"]
    else:
        try:
            seconds = float(value)
        except OverflowError:  # an int too large for a float
            seconds = math.inf
    if not math.isfinite(seconds) or seconds <= 0:
        raise ValueError(f"a duration must be finite and greater than zero, got {value!r}")
    return seconds


Duration = Annotated[
    float,
    BeforeValidator(parse_duration),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "number", "exclusiveMinimum": 0},
                {"type": "string", "pattern": DURATION_PATTERN},
            ],
            "description": "Seconds, or a number with a unit: 500ms, 30s, 5m, 2h, 3d.",
        }
    ),
]
"""A field type: seconds as a float, accepting the string forms on input."""
