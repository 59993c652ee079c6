"""Checks of bounded journals (`max_history`) and of forks.

`COMPACTION_CHECKS` need a backend made with `max_history` (any value from
`MIN_HISTORY` up; the checks scale with it): a thread never holds more
records than that, folds to the same state as everything appended, keeps
its seqs and its optimistic concurrency across compaction. `check_fork`
runs on any backend.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime

from tidemill.agents.checkpoint._base import Checkpointer
from tidemill.agents.checkpoint._compact import BoundedCheckpointer
from tidemill.agents.checkpoint._fork import HistoryUnavailable, fork_thread
from tidemill.agents.checkpoint.conformance._harness import (
    assert_seqs,
    checked_append,
    checked_read,
    expect_conflict,
    new_prefix,
    short,
)
from tidemill.agents.journal import (
    ApprovalDecided,
    ApprovalRequested,
    GraphCheckpoint,
    GraphWrite,
    GraphWrites,
    JournalEvent,
    JournalRecord,
    ModelTurn,
    RunFinished,
    ThreadSnapshot,
    ThreadState,
    ToolFinished,
    UserInput,
)
from tidemill.errors import InvalidOption, JournalConflict
from tidemill.types import Decision, Message, ModelResponse, ToolCall, ToolResult, Usage

__all__ = [
    "check_compaction_big_append",
    "check_compaction_keeps_bound_and_state",
    "check_compaction_keeps_graph_events",
    "check_compaction_racing_appends_one_wins",
    "check_compaction_stale_after_conflicts",
    "check_fork",
    "check_fork_inside_compacted_prefix",
    "conversation",
]


def conversation(tag: str, runs: int) -> list[JournalEvent]:
    """`runs` agent runs of one thread: a prompt, a tool call (approved), its result, an answer.

    Examples:
        >>> [event.kind for event in conversation("x", 1)][:3]
        ['user_message', 'model_response', 'approval_requested']
    """
    events: list[JournalEvent] = []
    for run in range(runs):
        call = ToolCall(id=f"call-{tag}-{run}", name="lookup", arguments={"run": run})
        usage = Usage(requests=1, input_tokens=10 + run, output_tokens=3)
        events += [
            UserInput(messages=(Message.user(f"question {run} {tag}"),), run_id=f"run-{tag}-{run}"),
            ModelTurn(
                response=ModelResponse(
                    message=Message.assistant(f"looking {run}", tool_calls=(call,)), usage=usage
                )
            ),
            ApprovalRequested(calls=(call,)),
            ApprovalDecided(
                call_id=call.id,
                decision=Decision.approve(actor="ana"),
                decided_at=datetime(2026, 1, 1, 12, run % 60, tzinfo=UTC),
            ),
            ToolFinished(result=ToolResult(call_id=call.id, name="lookup", content=f"r{run}")),
            ModelTurn(
                response=ModelResponse(message=Message.assistant(f"answer {run}"), usage=usage)
            ),
            RunFinished(output=f"answer {run}"),
        ]
    return events


def _fold(thread_id: str, records: Iterable[tuple[int, JournalEvent]]) -> ThreadState:
    state = ThreadState(thread_id)
    for seq, event in records:
        state.apply(seq, event)
    return state


def _same_state(read: Sequence[JournalRecord], written: Sequence[JournalEvent], where: str) -> None:
    # `records` is the seq the fold reached: a fork's is 1, whatever it holds.
    got = _fold(where, ((r.seq, r.event) for r in read)).snapshot(records=0)
    want = _fold(where, enumerate(written, start=1)).snapshot(records=0)
    assert got == want, (
        f"{where}: the journal folds to {short(got)}, but what was appended folds to {short(want)}"
    )


def _bound(checkpointer: Checkpointer) -> int:
    bound = checkpointer.max_history if isinstance(checkpointer, BoundedCheckpointer) else None
    assert bound is not None, (
        f"{checkpointer!r} has no max_history: run COMPACTION_CHECKS on a backend made with one"
    )
    return bound


def _assert_bounded(records: Sequence[JournalRecord], bound: int, last: int, thread: str) -> None:
    assert len(records) <= bound, (
        f"thread {thread!r} holds {len(records)} records, more than max_history={bound}"
    )
    assert records, f"thread {thread!r} reads empty after appends"
    assert_seqs(records, records[0].seq, thread)
    assert records[-1].seq == last, (
        f"thread {thread!r} ends at seq {records[-1].seq}, expected {last}: "
        "compaction must not renumber records"
    )
    if records[0].seq > 1:
        assert isinstance(records[0].event, ThreadSnapshot), (
            f"thread {thread!r} starts at seq {records[0].seq} with a {records[0].event.kind!r} "
            "record, not the snapshot of what came before"
        )
    later = [r.seq for r in records[1:] if isinstance(r.event, ThreadSnapshot)]
    assert not later, f"thread {thread!r} has snapshots after its first record: {later}"


async def check_compaction_keeps_bound_and_state(checkpointer: Checkpointer) -> None:
    """A long thread never holds more than `max_history` records, and folds to the same state.

    Appends of 1 to 3 events, many times the bound; after each, the thread
    starts with a snapshot (once compacted), its seqs run without gaps to
    the last seq appended, and its fold equals the fold of every event.
    """
    bound = _bound(checkpointer)
    thread_id = new_prefix() + "long"
    events = conversation(thread_id, runs=bound)
    written: list[JournalEvent] = []
    sizes = [1, 2, 1, 3]
    while len(written) < len(events):
        batch = events[len(written) : len(written) + sizes[len(written) % len(sizes)]]
        await checked_append(checkpointer, thread_id, batch, after=len(written))
        written += batch
        records = await checked_read(checkpointer, thread_id)
        _assert_bounded(records, bound, len(written), thread_id)
        _same_state(records, written, f"thread {thread_id!r} after {len(written)} events")
    tail = await checked_read(checkpointer, thread_id, after=len(written) - 1)
    assert [r.seq for r in tail] == [len(written)], (
        f"read(after={len(written) - 1}) of a compacted thread returned seqs "
        f"{[r.seq for r in tail]}, expected [{len(written)}]"
    )


async def check_compaction_big_append(checkpointer: Checkpointer) -> None:
    """One append of many more events than `max_history` is stored compacted, whole."""
    bound = _bound(checkpointer)
    thread_id = new_prefix() + "batch"
    events = conversation(thread_id, runs=bound // 2 + 1)
    await checked_append(checkpointer, thread_id, events, after=0)
    records = await checked_read(checkpointer, thread_id)
    _assert_bounded(records, bound, len(events), thread_id)
    _same_state(records, events, f"thread {thread_id!r}")


async def check_compaction_stale_after_conflicts(checkpointer: Checkpointer) -> None:
    """A writer that read before a compaction conflicts; the journal stays whole.

    Its `after`, inside the compacted prefix or just before the compacting
    append, is a `JournalConflict`. A reader at such a seq gets the snapshot
    first. The up-to-date writer appends as usual.
    """
    bound = _bound(checkpointer)
    thread_id = new_prefix() + "stale"
    events = conversation(thread_id, runs=bound)
    start = events[:bound]
    await checked_append(checkpointer, thread_id, start, after=0)
    more = events[bound : bound + 2]
    await checked_append(checkpointer, thread_id, more, after=bound)
    records = await checked_read(checkpointer, thread_id)
    assert records[0].seq > 1, (
        f"thread {thread_id!r} holds {len(records)} records after passing max_history={bound}"
    )
    for stale in (1, records[0].seq - 1, records[0].seq, bound):
        await expect_conflict(checkpointer, thread_id, [RunFinished(output="stale")], after=stale)
    behind = await checked_read(checkpointer, thread_id, after=1)
    assert behind, f"read(after=1) of the compacted thread {thread_id!r} returned nothing"
    assert isinstance(behind[0].event, ThreadSnapshot), (
        f"read(after=1) of the compacted thread {thread_id!r} returned "
        f"{[r.event.kind for r in behind]}, not the snapshot first"
    )
    written = start + more
    _same_state(await checked_read(checkpointer, thread_id), written, f"thread {thread_id!r}")
    last = await checked_append(
        checkpointer, thread_id, events[bound + 2 : bound + 3], after=bound + 2
    )
    records = await checked_read(checkpointer, thread_id)
    _assert_bounded(records, bound, last, thread_id)
    _same_state(records, events[: bound + 3], f"thread {thread_id!r}")


async def check_compaction_racing_appends_one_wins(checkpointer: Checkpointer) -> None:
    """Of appends racing with the same `after` across a compaction, exactly one wins.

    The losers raise `JournalConflict`, and the thread folds to what was
    there plus the winner's events, within the bound.
    """
    bound = _bound(checkpointer)
    thread_id = new_prefix() + "race"
    base = conversation(thread_id, runs=bound)[:bound]
    await checked_append(checkpointer, thread_id, base, after=0)
    batches = [[RunFinished(output=f"w{i}"), RunFinished(output=i)] for i in range(8)]
    outcomes = await asyncio.gather(
        *(checkpointer.append(thread_id, batch, after=bound) for batch in batches),
        return_exceptions=True,
    )
    wins = [i for i, outcome in enumerate(outcomes) if not isinstance(outcome, BaseException)]
    others = [
        o for o in outcomes if isinstance(o, BaseException) and not isinstance(o, JournalConflict)
    ]
    assert not others, f"racing appends raised {[f'{type(o).__name__}: {o}' for o in others]}"
    assert len(wins) == 1, f"{len(wins)} of {len(outcomes)} racing appends succeeded; one must"
    records = await checked_read(checkpointer, thread_id)
    _assert_bounded(records, bound, bound + 2, thread_id)
    _same_state(records, [*base, *batches[wins[0]]], f"thread {thread_id!r}")


async def check_compaction_keeps_graph_events(checkpointer: Checkpointer) -> None:
    """LangGraph events of compacted records live on in the snapshot, in order."""
    bound = _bound(checkpointer)
    thread_id = new_prefix() + "graph"
    graph: list[JournalEvent] = []
    for i in range(bound + 1):
        graph.append(GraphCheckpoint(checkpoint_id=f"c{i:03}", checkpoint={"v": 4, "i": i}))
        graph.append(
            GraphWrites(
                checkpoint_id=f"c{i:03}",
                task_id=f"task{i}",
                writes=(GraphWrite(channel="messages", idx=0, value=[i]),),
            )
        )
    for seq, event in enumerate(graph):
        await checked_append(checkpointer, thread_id, [event], after=seq)
    records = await checked_read(checkpointer, thread_id)
    _assert_bounded(records, bound, len(graph), thread_id)
    first = records[0].event
    assert isinstance(first, ThreadSnapshot), f"thread {thread_id!r} was not compacted"
    kept = [*first.graph, *(r.event for r in records[1:])]
    assert kept == graph, (
        f"thread {thread_id!r} keeps {len(kept)} graph events across compaction, "
        f"expected all {len(graph)} in order"
    )


async def _refused(
    checkpointer: Checkpointer, thread_id: str, *, at: int, new_thread_id: str | None = None
) -> InvalidOption:
    """The error `fork_thread` refuses with; an `AssertionError` when it does not refuse."""
    try:
        fork = await fork_thread(checkpointer, thread_id, at=at, new_thread_id=new_thread_id)
    except InvalidOption as exc:
        return exc
    raise AssertionError(f"fork_thread({thread_id!r}, at={at}) was not refused; it made {fork!r}")


async def check_fork_inside_compacted_prefix(checkpointer: Checkpointer) -> None:
    """Forking at a compacted seq is `HistoryUnavailable`, naming what is left.

    Forking at the snapshot itself works, and holds the compacted state.
    """
    bound = _bound(checkpointer)
    thread_id = new_prefix() + "forked"
    events = conversation(thread_id, runs=bound)
    await checked_append(checkpointer, thread_id, events, after=0)
    records = await checked_read(checkpointer, thread_id)
    first = records[0].seq
    refused = await _refused(checkpointer, thread_id, at=1)
    assert isinstance(refused, HistoryUnavailable), f"forking at seq 1 raised {refused!r}"
    assert refused.available == (first, len(events)), (
        f"HistoryUnavailable says records {refused.available} are left, not {(first, len(events))}"
    )
    fork = await fork_thread(checkpointer, thread_id, at=first, new_thread_id=thread_id + "-fork")
    _same_state(await checked_read(checkpointer, fork), events[:first], f"fork {fork!r}")


async def check_fork(checkpointer: Checkpointer) -> None:
    """A fork holds its source's state as of the record it was forked at, and goes on alone.

    Forked at every record of a thread (paused ones included); appending to
    a fork leaves the source as it was. A seq that is not stored, a thread
    with no records and a new id already taken are typed errors.
    """
    prefix = new_prefix()
    source = prefix + "source"
    events = conversation(source, runs=2)
    await checked_append(checkpointer, source, events, after=0)
    for at in range(1, len(events) + 1):
        fork = await fork_thread(checkpointer, source, at=at, new_thread_id=f"{prefix}fork{at}")
        records = await checked_read(checkpointer, fork)
        kinds = [r.event.kind for r in records]
        assert kinds == ["snapshot"], f"fork {fork!r} holds {kinds}, not one snapshot"
        assert isinstance(records[0].event, ThreadSnapshot)
        snapshot = records[0].event
        assert (snapshot.forked_from, snapshot.forked_at) == (source, at), (
            f"fork {fork!r} says it came from {(snapshot.forked_from, snapshot.forked_at)}"
        )
        _same_state(records, events[:at], f"fork {fork!r} of {source!r} at {at}")
    await checked_append(checkpointer, f"{prefix}fork3", [RunFinished(output="fork only")], after=1)
    _same_state(await checked_read(checkpointer, source), events, f"source {source!r}")
    fresh = await fork_thread(checkpointer, source, at=2)
    assert fresh != source, f"a fork with no new_thread_id went to {fresh!r}"
    assert await checked_read(checkpointer, fresh), f"the fork {fresh!r} has no records"
    for bad in (0, len(events) + 1):
        refused = await _refused(checkpointer, source, at=bad)
        assert isinstance(refused, HistoryUnavailable), f"fork at {bad} raised {refused!r}"
        assert refused.available == (1, len(events)), f"fork at {bad} says {refused.available}"
    refused = await _refused(checkpointer, prefix + "nothing", at=1)
    assert isinstance(refused, HistoryUnavailable), f"forking nothing raised {refused!r}"
    assert refused.available is None, f"an empty thread says records {refused.available} are left"
    refused = await _refused(checkpointer, source, at=1, new_thread_id=f"{prefix}fork2")
    assert not isinstance(refused, HistoryUnavailable), f"forking onto a used id: {refused!r}"
    assert len(await checked_read(checkpointer, f"{prefix}fork2")) == 1, (
        "a refused fork wrote to the thread it was refused"
    )
