"""The store's rows as plain objects: a run, a job, an approval, a log line."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

__all__ = ["ACTIVE_RUN", "FINISHED_RUN", "ApprovalRow", "JobRow", "LogRow", "MemoryRow", "RunRow"]

FINISHED_RUN = frozenset({"succeeded", "failed", "cancelled"})
"""Run statuses that never change again (except `failed`, by a retry)."""

ACTIVE_RUN = frozenset({"running", "waiting"})
"""Run statuses that hold a concurrency slot."""


def _json(text: str | None) -> Any:
    return None if text is None else json.loads(text)


@dataclass(slots=True)
class RunRow:
    """A run: a flow (or a body of one, for branches and loops) being executed.

    A top-level run has no parent. A child run executes one body of a
    container step (a branch, a parallel branch, a loop iteration, a
    sub-flow) of its parent; `scope` says which, as a JSON list of
    `[step_id, part]` pairs from the top of the definition.
    """

    id: str
    root_id: str
    parent_id: str | None
    parent_job: int | None
    child_index: int | None
    scope: str
    flow_name: str
    digest: str
    status: str
    concurrency_key: str | None
    created_at: float
    started_at: float | None
    finished_at: float | None
    error: dict[str, Any] | None
    run_as: str | None = None
    """Who the run runs as: its `$var:`/`$res:` references are resolved as this
    workspace user. None: no one (a run with references then fails them).
    Child runs have their root's."""
    source: dict[str, Any] | None = None
    """What it ran, when started from a workspace path (`RunPlan.source`):
    `workspace`, `path`, `version`, `draft`, `items`. Child runs have their root's."""
    memory_id: str | None = None
    """The run's memory id, as stored (a UUID; `submit(memory_id=...)`), or None.
    Child runs have their root's."""
    masked: bool = False
    """A step of the run (or of a run under it) returned a secret it resolved: the
    run's result is shown from its masked copy (`Tx.shown_result`)."""

    COLUMNS = (
        "id, root_id, parent_id, parent_job, child_index, scope, flow_name, digest, status, "
        "concurrency_key, created_at, started_at, finished_at, error, run_as, source, memory_id, "
        "masked"
    )

    @classmethod
    def of(cls, row: tuple[Any, ...]) -> RunRow:
        """Build from a row selected with `COLUMNS`."""
        (id_, root, parent, job, index, scope, name, digest, status, key, *rest) = row
        created, started, finished, error, run_as, source, memory_id, masked = rest
        return cls(
            id_,
            root,
            parent,
            job,
            index,
            scope,
            name,
            digest,
            status,
            key,
            created,
            started,
            finished,
            _json(error),
            run_as,
            _json(source),
            memory_id,
            bool(masked),
        )


@dataclass(slots=True)
class JobRow:
    """One attempt of one step of a run: the unit workers claim.

    `epoch` counts claims: each claim (a reclaim after a lost lease too)
    increments it, and every write a worker makes names the epoch it
    claimed, so a worker presumed dead cannot overwrite its successor.
    """

    id: int
    run_id: str
    step_id: str
    attempt: int
    status: str
    run_at: float
    worker: str | None
    lease_until: float | None
    epoch: int
    created_at: float
    started_at: float | None
    finished_at: float | None
    error: dict[str, Any] | None

    COLUMNS = (
        "id, run_id, step_id, attempt, status, run_at, worker, lease_until, epoch, "
        "created_at, started_at, finished_at, error"
    )

    @classmethod
    def of(cls, row: tuple[Any, ...]) -> JobRow:
        """Build from a row selected with `COLUMNS`."""
        (id_, run_id, step_id, attempt, status, run_at, worker, lease, epoch, *times, error) = row
        created, started, finished = times
        return cls(
            id_,
            run_id,
            step_id,
            attempt,
            status,
            run_at,
            worker,
            lease,
            epoch,
            created,
            started,
            finished,
            _json(error),
        )


@dataclass(slots=True)
class ApprovalRow:
    """A person's decision that an approval step waits for."""

    id: str
    run_id: str
    root_id: str
    job_id: int
    step_id: str
    message: str
    approvers: list[str]
    on_timeout: str
    status: str
    created_at: float
    expires_at: float | None
    decided_at: float | None
    decided_by: str | None
    comment: str | None
    kind: str = "step"
    """`step` (an approval step), or what paused an agent step: `tool_call`, ..."""
    details: dict[str, Any] | None = None
    """What the pause is about, for kinds other than `step` (JSON)."""

    COLUMNS = (
        "id, run_id, root_id, job_id, step_id, message, approvers, on_timeout, status, "
        "created_at, expires_at, decided_at, decided_by, comment, kind, details"
    )

    @classmethod
    def of(cls, row: tuple[Any, ...]) -> ApprovalRow:
        """Build from a row selected with `COLUMNS`."""
        (id_, run_id, root_id, job_id, step_id, message, approvers, on_timeout, status) = row[:9]
        (created, expires, decided_at, decided_by, comment, kind, details) = row[9:]
        return cls(
            id_, run_id, root_id, job_id, step_id, message, json.loads(approvers), on_timeout,
            status, created, expires, decided_at, decided_by, comment, kind, _json(details),
        )  # fmt: skip


@dataclass(slots=True)
class LogRow:
    """What a step printed: one chunk of its stdout or stderr."""

    run_id: str
    job_id: int
    stream: str
    body: str
    at: float
    id: int = 0
    """The chunk's place among a store's logs: later chunks have larger ids."""


@dataclass(frozen=True, slots=True)
class MemoryRow:
    """One stored agent memory: a (memory id, step id) pair and what it holds."""

    memory_id: str
    step_key: str
    messages: int
    """How many messages it holds."""
    updated_at: float
    """When its newest message was written."""
