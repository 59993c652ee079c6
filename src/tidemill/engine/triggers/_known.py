"""The schedules a scheduler knows: each item's version, parsed once, and its cursor.

The scheduler re-reads the schedule items' paths and versions with one query
on every tick; an item is parsed again only when its version changed. The
cursor of a schedule is the time up to which its fires are dealt with:
first the later of its last recorded fire and when its version was saved
(so an edit, a pause or a resume takes effect at its next fire after that),
then each fire it looked at.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field

from pydantic import ValidationError

from tidemill.errors import InvalidSchedule
from tidemill.flows import Cron, Schedule

__all__ = ["Known", "Schedules"]

log = logging.getLogger("tidemill.scheduler")


@dataclass(slots=True)
class Known:
    """One schedule item, as of its version."""

    path: str
    version: int
    owner: str
    """Who it runs as: who saved this version."""
    updated_at: float
    spec: Schedule | None
    """None: the stored value is no valid schedule (any more); it fires nothing."""
    cursor: float
    """Its fires up to here are dealt with."""
    next_at: float | None = field(default=None)
    """Its first fire after `cursor` (None: it does not fire)."""
    planned: tuple[float, object] | None = field(default=None)
    """The run of its next fire, planned ahead: `(fire_at, Ready)` (see `Scheduler`)."""

    @property
    def cron(self) -> Cron | None:
        """Its cron, when it fires at all."""
        if self.spec is None or not self.spec.enabled:
            return None
        return self.spec.cron_schedule()

    def advance(self, to: float) -> None:
        """Its fires up to `to` are dealt with: look for the next one after."""
        self.cursor = max(self.cursor, to)
        cron = self.cron
        self.next_at = None if cron is None else cron.next_after(self.cursor)


def _parse(path: str, body: str) -> Schedule | None:
    try:
        spec = Schedule.model_validate(json.loads(body))
        spec.cron_schedule()
    except (ValueError, ValidationError, InvalidSchedule) as exc:
        log.warning("schedule %s is not valid, it fires nothing: %s", path, exc)
        return None
    return spec


class Schedules:
    """The schedule items of one workspace, as a scheduler last read them."""

    def __init__(self) -> None:
        self.by_path: dict[str, Known] = {}

    def unknown(self, rows: list[tuple[str, int, str, float, str]]) -> bool:
        """Whether some row is a path this has never seen (its last fire must be read)."""
        return any(path not in self.by_path for path, *_rest in rows)

    def update(
        self, rows: list[tuple[str, int, str, float, str]], last_fires: dict[str, float]
    ) -> None:
        """Take the items as they are now: new versions parsed, deleted ones forgotten.

        `last_fires` has the last recorded fire of each path not seen before.
        """
        seen = set()
        for path, version, owner, updated_at, body in rows:
            seen.add(path)
            known = self.by_path.get(path)
            if known is not None and known.version == version:
                continue
            start = max(updated_at, known.cursor if known else last_fires.get(path, updated_at))
            fresh = Known(path, version, owner, updated_at, _parse(path, body), start)
            fresh.advance(start)
            self.by_path[path] = fresh
        for path in set(self.by_path) - seen:
            del self.by_path[path]

    def next_at(self) -> float | None:
        """The earliest next fire of any schedule."""
        times = [k.next_at for k in self.by_path.values() if k.next_at is not None]
        return min(times, default=None)
