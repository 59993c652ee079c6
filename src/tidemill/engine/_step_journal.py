"""An `ai_agent` step's journal as it is shown: each entry, and whether it was replayed.

A step's agent thread outlives the executions of the step: an execution
that pauses for a person's decision ends, and the one that goes on after
it reads the thread back; so does the execution that takes over a crashed
worker's claim, and a new attempt after a failure. Each entry is marked
`replayed` when it was written by an earlier execution than the latest
one, which read it from the journal instead of doing it again.

The rule, from what the store keeps: the step's latest job (the last
attempt's row; in a loop, of the latest iteration to run) has a
`started_at`, which every claim of it sets anew (a first claim, the claim
after a pause, a takeover of a lapsed lease). An entry is replayed iff it
was written strictly before that start. Until a queued job is claimed (a
new attempt waiting for a worker, or a job queued again after a decision),
the latest execution is the last one that started: the marks are those it
left, and move on once a worker claims the job.

Clocks: `started_at` is the claiming worker's clock; an entry's time is
the writing worker's clock on SQLite and the database server's (`now()`,
at the append's transaction) on PostgreSQL. Clocks that disagree by more
than the time between a claim and the execution's first append can mark
an entry on the wrong side (a worker whose clock runs ahead of the
database's marks its own first entries replayed). Entries of a delegated
specialist's thread are not the step's own and are not listed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tidemill.engine._journal import Journal, open_journal, thread_id
from tidemill.store import Store, Tx

__all__ = ["JournalEntry", "StepThread", "journal_entries", "read_step_journal"]


@dataclass(frozen=True, slots=True)
class JournalEntry:
    """One event of a step's agent journal.

    Attributes:
        seq: Its position in the thread (1, 2, ...).
        kind: The event's kind (`user_message`, `model_response`, `tool_started`, ...).
        at: When it was written, in seconds since the epoch.
        replayed: Written by an earlier execution of the step than the latest one.
        data: The event, as JSON (with its `kind`).
    """

    seq: int
    kind: str
    at: float
    replayed: bool
    data: dict[str, Any]


@dataclass(frozen=True, slots=True)
class StepThread:
    """Where a step's agent thread is, and when its latest execution started.

    Attributes:
        run_id: The run the step is in (the top-level run, a branch's, a loop's).
        started: When the latest execution that started began (None: none did).
    """

    run_id: str
    started: float | None


def _step_thread(tx: Tx, root_id: str, step_id: str) -> StepThread | None:
    jobs = [job for job in tx.tree_jobs(root_id) if job.step_id == step_id]
    if not jobs:
        return None
    owner = jobs[-1].run_id  # in a loop, the latest iteration to run
    starts = [job.started_at for job in jobs if job.run_id == owner and job.started_at is not None]
    return StepThread(owner, starts[-1] if starts else None)


async def read_step_journal(
    store: Store, root_id: str, step_id: str
) -> tuple[StepThread, Journal] | None:
    """Where the step's thread is, and the thread (None: the step has no job yet).

    `root_id` is the top-level run; a step inside a branch or a loop is found
    in it (the latest one to run, in a loop).
    """
    found: StepThread | None = await store.transact(lambda tx: _step_thread(tx, root_id, step_id))
    if found is None:
        return None
    async with open_journal(store.url) as checkpointer:
        journal = await Journal.read(checkpointer, thread_id(found.run_id, step_id))
    return found, journal


def journal_entries(where: StepThread, journal: Journal) -> list[JournalEntry]:
    """The journal's entries, oldest first, each marked replayed or not (see the module)."""
    start = where.started
    entries = []
    for record in journal.records:
        at = record.created_at.timestamp()
        entries.append(
            JournalEntry(
                seq=record.seq,
                kind=record.event.kind,
                at=at,
                replayed=start is not None and at < start,
                data=record.event.model_dump(mode="json"),
            )
        )
    return entries
