"""The conformance suite: what every `Checkpointer` backend must do.

Each check is an async function that takes a checkpointer, exercises one part
of the protocol and raises `AssertionError`, saying what went wrong, when the
backend does not conform. `validate` runs them all and returns the failure
messages, so a backend conforms when it returns an empty list. The suite
needs no test framework; a third-party backend can run it from its own tests:

    failures = await validate(MyCheckpointer(...))
    assert not failures, failures

Checks use thread ids that start with a random token, so several runs can
share one database, and only `check_prune` touches threads it did not
create: it removes every thread whose newest record is older than a fraction
of a second, so run the suite against a store that holds nothing you need.

Example:
    >>> import asyncio
    >>> from tidemill.agents.checkpoint import MemoryCheckpointer
    >>> asyncio.run(check_read_after_returns_tail(MemoryCheckpointer()))
"""

from __future__ import annotations

import asyncio
import math
import secrets
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC as _UTC
from datetime import datetime, timedelta, timezone
from typing import cast

from pydantic import JsonValue

from tidemill.agents.checkpoint._base import Checkpointer
from tidemill.agents.journal import (
    ApprovalDecided,
    ApprovalRequested,
    Correction,
    GraphCheckpoint,
    GraphWrite,
    GraphWrites,
    JournalEvent,
    JournalRecord,
    MemorySummarized,
    ModelTurn,
    OutputRejected,
    RunFailed,
    RunFinished,
    ToolFinished,
    ToolStarted,
    UserInput,
)
from tidemill.errors import JournalConflict, SerializationError
from tidemill.types import (
    Decision,
    ImageRef,
    Message,
    ModelResponse,
    Reasoning,
    ToolCall,
    ToolResult,
    Usage,
)

__all__ = [
    "CHECKS",
    "Check",
    "check_appends_from_os_threads",
    "check_concurrent_appends_one_wins",
    "check_created_at",
    "check_delete",
    "check_empty_append_stores_nothing",
    "check_event_kinds_round_trip",
    "check_json_numbers_round_trip",
    "check_large_payload_round_trip",
    "check_nul_character_round_trips",
    "check_os_thread_race_one_wins",
    "check_prune",
    "check_read_after_returns_tail",
    "check_seqs_contiguous",
    "check_stale_after_conflicts",
    "check_threads_sorted",
    "check_unencodable_event_is_rejected",
    "check_unicode_round_trip",
    "check_unknown_thread_reads_empty",
    "sample_events",
    "validate",
]

Check = Callable[[Checkpointer], Awaitable[None]]
"""A conformance check: raises `AssertionError` when the backend does not conform."""

_THREAD_TIMEOUT = 30.0
"""Seconds the OS-thread checks wait for their threads."""


# -- helpers -------------------------------------------------------------------


def _prefix() -> str:
    """A thread-id prefix no other run of the suite uses."""
    return f"conformance-{secrets.token_hex(6)}-"


def _marker(value: JsonValue) -> RunFinished:
    """A small event that says which writer wrote it."""
    return RunFinished(output=value)


async def _append(
    checkpointer: Checkpointer, thread_id: str, events: Sequence[JournalEvent], *, after: int
) -> int:
    """Append and check the returned seq, with a clear message on any error."""
    try:
        last = await checkpointer.append(thread_id, events, after=after)
    except Exception as exc:
        raise AssertionError(
            f"append({thread_id!r}, {len(events)} event(s), after={after}) raised "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    expected = after + len(events)
    assert last == expected, (
        f"append({thread_id!r}, {len(events)} event(s), after={after}) returned {last!r}, "
        f"expected the new last seq {expected}"
    )
    return last


async def _read(
    checkpointer: Checkpointer, thread_id: str, *, after: int = 0
) -> list[JournalRecord]:
    try:
        return await checkpointer.read(thread_id, after=after)
    except Exception as exc:
        raise AssertionError(
            f"read({thread_id!r}, after={after}) raised {type(exc).__name__}: {exc}"
        ) from exc


async def _threads(checkpointer: Checkpointer) -> list[str]:
    try:
        return await checkpointer.threads()
    except Exception as exc:
        raise AssertionError(f"threads() raised {type(exc).__name__}: {exc}") from exc


async def _expect_conflict(
    checkpointer: Checkpointer, thread_id: str, events: Sequence[JournalEvent], *, after: int
) -> None:
    """Assert that this append raises `JournalConflict`."""
    try:
        result = await checkpointer.append(thread_id, events, after=after)
    except JournalConflict:
        return
    except Exception as exc:
        raise AssertionError(
            f"append({thread_id!r}, after={after}) with a stale `after` raised "
            f"{type(exc).__name__}: {exc}; expected JournalConflict"
        ) from exc
    raise AssertionError(
        f"append({thread_id!r}, after={after}) with a stale `after` returned {result!r}; "
        "expected JournalConflict"
    )


def _assert_seqs(records: Sequence[JournalRecord], first: int, thread_id: str) -> None:
    seqs = [record.seq for record in records]
    expected = list(range(first, first + len(records)))
    assert seqs == expected, f"thread {thread_id!r} has seqs {seqs}, expected {expected}"


def _assert_events(
    records: Sequence[JournalRecord], events: Sequence[JournalEvent], thread_id: str
) -> None:
    """Assert that `records` hold exactly `events`, in order."""
    assert len(records) == len(events), (
        f"thread {thread_id!r} reads back {len(records)} record(s), expected {len(events)}"
    )
    for record, event in zip(records, events, strict=True):
        assert record.event == event, (
            f"entry {record.seq} of thread {thread_id!r} ({event.kind}) does not round-trip: "
            f"wrote {_short(event)}, read {_short(record.event)}"
        )


def _short(value: object, limit: int = 400) -> str:
    """`repr(value)`, cut to `limit` characters for messages."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def _same_json(left: JsonValue, right: JsonValue) -> bool:
    """Equal, and of the same JSON types all the way down (1.0 is not 1)."""
    if type(left) is not type(right):
        return False
    if isinstance(left, dict) and isinstance(right, dict):
        return left.keys() == right.keys() and all(_same_json(v, right[k]) for k, v in left.items())
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and all(map(_same_json, left, right))
    if isinstance(left, float) and isinstance(right, float):
        return left == right or (math.isnan(left) and math.isnan(right))
    return left == right


_Job = Callable[[Callable[[], None]], Awaitable[object]]
"""Work for one OS thread: given `start`, which it calls once ready to race."""


def _run_in_threads(jobs: Sequence[_Job]) -> list[object]:
    """Run each job on its own OS thread and event loop; return results or exceptions.

    Each job gets a `start` function to call once it is ready: it returns
    when every job has called it, so the jobs' appends begin together.
    """
    barrier = threading.Barrier(len(jobs))
    results: list[object] = [None] * len(jobs)
    started = [False] * len(jobs)

    def work(index: int) -> None:
        def start() -> None:
            barrier.wait(_THREAD_TIMEOUT)
            started[index] = True

        async def drive() -> object:
            return await jobs[index](start)

        try:
            results[index] = asyncio.run(drive())
        except BaseException as exc:  # reported to the check, which fails on it
            results[index] = exc
            if not started[index]:
                barrier.abort()  # the others would wait for this job forever

    threads = [
        threading.Thread(target=work, args=(i,), name=f"conformance-{i}", daemon=True)
        for i in range(len(jobs))
    ]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + _THREAD_TIMEOUT
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    stuck = [thread.name for thread in threads if thread.is_alive()]
    assert not stuck, f"OS threads {stuck} did not finish within {_THREAD_TIMEOUT} s"
    return results


def sample_events(tag: str = "") -> list[JournalEvent]:
    """One or more events of every journal kind, with every field set to something.

    Args:
        tag: Mixed into ids and texts, so different threads hold different events.

    Returns:
        The events, in a plausible order for a run.

    Example:
        >>> sorted({event.kind for event in sample_events()})[:3]
        ['approval_decided', 'approval_requested', 'correction']
    """
    search = ToolCall(
        id=f"call_{tag}search",
        name="search",
        arguments={"query": f"tides {tag}", "limit": 3, "near": {"lat": 51.5, "lon": -0.12}},
        signature="gemini-thought-signature==",
    )
    broken = ToolCall(id=f"call_{tag}broken", name="search", raw_arguments='{"query": "tid')
    pay = ToolCall(id=f"call_{tag}pay", name="pay", arguments={"amount": 12, "memo": None})
    response = ModelResponse(
        message=Message.assistant(
            f"Let me look that up. {tag}",
            tool_calls=(search, broken, pay),
            reasoning=(
                Reasoning(text="The user wants tides.", signature="sig-9f2", provider="anthropic"),
                Reasoning(redacted_data="b3BhcXVl", provider="anthropic", id="rs_1"),
            ),
            name="planner",
        ),
        usage=Usage(
            requests=1,
            input_tokens=1200,
            output_tokens=96,
            cache_read_tokens=1024,
            cache_write_tokens=128,
            reasoning_tokens=40,
        ),
        finish_reason="tool_calls",
        model="model-2024-05-01",
        provider="scripted",
        response_id=f"resp_{tag}",
    )
    found = ToolResult(call_id=search.id, name="search", content="3 results: 06:12, 18:40")
    failed = ToolResult(call_id=broken.id, name="search", content="Not JSON.", is_error=True)
    india = timezone(timedelta(hours=5, minutes=30))
    return [
        UserInput(
            messages=(
                Message.system("Answer briefly."),
                Message.user(
                    f"When is high tide? {tag}",
                    images=(
                        ImageRef(url="https://example.com/chart.png", media_type="image/png"),
                        ImageRef(url="data:image/gif;base64,R0lGODlhAQABAAAAACw=", detail="low"),
                    ),
                ),
                Message.tool(failed),
            ),
            run_id=f"run_{tag}",
        ),
        ModelTurn(response=response),
        ModelTurn(response=response, started=(search.id, pay.id)),
        Correction(error="The tool call could not be parsed.", feedback="Send one JSON object."),
        ToolStarted(call=search),
        ToolStarted(call=search, attempt=2),
        ToolFinished(result=found, duration_ms=12.5),
        ToolFinished(result=failed),
        ApprovalRequested(calls=(pay,)),
        ApprovalDecided(
            call_id=pay.id,
            decision=Decision.approve({"amount": 10, "memo": "edited"}, actor="ana@example.com"),
            decided_at=datetime(2024, 5, 17, 9, 30, 15, 123456, tzinfo=india),
        ),
        ApprovalDecided(
            call_id=pay.id,
            decision=Decision.reject("Not on a Friday.", actor="bo"),
            decided_at=datetime(2024, 5, 17, 4, 0, tzinfo=_UTC),
        ),
        RunFinished(
            output={
                "answer": "06:12",
                "confidence": 0.75,
                "tides": [{"at": "06:12", "height_m": 4.2}, {"at": "18:40", "height_m": 3.9}],
                "exact": True,
                "note": None,
                "count": 2,
            }
        ),
        RunFinished(output="plain text"),
        OutputRejected(errors=("population: Field required",), feedback="Reply again."),
        MemorySummarized(
            summary="The user asked about tides in Brest.", upto=4, usage=Usage(requests=1)
        ),
        RunFailed(reason="limit", limit="max_iterations", message="10 iteration(s) used"),
        RunFailed(reason="tool_call_retries", message="The tool raised ValueError: bad"),
        GraphCheckpoint(
            checkpoint_id=f"1ef1-{tag}0002",
            parent_id=f"1ef1-{tag}0001",
            checkpoint={
                "v": 4,
                "id": f"1ef1-{tag}0002",
                "ts": "2024-05-17T09:30:15.123456+00:00",
                "channel_versions": {
                    "messages": "00000002.5f1c",
                    "branch:to:agent": "00000002.a0b1",
                },
                "versions_seen": {"agent": {"branch:to:agent": "00000001.9e2d"}},
                "updated_channels": ["messages"],
                "channel_values": {
                    "messages": [{"$model": "Message", "data": {"role": "user", "content": tag}}],
                    "branch:to:agent": None,
                },
            },
            metadata={"source": "loop", "step": 1, "parents": {}, "score": 0.5},
        ),
        GraphWrites(
            checkpoint_ns=f"tools:{tag}",
            checkpoint_id=f"1ef1-{tag}0002",
            task_id=f"task-{tag}",
            task_path="~__pregel_pull, tools",
            writes=(
                GraphWrite(channel="messages", idx=0, value=[{"$tuple": ["a", 1, None]}]),
                GraphWrite(
                    channel="__interrupt__", idx=-3, value={"$serde": "msgpack", "data": "kQ=="}
                ),
            ),
        ),
    ]


# -- the checks ----------------------------------------------------------------


async def check_event_kinds_round_trip(checkpointer: Checkpointer) -> None:
    """Every kind of journal event reads back equal to what was appended.

    The events carry tool calls, reasoning with signatures, images, usage,
    decisions with timezone-aware datetimes and JSON outputs. They are
    appended once as one batch and once one at a time.
    """
    prefix = _prefix()
    events = sample_events(prefix)
    batch, single = prefix + "batch", prefix + "single"
    await _append(checkpointer, batch, events, after=0)
    for seq, event in enumerate(events):
        await _append(checkpointer, single, [event], after=seq)
    for thread_id in (batch, single):
        records = await _read(checkpointer, thread_id)
        _assert_seqs(records, 1, thread_id)
        _assert_events(records, events, thread_id)
        for record, event in zip(records, events, strict=True):
            assert type(record.event) is type(event), (
                f"entry {record.seq} of {thread_id!r} reads back as "
                f"{type(record.event).__name__}, expected {type(event).__name__}"
            )


async def check_seqs_contiguous(checkpointer: Checkpointer) -> None:
    """Seqs start at 1 and go up by one per event, across batches of any size.

    Each append returns the new last seq, and threads number their entries
    independently of each other.
    """
    prefix = _prefix()
    first, second = prefix + "a", prefix + "b"
    last = 0
    for size in (1, 3, 1, 5, 2):
        batch = [_marker(f"{last + i}") for i in range(1, size + 1)]
        last = await _append(checkpointer, first, batch, after=last)
        if last == 1:
            await _append(checkpointer, second, [_marker("other")], after=0)
    records = await _read(checkpointer, first)
    _assert_seqs(records, 1, first)
    assert len(records) == last == 12, f"thread {first!r} holds {len(records)} records, expected 12"
    outputs = [record.event.output for record in records if isinstance(record.event, RunFinished)]
    assert outputs == [str(seq) for seq in range(1, 13)], (
        f"thread {first!r} holds its events out of order: {outputs}"
    )
    others = await _read(checkpointer, second)
    _assert_seqs(others, 1, second)
    assert len(others) == 1, f"thread {second!r} holds {len(others)} records, expected 1"


async def check_stale_after_conflicts(checkpointer: Checkpointer) -> None:
    """An append whose `after` is not the last seq raises `JournalConflict`, storing nothing.

    Covers `after` too small, too large, 0 on an existing thread, and
    non-zero on a thread that does not exist.
    """
    prefix = _prefix()
    thread_id, missing = prefix + "t", prefix + "missing"
    events = [_marker(i) for i in range(3)]
    await _append(checkpointer, thread_id, events, after=0)
    for stale in (0, 1, 2, 4, 10):
        await _expect_conflict(
            checkpointer, thread_id, [_marker("stale"), _marker("x")], after=stale
        )
    records = await _read(checkpointer, thread_id)
    _assert_seqs(records, 1, thread_id)
    _assert_events(records, events, thread_id)
    for stale in (1, 5):
        await _expect_conflict(checkpointer, missing, [_marker("stale")], after=stale)
    assert await _read(checkpointer, missing) == [], (
        f"a conflicting append to the new thread {missing!r} stored records"
    )
    assert missing not in await _threads(checkpointer), (
        f"a conflicting append to the new thread {missing!r} made it appear in threads()"
    )
    await _append(checkpointer, thread_id, [_marker("next")], after=3)


async def check_read_after_returns_tail(checkpointer: Checkpointer) -> None:
    """`read(after=k)` returns exactly the records with seq greater than `k`."""
    thread_id = _prefix() + "tail"
    events = [_marker(i) for i in range(1, 6)]
    await _append(checkpointer, thread_id, events, after=0)
    for after in range(7):
        records = await _read(checkpointer, thread_id, after=after)
        expected = events[after:]
        _assert_seqs(records, after + 1, thread_id)
        assert [r.event for r in records] == expected, (
            f"read({thread_id!r}, after={after}) returned seqs {[r.seq for r in records]}, "
            f"expected {list(range(after + 1, 6))}"
        )


async def check_unknown_thread_reads_empty(checkpointer: Checkpointer) -> None:
    """A thread that was never appended to reads as `[]`, at any `after`."""
    thread_id = _prefix() + "never-written"
    for after in (0, 3):
        records = await _read(checkpointer, thread_id, after=after)
        assert records == [], f"read of the unknown thread {thread_id!r} returned {records!r}"
    assert thread_id not in await _threads(checkpointer), (
        f"reading the unknown thread {thread_id!r} made it appear in threads()"
    )


async def check_threads_sorted(checkpointer: Checkpointer) -> None:
    """`threads()` lists every thread with records once, sorted as Python sorts strings.

    The ids mix cases, digits, punctuation and non-ASCII letters, so a
    database that sorts by a locale's collation instead of by code point
    fails.
    """
    prefix = _prefix()
    suffixes = ["b", "B", "a", "A", "_z", "10", "9", "é", "Z", "a b", "ab", "~"]
    ids = [prefix + suffix for suffix in suffixes]
    for thread_id in ids:
        await _append(checkpointer, thread_id, [_marker(thread_id)], after=0)
    listed = await _threads(checkpointer)
    duplicates = sorted({t for t in listed if listed.count(t) > 1})
    assert not duplicates, f"threads() lists these ids more than once: {duplicates}"
    assert listed == sorted(listed), (
        f"threads() is not sorted by code point: {[t for t in listed if t.startswith(prefix)]}"
    )
    ours = [thread_id for thread_id in listed if thread_id.startswith(prefix)]
    assert ours == sorted(ids), f"threads() lists {ours}, expected {sorted(ids)}"


async def check_delete(checkpointer: Checkpointer) -> None:
    """`delete` removes one whole thread, returns True then False, and leaves others alone.

    A deleted thread reads as `[]`, is gone from `threads()` and starts again
    at seq 1.
    """
    prefix = _prefix()
    doomed, kept = prefix + "doomed", prefix + "kept"
    await _append(checkpointer, doomed, [_marker(i) for i in range(3)], after=0)
    kept_events = [_marker("kept"), _marker("still")]
    await _append(checkpointer, kept, kept_events, after=0)
    first = await checkpointer.delete(doomed)
    assert first is True, f"delete({doomed!r}) of an existing thread returned {first!r}, not True"
    second = await checkpointer.delete(doomed)
    assert second is False, f"a second delete({doomed!r}) returned {second!r}, not False"
    missing = await checkpointer.delete(prefix + "never-written")
    assert missing is False, f"delete of a thread that never existed returned {missing!r}"
    assert await _read(checkpointer, doomed) == [], f"deleted thread {doomed!r} still has records"
    listed = await _threads(checkpointer)
    assert doomed not in listed, f"deleted thread {doomed!r} is still listed by threads()"
    assert kept in listed, f"delete({doomed!r}) also removed {kept!r} from threads()"
    _assert_events(await _read(checkpointer, kept), kept_events, kept)
    await _append(checkpointer, doomed, [_marker("again")], after=0)
    _assert_seqs(await _read(checkpointer, doomed), 1, doomed)


async def check_prune(checkpointer: Checkpointer) -> None:
    """`prune` removes exactly the threads whose newest record is older than the limit.

    A thread whose first record is old but whose last is new stays, and the
    count returned is the number of threads removed.
    """
    prefix = _prefix()
    old, mixed, new = prefix + "old", prefix + "mixed", prefix + "new"
    await _append(checkpointer, old, [_marker("old"), _marker("older")], after=0)
    await _append(checkpointer, mixed, [_marker("old")], after=0)
    await asyncio.sleep(1.0)
    await _append(checkpointer, mixed, [_marker("new")], after=1)
    await _append(checkpointer, new, [_marker("new")], after=0)
    kept = await checkpointer.prune(older_than=timedelta(days=1))
    ours = {old, mixed, new}
    listed = set(await _threads(checkpointer))
    assert ours <= listed, (
        f"prune(older_than=1 day) removed threads written a second ago: {sorted(ours - listed)} "
        f"(it returned {kept})"
    )
    before = set(await _threads(checkpointer))
    removed = await checkpointer.prune(older_than=timedelta(seconds=0.5))
    after = set(await _threads(checkpointer))
    assert old not in after, f"prune(older_than=0.5 s) kept {old!r}, last written 1 s before"
    assert await _read(checkpointer, old) == [], f"pruned thread {old!r} still has records"
    assert mixed in after, f"prune removed {mixed!r}, whose newest record is new"
    assert new in after, f"prune removed {new!r}, written just before"
    assert len(await _read(checkpointer, mixed)) == 2, f"prune removed records of {mixed!r}"
    assert removed == len(before - after), (
        f"prune returned {removed!r} but removed {len(before - after)} thread(s)"
    )


async def check_concurrent_appends_one_wins(checkpointer: Checkpointer) -> None:
    """Of several appends racing with the same `after` on one event loop, exactly one wins.

    The others raise `JournalConflict`, and only the winner's events are stored.
    Tried on a new thread (`after=0`) and on an existing one.
    """
    prefix = _prefix()
    for thread_id, after in ((prefix + "new", 0), (prefix + "existing", 2)):
        if after:
            await _append(checkpointer, thread_id, [_marker("a"), _marker("b")], after=0)
        writers = 8
        outcomes = await asyncio.gather(
            *(
                checkpointer.append(thread_id, [_marker(f"w{i}"), _marker(i)], after=after)
                for i in range(writers)
            ),
            return_exceptions=True,
        )
        _assert_one_winner(outcomes, thread_id, after + 2)
        records = await _read(checkpointer, thread_id)
        _assert_seqs(records, 1, thread_id)
        assert len(records) == after + 2, (
            f"{writers} racing appends of 2 events left {len(records)} records in {thread_id!r}, "
            f"expected {after + 2}"
        )
        winner = next(i for i, outcome in enumerate(outcomes) if not isinstance(outcome, Exception))
        tail = [r.event for r in records[after:]]
        assert tail == [_marker(f"w{winner}"), _marker(winner)], (
            f"thread {thread_id!r} holds {tail!r}, not the events of the winning append"
        )


def _assert_one_winner(outcomes: Sequence[object], thread_id: str, last: int) -> None:
    wins = [outcome for outcome in outcomes if not isinstance(outcome, BaseException)]
    others = [
        outcome
        for outcome in outcomes
        if isinstance(outcome, BaseException) and not isinstance(outcome, JournalConflict)
    ]
    assert not others, (
        f"racing appends to {thread_id!r} raised {[f'{type(e).__name__}: {e}' for e in others]}; "
        "losers must raise JournalConflict"
    )
    assert len(wins) == 1, (
        f"{len(wins)} of {len(outcomes)} racing appends to {thread_id!r} succeeded; "
        "exactly one must"
    )
    assert wins[0] == last, f"the winning append returned {wins[0]!r}, expected {last}"


async def check_appends_from_os_threads(checkpointer: Checkpointer) -> None:
    """Appends from several OS threads, each with its own event loop, all land.

    Each thread appends to its own journal, one event at a time and then a
    batch, all at the same moment as the others.
    """
    prefix = _prefix()
    workers, each = 6, 5

    def job(index: int) -> _Job:
        async def append_all(start: Callable[[], None]) -> object:
            thread_id = f"{prefix}{index}"
            await checkpointer.read(thread_id)  # open connections before the start
            start()
            for seq in range(each):
                await checkpointer.append(thread_id, [_marker(f"{index}.{seq}")], after=seq)
            return await checkpointer.append(
                thread_id, [_marker(f"{index}.x"), _marker(f"{index}.y")], after=each
            )

        return append_all

    results = await asyncio.to_thread(_run_in_threads, [job(i) for i in range(workers)])
    errors = [f"{type(r).__name__}: {r}" for r in results if isinstance(r, BaseException)]
    assert not errors, f"appends from OS threads failed: {errors}"
    for index in range(workers):
        thread_id = f"{prefix}{index}"
        records = await _read(checkpointer, thread_id)
        expected = [_marker(f"{index}.{seq}") for seq in range(each)]
        expected += [_marker(f"{index}.x"), _marker(f"{index}.y")]
        _assert_seqs(records, 1, thread_id)
        _assert_events(records, expected, thread_id)


async def check_os_thread_race_one_wins(checkpointer: Checkpointer) -> None:
    """Of appends racing from several OS threads on one thread, exactly one wins.

    Each OS thread runs its own event loop, as separate workers do, and all
    append with the same `after`.
    """
    prefix = _prefix()
    for thread_id, after in ((prefix + "new", 0), (prefix + "existing", 1)):
        if after:
            await _append(checkpointer, thread_id, [_marker("first")], after=0)

        def job(index: int, thread_id: str = thread_id, after: int = after) -> _Job:
            async def race(start: Callable[[], None]) -> object:
                await checkpointer.read(thread_id)
                start()
                return await checkpointer.append(
                    thread_id, [_marker(f"w{index}"), _marker(index)], after=after
                )

            return race

        outcomes = await asyncio.to_thread(_run_in_threads, [job(i) for i in range(6)])
        _assert_one_winner(outcomes, thread_id, after + 2)
        records = await _read(checkpointer, thread_id)
        _assert_seqs(records, 1, thread_id)
        assert len(records) == after + 2, (
            f"racing appends from OS threads left {len(records)} records in {thread_id!r}, "
            f"expected {after + 2}"
        )


async def check_unicode_round_trip(checkpointer: Checkpointer) -> None:
    """Non-ASCII text round-trips exactly, in events and in thread ids.

    Covers accents, CJK, right-to-left text, combining marks, emoji outside
    the Basic Multilingual Plane, line separators, quotes and backslashes,
    and thread ids with quotes, `%`, `_` and spaces.
    """
    prefix = _prefix()
    texts = [
        "héllo wörld — ça va? ñ",
        "潮の満ち引き 밀물 과 썰물",
        "مرحبا بالعالم עולם",
        "e\u0301 a\u0308 \u0915\u094d\u0937",
        "🌊🌕 👩\u200d💻 \U0001f9ea \U0010fffd",
        "line\u2028separator\u2029para\r\nCRLF\ttab \x01\x1f\x7f",
        "quotes ' \" ` backslash \\ \\u0041 {} [] <tag> &amp; %s %(x)s ?",
    ]
    event = UserInput(messages=tuple(Message.user(text) for text in texts), run_id="ünïcode")
    call = ToolCall(id="call_ü", name="wörterbuch", arguments={"schlüssel": texts[4]})
    events: list[JournalEvent] = [
        event,
        ToolStarted(call=call),
        ToolFinished(result=ToolResult(call_id="call_ü", name="wörterbuch", content=texts[1])),
        RunFinished(output={text: text for text in texts}),
    ]
    for suffix in ("ünï-çødé 🌊", 'it\'s "quoted"', "100% _under_ score", "back\\slash; --"):
        thread_id = prefix + suffix
        await _append(checkpointer, thread_id, events, after=0)
        _assert_events(await _read(checkpointer, thread_id), events, thread_id)
        assert thread_id in await _threads(checkpointer), (
            f"threads() does not list the thread {thread_id!r}"
        )


async def check_nul_character_round_trips(checkpointer: Checkpointer) -> None:
    """Text holding a NUL character (U+0000) round-trips, as any JSON string does.

    Tools can return such text (a binary file read as text, a C string),
    and JSON strings carry it as an escape.
    """
    thread_id = _prefix() + "nul"
    events: list[JournalEvent] = [
        ToolFinished(
            result=ToolResult(call_id="c1", name="read_file", content="PK\x03\x04\x00\x00")
        ),
        RunFinished(output={"text": "before\x00after"}),
    ]
    try:
        await checkpointer.append(thread_id, events, after=0)
    except Exception as exc:
        raise AssertionError(
            f"appending text with a NUL character raised {type(exc).__name__}: {exc}"
        ) from exc
    _assert_events(await _read(checkpointer, thread_id), events, thread_id)


async def check_json_numbers_round_trip(checkpointer: Checkpointer) -> None:
    """JSON numbers keep their type and value: floats stay floats, big ints stay exact."""
    thread_id = _prefix() + "numbers"
    output: dict[str, JsonValue] = {
        "tenth": 0.1,
        "one": 1.0,
        "third": 1 / 3,
        "huge": 1.5e300,
        "e16": 1e16,
        "tiny": 2.5e-300,
        "int": 42,
        "big_int": 2**63 + 7,
        "negative_big": -(2**70),
        "list": [1, 1.0, -0.5, 12345678901234567890],
    }
    await _append(checkpointer, thread_id, [RunFinished(output=output)], after=0)
    (record,) = await _read(checkpointer, thread_id)
    assert isinstance(record.event, RunFinished), f"read back a {record.event.kind} event"
    back = record.event.output
    assert isinstance(back, dict), f"the output read back as {type(back).__name__}, not a dict"
    changed = {
        key: f"{value!r} -> {back.get(key)!r}"
        for key, value in output.items()
        if not _same_json(value, back.get(key))
    }
    assert not changed, f"JSON numbers changed type or value on the way back: {changed}"


async def check_large_payload_round_trip(checkpointer: Checkpointer) -> None:
    """An event of about 1 MB round-trips intact."""
    thread_id = _prefix() + "large"
    content = ("tidemill ☃ 潮 " * 80_000)[:1_000_000]
    events: list[JournalEvent] = [
        ToolFinished(result=ToolResult(call_id="big", name="dump", content=content)),
        RunFinished(output="after the big one"),
    ]
    await _append(checkpointer, thread_id, events, after=0)
    records = await _read(checkpointer, thread_id)
    assert len(records) == 2, f"the large append left {len(records)} records, expected 2"
    first = records[0].event
    assert isinstance(first, ToolFinished), f"entry 1 reads back as {first.kind}"
    assert len(first.result.content) == len(content), (
        f"the 1 MB content reads back with {len(first.result.content)} characters, "
        f"expected {len(content)}"
    )
    _assert_events(records, events, thread_id)


async def check_created_at(checkpointer: Checkpointer) -> None:
    """`created_at` is timezone-aware, close to now, and never decreases along a thread."""
    thread_id = _prefix() + "clock"
    started = datetime.now(_UTC)
    last = 0
    for size in (1, 3, 1):
        last = await _append(checkpointer, thread_id, [_marker(i) for i in range(size)], after=last)
        await asyncio.sleep(0.02)
    records = await _read(checkpointer, thread_id)
    assert len(records) == last, f"thread {thread_id!r} holds {len(records)} records"
    for record in records:
        stamp = record.created_at
        assert isinstance(stamp, datetime), (
            f"entry {record.seq}'s created_at is a {type(stamp).__name__}, not a datetime"
        )
        naive = f"entry {record.seq}'s created_at {stamp!r} is naive; it must be timezone-aware"
        assert stamp.tzinfo is not None, naive
        assert stamp.utcoffset() is not None, naive
        drift = abs((stamp - started).total_seconds())
        assert drift < 600, (
            f"entry {record.seq}'s created_at {stamp.isoformat()} is {drift:.0f} s from now "
            f"({started.isoformat()}); is it stored in the wrong timezone?"
        )
    stamps = [record.created_at for record in records]
    backwards = [
        (records[i].seq, records[i + 1].seq)
        for i in range(len(stamps) - 1)
        if stamps[i + 1] < stamps[i]
    ]
    assert not backwards, f"created_at decreases between entries {backwards} of {thread_id!r}"


async def check_empty_append_stores_nothing(checkpointer: Checkpointer) -> None:
    """Appending no events returns `after` and stores nothing.

    On a new thread it does not create the thread: the thread still reads
    as `[]` and is not listed by `threads()`.
    """
    prefix = _prefix()
    fresh, existing = prefix + "fresh", prefix + "existing"
    result = await checkpointer.append(fresh, [], after=0)
    assert result == 0, f"an empty append to a new thread returned {result!r}, expected 0"
    assert await _read(checkpointer, fresh) == [], "an empty append stored records"
    listed = await _threads(checkpointer)
    assert fresh not in listed, (
        f"an empty append made {fresh!r} appear in threads(), though it has no records"
    )
    await _append(checkpointer, existing, [_marker(1), _marker(2)], after=0)
    result = await checkpointer.append(existing, [], after=2)
    assert result == 2, f"an empty append after entry 2 returned {result!r}, expected 2"
    assert len(await _read(checkpointer, existing)) == 2, "an empty append stored records"
    await _append(checkpointer, existing, [_marker(3)], after=2)


async def check_unencodable_event_is_rejected(checkpointer: Checkpointer) -> None:
    """A batch holding an event that is not JSON raises `SerializationError`, storing nothing.

    Appends are all or nothing, and a backend must not accept what a durable
    one could not store, or a run that works in tests fails in production.
    """
    thread_id = _prefix() + "unencodable"
    good = _marker("fine")
    bad = RunFinished.model_construct(output=cast(JsonValue, {"when": object()}))
    await _append(checkpointer, thread_id, [good], after=0)
    try:
        result = await checkpointer.append(thread_id, [_marker("also fine"), bad], after=1)
    except SerializationError:
        pass
    except Exception as exc:
        raise AssertionError(
            f"appending an event that is not JSON raised {type(exc).__name__}: {exc}; "
            "expected SerializationError"
        ) from exc
    else:
        raise AssertionError(
            f"appending an event that is not JSON returned {result!r}; expected SerializationError"
        )
    records = await _read(checkpointer, thread_id)
    assert [r.event for r in records] == [good], (
        f"a failed batch left {len(records) - 1} of its events in {thread_id!r}"
    )


CHECKS: list[Check] = [
    check_event_kinds_round_trip,
    check_seqs_contiguous,
    check_stale_after_conflicts,
    check_read_after_returns_tail,
    check_unknown_thread_reads_empty,
    check_threads_sorted,
    check_delete,
    check_prune,
    check_concurrent_appends_one_wins,
    check_appends_from_os_threads,
    check_os_thread_race_one_wins,
    check_unicode_round_trip,
    check_nul_character_round_trips,
    check_json_numbers_round_trip,
    check_large_payload_round_trip,
    check_created_at,
    check_empty_append_stores_nothing,
    check_unencodable_event_is_rejected,
]
"""Every check, in the order `validate` runs them."""


async def validate(
    checkpointer: Checkpointer, *, checks: Sequence[Check] = CHECKS, time_limit: float = 120.0
) -> list[str]:
    """Run the conformance checks against a checkpointer.

    Args:
        checkpointer: The backend to check. Checks add threads to it, and
            `check_prune` removes old ones: use a store that holds nothing
            you need.
        checks: The checks to run; all of them by default.
        time_limit: Seconds each check may take.

    Returns:
        One message per failing check, `"check_name: what went wrong"`; an
        empty list when the backend conforms.

    Example:
        >>> import asyncio
        >>> from tidemill.agents.checkpoint import SQLiteCheckpointer
        >>> asyncio.run(validate(SQLiteCheckpointer(":memory:")))
        []
    """
    failures: list[str] = []
    for check in checks:
        name = getattr(check, "__name__", repr(check))
        try:
            await asyncio.wait_for(check(checkpointer), time_limit)
        except AssertionError as exc:
            failures.append(f"{name}: {exc}")
        except TimeoutError:
            failures.append(f"{name}: did not finish within {time_limit} s")
        except Exception as exc:
            failures.append(f"{name}: raised {type(exc).__name__}: {exc}")
    return failures
