"""`RunInfo`: a run as callers see it, read from its row."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tidemill.store import RunRow, Tx

__all__ = ["RunInfo", "run_info"]


@dataclass(frozen=True, slots=True)
class RunInfo:
    """A run as it stands when read."""

    id: str
    """The run's id."""
    flow: str
    """The flow's name."""
    status: str
    """`queued`, `running`, `waiting`, `succeeded`, `failed` or `cancelled`.

    `queued`: no worker has taken any of its steps yet, or it waits for a
    slot under its flow's concurrency limit; `waiting`: only people's
    decisions are left."""
    result: Any
    """The flow's result once it succeeded."""
    error: dict[str, Any] | None
    """For a failed run: the failed `step`, the error's `type` and `message`.

    A script's error also has its `traceback`."""
    created_at: float
    """When it was submitted (seconds since the epoch)."""
    finished_at: float | None
    """When it ended, if it has."""
    run_as: str | None = None
    """The workspace user its `$var:`/`$res:` references are resolved as; None: no one."""
    source: dict[str, Any] | None = None
    """What it ran, for a run of a workspace path (`AsyncEngine.submit_path`):
    `workspace`, `path`, `version` (0 for a draft), `draft`, and `items`, the
    version of each workspace script and flow it included."""
    memory_id: str | None = None
    """Its memory id as stored (a UUID), when it was submitted with one."""
    shown_result: Any = None
    """The result as the API shows it: `result`, with each secret masked that a
    step resolved and returned (the steps after it, and `wait`, get the real one)."""

    @property
    def done(self) -> bool:
        """True once the run succeeded, failed or was cancelled."""
        return self.status in ("succeeded", "failed", "cancelled")


def run_info(tx: Tx, run: RunRow, status: str | None = None) -> RunInfo:
    """A run as `RunInfo`; `status` is its status as shown, when already read."""
    if status is None:
        status = tx.shown_status(run.id) or run.status
    result = tx.payload(run.id, "result") if status == "succeeded" else None
    shown = tx.shown_result(run.id, result) if run.masked and status == "succeeded" else result
    return RunInfo(
        run.id, run.flow_name, status, result, run.error, run.created_at, run.finished_at,
        run.run_as, run.source, run.memory_id, shown,
    )  # fmt: skip
