"""What a schedule item may hold: a `Schedule`, whose target and handlers its writer may run.

A schedule runs as its owner, the user who last saved it, so saving one
checks, as that writer, everything it will start: the target is a flow or a
script the writer may read (the viewer role is what running needs), and
`on_failure` and `on_recovery` are flows the writer may read. The cron
expression and time zone are parsed (`InvalidSchedule` says what is wrong).

Examples:
    >>> from tidemill.workspace._schedule_content import schedule_problems
    >>> schedule_problems({"cron": "0 9 * * *", "target": "f/ops/report", "every": 3})
    ['at every: Extra inputs are not permitted']
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from tidemill.errors import ConfigurationError
from tidemill.flows import Schedule
from tidemill.flows._load import DocumentError, parse_document
from tidemill.workspace._paths import ItemPath
from tidemill.workspace._session import Context
from tidemill.workspace._values import InvalidValue

__all__ = [
    "SCHEDULE_FIELDS",
    "check_schedule",
    "check_targets",
    "schedule_problems",
    "schedule_spec",
    "stored_form",
]

SCHEDULE_FIELDS = (
    "cron, timezone, target, inputs, enabled, catch_up (latest, all or skip), "
    "on_failure, on_recovery"
)
"""The fields of a schedule, for hints."""


def schedule_problems(value: Any) -> list[str]:
    """Each problem of `value` as a `Schedule`, as `at <field>: <message>` (none: it is one)."""
    try:
        Schedule.model_validate(value)
    except ValidationError as exc:
        return [
            f"at {'.'.join(str(part) for part in error['loc']) or 'the schedule'}: {error['msg']}"
            for error in exc.errors()
        ]
    return []


def schedule_spec(path: str, value: Any) -> Schedule:
    """`value` (a mapping, or YAML text) as a `Schedule`, with its cron parsed.

    Raises:
        InvalidValue: It is not a schedule (`problems` lists why).
        InvalidSchedule: Its cron expression or time zone is not valid.
    """
    if isinstance(value, str):
        try:
            value = parse_document(value, "yaml")
        except DocumentError as exc:
            raise InvalidValue(f"{path}: {exc.message}") from None
    if not isinstance(value, dict):
        raise InvalidValue(
            f"{path}: a schedule is a mapping, not {type(value).__name__}.",
            hint=f"Write a mapping with {SCHEDULE_FIELDS}.",
        )
    problems = schedule_problems(value)
    if problems:
        raise InvalidValue(
            f"{path}: this is not a schedule: {'; '.join(problems)}.",
            problems=problems,
            hint=f"A schedule has {SCHEDULE_FIELDS}; cron and target are required.",
        )
    spec = Schedule.model_validate(value)
    spec.cron_schedule()
    return spec


def _runnable(ctx: Context, path: str, field: str, target: str, kinds: tuple[str, ...]) -> None:
    """Refuse unless `target` is an item of one of `kinds` that the writer may read."""
    who = ctx.principal.name
    try:
        target = str(ItemPath.parse(target))
    except ConfigurationError as exc:
        raise InvalidValue(
            f"{path}: {field} {target!r} is not a workspace path: {exc.message}",
            problems=[f"at {field}: not a workspace path"],
            hint="Name a flow or script as f/<folder>/<name> or u/<user>/<name>.",
        ) from None
    stored = ctx.q.item(target) if ctx.rules.allows("read", target) else None
    found = None if stored is None or stored.item.deleted else stored.item.kind
    if found in kinds:
        return
    what = " or ".join(kinds)
    held = f" ({target} is a {found})" if found is not None else ""
    raise InvalidValue(
        f"{path}: {field} {target} is no {what} that {who} may run{held}; a schedule runs as "
        f"whoever saved it last.",
        problems=[f"at {field}: no {what} {target} that {who} may read"],
        hint=f"Write the {what} first, fix the path, or ask for the viewer role on it "
        f"(tidemill ws list {target.rsplit('/', 1)[0]} shows what {who} may read).",
        context={"path": path, "field": field, "target": target},
    )


def check_targets(ctx: Context, path: str, spec: Schedule) -> None:
    """Refuse unless the writer may run the schedule's target and read its handlers.

    Raises:
        InvalidValue: It names what the writer may not run.
    """
    _runnable(ctx, path, "target", spec.target, ("flow", "script"))
    for field in ("on_failure", "on_recovery"):
        handler = getattr(spec, field)
        if handler is not None:
            _runnable(ctx, path, field, handler, ("flow",))


def check_schedule(ctx: Context, path: str, value: Any) -> dict[str, Any]:
    """`value` checked as a schedule item at `path` written by the principal; its stored form.

    Raises:
        InvalidValue: Not a schedule, or it names what the writer may not run.
        InvalidSchedule: Its cron expression or time zone is not valid.
    """
    spec = schedule_spec(path, value)
    check_targets(ctx, path, spec)
    return stored_form(spec)


def stored_form(spec: Schedule) -> dict[str, Any]:
    """A schedule as its item stores it: what differs from the defaults."""
    stored: dict[str, Any] = spec.model_dump(mode="json", exclude_defaults=True)
    return stored
