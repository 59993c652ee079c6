"""`Sleep` and `WaitForEvent`: steps that wait for a time, or for an event from outside.

Both are durable: while one waits its run holds no worker (the job is parked
in the store with the time it ends or the event it waits for), so a run can
sleep for days and wake on whichever worker is alive then.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any, Literal, Self

from pydantic import ConfigDict, Field, model_validator

from tidemill.flows._base import ExpressionText, StepKind
from tidemill.flows._duration import Duration
from tidemill.flows._expr import Expression, compile_expression

__all__ = ["EVENT_NAME_PATTERN", "Sleep", "WaitForEvent", "iso_time", "wake_time"]

EVENT_NAME_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_.:-]{0,127}$"
"""What an event's name looks like: letters, digits, `_ . : -`, up to 128 characters."""


class Sleep(StepKind):
    """Wait for a while (`for: 3d`) or until a time (`until: <expression>`), holding no worker.

    `until` is an expression whose value is an ISO 8601 time (`2026-12-24T09:00:00+01:00`;
    one without an offset is UTC) or seconds since the epoch. A time already past
    ends the step at once. The step's result is `{"until": <the ISO time it slept until>}`.

    Examples:
        >>> Sleep.model_validate({"for": "3d"}).for_
        259200.0
        >>> Sleep(until="flow_input.at").until
        'flow_input.at'
    """

    model_config = ConfigDict(
        validate_by_name=True, validate_by_alias=True, serialize_by_alias=True
    )

    for_: Duration | None = Field(default=None, alias="for")
    """How long to sleep (seconds, or `30s`, `5m`, `2h`, `3d`)."""

    until: ExpressionText | None = None
    """An expression for the time to sleep until (ISO 8601, or seconds since the epoch)."""

    @model_validator(mode="after")
    def _one_of(self) -> Self:
        if (self.for_ is None) == (self.until is None):
            raise ValueError("a sleep step sets exactly one of `for` (a duration) and `until`")
        return self

    def expressions(self) -> dict[str, Expression]:
        """`until`, when set."""
        return {} if self.until is None else {"until": compile_expression(self.until)}


class WaitForEvent(StepKind):
    """Wait until an event with this name and key is sent; its payload is the step's result.

    Events are sent with `AsyncEngine.send_event`, `tidemill events send` or
    `POST /api/events`. One sent before the run reaches the step is kept (see
    `send_event`'s `keep`) and taken when the step starts waiting.

    Examples:
        >>> WaitForEvent(name="order_paid", key="flow_input.order_id", timeout="2d").timeout
        172800.0
    """

    name: str = Field(pattern=EVENT_NAME_PATTERN)
    """The event's name, e.g. `order_paid`."""

    key: ExpressionText | None = None
    """An expression for the key the event must carry (e.g. `flow_input.order_id`); None: ''."""

    timeout: Duration | None = None
    """How long to wait (seconds, or `30m`, `3d`); None waits for ever."""

    on_timeout: Literal["fail", "continue"] = "fail"
    """When the timeout passes: fail the step (`EventTimeout`), or go on with a null result."""

    def expressions(self) -> dict[str, Expression]:
        """`key`, when set."""
        return {} if self.key is None else {"key": compile_expression(self.key)}


def wake_time(value: Any) -> float:
    """The time (seconds since the epoch) an `until` expression's value names.

    Raises:
        ValueError: The value is neither an ISO 8601 time nor a finite number.

    Examples:
        >>> wake_time("2026-12-24T08:00:00Z"), wake_time(1798099200)
        (1798099200.0, 1798099200.0)
        >>> wake_time("next tuesday")
        Traceback (most recent call last):
          ...
        ValueError: 'next tuesday' is not a time: give an ISO 8601 time ...
    """
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a time: give an ISO 8601 time or epoch seconds")
    if isinstance(value, int | float):
        if not math.isfinite(value):
            raise ValueError(f"{value!r} is not a time: give a finite number of epoch seconds")
        return float(value)
    if isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value.strip())
        except ValueError:
            raise ValueError(
                f"{value!r} is not a time: give an ISO 8601 time (2026-12-24T09:00:00+01:00) "
                "or epoch seconds"
            ) from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        return moment.timestamp()
    raise ValueError(f"{value!r} is not a time: give an ISO 8601 time or epoch seconds")


def iso_time(t: float) -> str:
    """`t` (seconds since the epoch) as ISO 8601 in UTC, with a `Z` (and milliseconds if any).

    How times are written everywhere a person reads them: a sleep's result, a
    wait's reason, the API's and the CLI's schedules and events.

    Examples:
        >>> iso_time(0), iso_time(1798099200.25)
        ('1970-01-01T00:00:00Z', '2026-12-24T08:00:00.250Z')
    """
    moment = datetime.fromtimestamp(t, UTC)
    spec = "seconds" if moment.microsecond == 0 else "milliseconds"
    return moment.isoformat(timespec=spec).removesuffix("+00:00") + "Z"
