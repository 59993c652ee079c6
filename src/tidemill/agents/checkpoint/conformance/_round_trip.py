"""Checks that what is appended reads back exactly: every event kind, text and numbers.

Unicode and NUL characters, JSON numbers of every size, a large payload,
and an event that is not JSON, which must be refused without storing anything.
"""

from __future__ import annotations

import math
from typing import cast

from pydantic import JsonValue

from tidemill.agents.checkpoint._base import Checkpointer
from tidemill.agents.checkpoint.conformance._harness import (
    assert_events,
    assert_seqs,
    checked_append,
    checked_read,
    checked_threads,
    marker,
    new_prefix,
)
from tidemill.agents.checkpoint.conformance._samples import sample_events
from tidemill.agents.journal import JournalEvent, RunFinished, ToolFinished, ToolStarted, UserInput
from tidemill.errors import SerializationError
from tidemill.types import Message, ToolCall, ToolResult

__all__ = [
    "check_event_kinds_round_trip",
    "check_json_numbers_round_trip",
    "check_large_payload_round_trip",
    "check_nul_character_round_trips",
    "check_unencodable_event_is_rejected",
    "check_unicode_round_trip",
]


async def check_event_kinds_round_trip(checkpointer: Checkpointer) -> None:
    """Every kind of journal event reads back equal to what was appended.

    The events carry tool calls, reasoning with signatures, images, usage,
    decisions with timezone-aware datetimes and JSON outputs. They are
    appended once as one batch and once one at a time.
    """
    prefix = new_prefix()
    events = sample_events(prefix)
    batch, single = prefix + "batch", prefix + "single"
    await checked_append(checkpointer, batch, events, after=0)
    for seq, event in enumerate(events):
        await checked_append(checkpointer, single, [event], after=seq)
    for thread_id in (batch, single):
        records = await checked_read(checkpointer, thread_id)
        assert_seqs(records, 1, thread_id)
        assert_events(records, events, thread_id)
        for record, event in zip(records, events, strict=True):
            assert type(record.event) is type(event), (
                f"entry {record.seq} of {thread_id!r} reads back as "
                f"{type(record.event).__name__}, expected {type(event).__name__}"
            )


async def check_unicode_round_trip(checkpointer: Checkpointer) -> None:
    """Non-ASCII text round-trips exactly, in events and in thread ids.

    Covers accents, CJK, right-to-left text, combining marks, emoji outside
    the Basic Multilingual Plane, line separators, quotes and backslashes,
    and thread ids with quotes, `%`, `_` and spaces.
    """
    prefix = new_prefix()
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
        await checked_append(checkpointer, thread_id, events, after=0)
        assert_events(await checked_read(checkpointer, thread_id), events, thread_id)
        assert thread_id in await checked_threads(checkpointer), (
            f"threads() does not list the thread {thread_id!r}"
        )


async def check_nul_character_round_trips(checkpointer: Checkpointer) -> None:
    """Text holding a NUL character (U+0000) round-trips, as any JSON string does.

    Tools can return such text (a binary file read as text, a C string),
    and JSON strings carry it as an escape.
    """
    thread_id = new_prefix() + "nul"
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
    assert_events(await checked_read(checkpointer, thread_id), events, thread_id)


async def check_json_numbers_round_trip(checkpointer: Checkpointer) -> None:
    """JSON numbers keep their type and value: floats stay floats, big ints stay exact."""
    thread_id = new_prefix() + "numbers"
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
    await checked_append(checkpointer, thread_id, [RunFinished(output=output)], after=0)
    (record,) = await checked_read(checkpointer, thread_id)
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
    thread_id = new_prefix() + "large"
    content = ("tidemill ☃ 潮 " * 80_000)[:1_000_000]
    events: list[JournalEvent] = [
        ToolFinished(result=ToolResult(call_id="big", name="dump", content=content)),
        RunFinished(output="after the big one"),
    ]
    await checked_append(checkpointer, thread_id, events, after=0)
    records = await checked_read(checkpointer, thread_id)
    assert len(records) == 2, f"the large append left {len(records)} records, expected 2"
    first = records[0].event
    assert isinstance(first, ToolFinished), f"entry 1 reads back as {first.kind}"
    assert len(first.result.content) == len(content), (
        f"the 1 MB content reads back with {len(first.result.content)} characters, "
        f"expected {len(content)}"
    )
    assert_events(records, events, thread_id)


async def check_unencodable_event_is_rejected(checkpointer: Checkpointer) -> None:
    """A batch holding an event that is not JSON raises `SerializationError`, storing nothing.

    Appends are all or nothing, and a backend must not accept what a durable
    one could not store, or a run that works in tests fails in production.
    """
    thread_id = new_prefix() + "unencodable"
    good = marker("fine")
    bad = RunFinished.model_construct(output=cast(JsonValue, {"when": object()}))
    await checked_append(checkpointer, thread_id, [good], after=0)
    try:
        result = await checkpointer.append(thread_id, [marker("also fine"), bad], after=1)
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
    records = await checked_read(checkpointer, thread_id)
    assert [r.event for r in records] == [good], (
        f"a failed batch left {len(records) - 1} of its events in {thread_id!r}"
    )


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
