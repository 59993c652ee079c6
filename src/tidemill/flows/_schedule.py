"""`Schedule`: the content of a workspace schedule item, a cron expression and what it runs.

A schedule names the flow or script it runs by workspace path (`target`),
the inputs it passes, and what happens to fires missed while nothing ran
(`catch_up`). Its summary and description live on the workspace item, as
for every other kind of item, not here.
"""

from __future__ import annotations

import functools
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator

from tidemill.errors import InvalidSchedule
from tidemill.flows._base import FlowModel
from tidemill.flows._cron import Cron
from tidemill.flows._load import WORKSPACE_PATH

__all__ = ["CatchUp", "Schedule"]

CatchUp = Literal["latest", "all", "skip"]
"""What a schedule does with fires missed while nothing ran."""


def _check_path(value: str, what: str) -> str:
    if not WORKSPACE_PATH.match(value):
        raise ValueError(
            f"{value!r} is not a workspace path of {what}: write `u/<user>/<name>` or "
            "`f/<folder>/<name>` (lowercase letters, digits, '_' and '-'), e.g. `f/reports/daily`"
        )
    return value


class Schedule(FlowModel):
    """A workspace schedule: run a flow or script at the times a cron expression names.

    `cron` and `timezone` are checked as `Cron.parse` checks them (5 fields,
    6 with the seconds first, or an alias such as `@daily`; an IANA zone);
    a bad one is refused with `InvalidSchedule`'s message and hint.
    `target`, `on_failure` and `on_recovery` are workspace paths
    (`u/<user>/...` or `f/<folder>/...`). Unknown keys are errors.

    Examples:
        >>> schedule = Schedule.model_validate(
        ...     {"cron": "0 30 2 * * *", "timezone": "Europe/Paris",
        ...      "target": "f/reports/daily", "inputs": {"days": 1}}
        ... )
        >>> schedule.catch_up, schedule.enabled, schedule.cron_schedule().has_seconds
        ('latest', True, True)
        >>> Schedule.model_validate({"cron": "0 25 * * *", "target": "f/reports/daily"})
        Traceback (most recent call last):
            ...
        pydantic_core._pydantic_core.ValidationError: 1 validation error for Schedule
        cron
          Value error, Schedule '0 25 * * *' is not valid: hour: '25' is out of range (0-23) ...
    """

    CATCH_UP_ALL_LIMIT: ClassVar[int] = 100
    """With `catch_up: all`, at most this many missed fires are run (the oldest first)."""

    cron: str
    """When it fires: `min hour dom month dow`, `sec min hour dom month dow`, or `@daily`, ...."""

    timezone: str = "UTC"
    """The IANA time zone `cron`'s wall-clock times are in (`Europe/Paris`)."""

    target: str
    """The workspace path of the flow or script each fire runs (`f/reports/daily`)."""

    inputs: dict[str, Any] = Field(default_factory=dict)
    """The input each run gets."""

    enabled: bool = True
    """Whether it fires; a disabled schedule keeps its settings and fires nothing."""

    catch_up: CatchUp = "latest"
    """Fires missed while nothing ran (the scheduler was down, the schedule was off).

    `latest` (the default) runs the most recent missed fire and records the
    others as skipped; `all` runs each missed fire, oldest first, up to
    `CATCH_UP_ALL_LIMIT`; `skip` runs none of them."""

    on_failure: str | None = None
    """The workspace path of a flow run when a fired run fails."""

    on_recovery: str | None = None
    """The workspace path of a flow run on the first success after failures."""

    @field_validator("cron")
    @classmethod
    def _check_cron(cls, value: str) -> str:
        try:
            Cron.parse(value)
        except InvalidSchedule as exc:
            raise ValueError(str(exc)) from None
        return value

    @field_validator("timezone")
    @classmethod
    def _check_timezone(cls, value: str) -> str:
        try:
            Cron.parse("* * * * *", value)
        except InvalidSchedule as exc:
            raise ValueError(f"{exc.reason}. Hint: {exc.hint}") from None
        return value

    @field_validator("target")
    @classmethod
    def _check_target(cls, value: str) -> str:
        return _check_path(value, "a flow or script")

    @field_validator("on_failure", "on_recovery")
    @classmethod
    def _check_handler(cls, value: str | None) -> str | None:
        return None if value is None else _check_path(value, "a flow")

    @functools.cached_property
    def _cron(self) -> Cron:
        return Cron.parse(self.cron, self.timezone)

    def cron_schedule(self) -> Cron:
        """The `Cron` of `cron` in `timezone`: when the schedule fires."""
        return self._cron
