"""Times in the API's triggers routes: answered as ISO 8601 in UTC, taken as ISO 8601 or epoch.

Examples:
    >>> iso_time(0)
    '1970-01-01T00:00:00Z'
    >>> import pydantic
    >>> class At(pydantic.BaseModel):
    ...     at: StartAt
    >>> At.model_validate({"at": "2030-01-01T12:00:00+01:00"}).at.isoformat()
    '2030-01-01T12:00:00+01:00'
    >>> At.model_validate({"at": 1700000000}).at
    1700000000.0
    >>> At.model_validate({"at": "tomorrow"})
    Traceback (most recent call last):
    ...
    pydantic_core._pydantic_core.ValidationError: 2 validation errors for At
    ...
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AwareDatetime, BeforeValidator, Field

from tidemill.flows import iso_time

__all__ = ["EPOCH_MAX", "StartAt", "iso_time"]

EPOCH_MAX = 253402300799.0
"""The last second of year 9999, in seconds since the epoch: the latest time the API takes."""


def _text(value: object) -> object:
    """An ISO 8601 time is text (a number is seconds since the epoch, checked as such)."""
    if not isinstance(value, str):
        raise ValueError("a time is ISO 8601 text or a number of seconds since the epoch")
    return value


StartAt = (
    Annotated[float, Field(ge=0, le=EPOCH_MAX, allow_inf_nan=False, strict=True)]
    | Annotated[AwareDatetime, BeforeValidator(_text)]
)
"""When to start: seconds since the epoch, or ISO 8601 with an offset (`2030-01-01T09:00:00Z`)."""
