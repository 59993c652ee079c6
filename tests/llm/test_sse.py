from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from llm_replay import fixture_bytes, split

from tidemill.errors import ProviderError
from tidemill.llm import ServerSentEvent, SSEDecoder
from tidemill.llm._json import loads_object
from tidemill.llm.http._sse import aiter_sse


def decode(*chunks: bytes) -> list[ServerSentEvent]:
    decoder = SSEDecoder()
    events = [event for chunk in chunks for event in decoder.feed(chunk)]
    return events + decoder.close()


def test_named_events_data_and_ids() -> None:
    events = decode(b"event: ping\ndata: {}\nid: 7\n\ndata: plain\n\n")
    assert events == [
        ServerSentEvent(event="ping", data="{}", id="7"),
        ServerSentEvent(event="message", data="plain", id="7"),
    ]


@pytest.mark.parametrize("newline", [b"\n", b"\r\n", b"\r"])
def test_every_line_ending(newline: bytes) -> None:
    body = newline.join([b"event: a", b"data: 1", b"", b"data: 2", b"", b""])
    assert [(e.event, e.data) for e in decode(body)] == [("a", "1"), ("message", "2")]


def test_multi_line_data_joins_with_newlines() -> None:
    assert decode(b"data: one\ndata:two\ndata:  three\n\n")[0].data == "one\ntwo\n three"


def test_comments_and_unknown_fields_are_ignored() -> None:
    body = b": OPENROUTER PROCESSING\n\n: keep-alive\nfoo: bar\ndata: x\n\n"
    assert decode(body) == [ServerSentEvent(data="x")]


def test_a_field_without_colon_and_an_empty_data_line() -> None:
    events = decode(b"data\n\ndata:\n\n")
    assert [e.data for e in events] == ["", ""]


def test_an_event_without_data_is_not_dispatched() -> None:
    assert decode(b"event: lonely\n\nevent: real\ndata: 1\n\n") == [
        ServerSentEvent(event="real", data="1")
    ]


def test_retry_and_id_rules() -> None:
    events = decode(b"retry: 1500\nid: a\0b\ndata: x\n\nretry: soon\ndata: y\n\n")
    assert [(e.id, e.retry) for e in events] == [(None, 1500), (None, 1500)]


def test_byte_order_mark_is_dropped_once() -> None:
    assert decode(b"\xef\xbb\xbfdata: x\n\n") == [ServerSentEvent(data="x")]


def test_anthropic_padding_is_kept_and_harmless() -> None:
    events = decode(b'event: message_stop\ndata: {"type":"message_stop"}         \n\n')
    assert events[0].data.endswith("         ")
    assert loads_object(events[0].data) == {"type": "message_stop"}


def test_crlf_split_across_chunks_makes_one_line_ending() -> None:
    assert decode(b"data: a\r", b"\n\r", b"\ndata: b\r\n\r\n") == [
        ServerSentEvent(data="a"),
        ServerSentEvent(data="b"),
    ]


def test_utf8_split_inside_a_character() -> None:
    body = "data: héllo 😊\n\n".encode()
    cut = body.index("😊".encode()) + 2
    assert decode(body[:cut], body[cut:]) == [ServerSentEvent(data="héllo 😊")]


def test_the_last_event_is_kept_without_its_blank_line() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b'data: {"type":"message_stop"}') == []
    assert decoder.close() == [ServerSentEvent(data='{"type":"message_stop"}')]


def test_invalid_utf8_is_replaced_not_raised() -> None:
    assert decode(b"data: \xff\xfe\n\n")[0].data == "\ufffd\ufffd"


async def test_aiter_sse_flushes_at_the_end() -> None:
    async def chunks() -> AsyncIterator[bytes]:
        yield b"data: 1\n\nda"
        yield b"ta: 2"

    assert [e.data async for e in aiter_sse(chunks())] == ["1", "2"]


# -- properties ---------------------------------------------------------------------------

FIXTURE_STREAMS = [
    "openai-chat/parallel-tool-calls-two-functions-stream.sse",
    "anthropic/thinking-tool-use-stream.sse",
    "openrouter/reasoning-stream.sse",
    "groq/error-in-stream.sse",
]

_field = st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\r\n\0"), max_size=12)


@settings(max_examples=60, deadline=None)
@given(name=st.sampled_from(FIXTURE_STREAMS), sizes=st.lists(st.integers(1, 200), min_size=1))
def test_any_chunking_of_a_recorded_stream_decodes_the_same(name: str, sizes: list[int]) -> None:
    body = fixture_bytes(name)
    assert decode(*split(body, sizes)) == decode(body)


@settings(max_examples=200, deadline=None)
@given(
    events=st.lists(
        st.tuples(
            st.sampled_from(["", "message_start", "ping"]), st.lists(_field, min_size=1, max_size=3)
        ),
        max_size=6,
    ),
    newline=st.sampled_from(["\n", "\r\n", "\r"]),
    sizes=st.lists(st.integers(1, 9), min_size=1),
)
def test_generated_streams_round_trip_in_any_chunking(
    events: list[tuple[str, list[str]]], newline: str, sizes: list[int]
) -> None:
    lines: list[str] = []
    for name, data in events:
        if name:
            lines.append(f"event: {name}")
        lines += [f"data: {value}" for value in data]
        lines.append("")
    body = (newline.join(lines) + newline).encode() if lines else b""
    expected = [ServerSentEvent(event=name or "message", data="\n".join(d)) for name, d in events]
    assert decode(*split(body, sizes)) == expected


@settings(max_examples=200, deadline=None)
@given(data=st.binary(max_size=300), sizes=st.lists(st.integers(1, 17), min_size=1))
def test_arbitrary_bytes_never_raise_and_chunking_never_matters(
    data: bytes, sizes: list[int]
) -> None:
    assert decode(*split(data, sizes)) == decode(data)


def reference(body: bytes) -> list[ServerSentEvent]:
    """The event-stream rules applied the plain way: the whole body, split into lines first."""
    events: list[ServerSentEvent] = []
    data: list[str] = []
    name: str | None = None
    last_id: str | None = None
    retry: int | None = None
    *lines, rest = re.split(rb"\r\n|\r|\n", body)
    if rest:  # a last line without its line end
        lines.append(rest)
    for number, raw in enumerate(lines):
        line = raw.decode("utf-8", errors="replace")
        if number == 0:
            line = line.removeprefix("\ufeff")
        if not line:
            if data:
                events.append(ServerSentEvent(name or "message", "\n".join(data), last_id, retry))
            data, name = [], None
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if field == "data":
            data.append(value)
        elif field == "event":
            name = value
        elif field == "id" and "\0" not in value:
            last_id = value
        elif field == "retry" and value.isascii() and value.isdigit():
            retry = int(value)
    if data:
        events.append(ServerSentEvent(name or "message", "\n".join(data), last_id, retry))
    return events


_VALUE = [b"x", b"7", b" ", b":", b"\0", b"\xc3", b"\xa9", b"\xf0\x9f\x98", b"\x8a", b"\xff"]
_LINE = st.tuples(
    st.sampled_from([b"", b"data", b"event", b"id", b"retry", b"dat", b"\xef\xbb\xbfdata"]),
    st.sampled_from([b"", b":", b": "]),
    st.lists(st.sampled_from(_VALUE), max_size=4),
    st.sampled_from([b"\n", b"\r\n", b"\r", b"\n\n", b"\r\n\r\n", b"\r\r"]),
).map(lambda parts: parts[0] + parts[1] + b"".join(parts[2]) + parts[3])


@settings(max_examples=300, deadline=None)
@given(
    lines=st.lists(_LINE, max_size=12),
    cut=st.integers(0, 2),
    sizes=st.lists(st.integers(1, 9), min_size=1),
)
def test_any_chunking_decodes_as_the_whole_body_split_into_lines(
    lines: list[bytes], cut: int, sizes: list[int]
) -> None:
    body = b"".join(lines)
    body = body[: len(body) - cut]  # the last line end may be missing, or half of it
    assert decode(*split(body, sizes)) == reference(body)


def test_a_large_stream_in_large_chunks() -> None:
    body = b"".join(b"data: %d\n\n" % i for i in range(50_000))
    events = decode(*split(body, [65536]))
    assert len(events) == 50_000 and events[-1].data == "49999"


# -- bounds -------------------------------------------------------------------------------


def test_a_line_over_the_bound_fails_as_soon_as_it_is_over() -> None:
    decoder = SSEDecoder("openai", max_event_size=1024)
    line = b"data: " + b"x" * 100_000  # no line end, ever
    fed: list[int] = []

    def feed_all() -> None:
        for piece in split(line, [100]):
            fed.append(len(piece))
            decoder.feed(piece)

    with pytest.raises(ProviderError, match="over-long event") as caught:
        feed_all()
    assert sum(fed) <= 1024 + 100  # stopped at the chunk that crossed the bound, not the end
    error = caught.value
    assert error.provider == "openai" and error.code == "event_too_long"
    assert error.status_code is None and not error.retryable


@pytest.mark.parametrize(
    "body",
    [
        b"data: " + b"y" * 2000 + b"\n\n",  # one line, whole in one chunk
        b"data: yyyyyyyy\n" * 200,  # many data lines, never a blank one to end the event
        b": keep-alive " + b"z" * 2000 + b"\r\n",  # a comment is a line too
    ],
)
def test_an_event_or_line_over_the_bound_is_refused(body: bytes) -> None:
    with pytest.raises(ProviderError, match="over-long event"):
        decode_bounded(body, max_event_size=1024)


def test_the_bound_counts_a_line_across_chunks() -> None:
    decoder = SSEDecoder(max_event_size=64)
    decoder.feed(b"data: " + b"w" * 50)
    with pytest.raises(ProviderError, match="over-long event"):
        decoder.feed(b"w" * 50)


def test_events_up_to_the_bound_pass() -> None:
    data = "v" * 1000
    events = decode_bounded(f"data: {data}\n\n".encode(), max_event_size=1024)
    assert events == [ServerSentEvent(data=data)]


def test_the_default_bound_fits_large_vendor_events() -> None:
    # A whole `response.completed` with an image in it runs to megabytes.
    data = "i" * (8 * 1024 * 1024)
    assert decode(f"data: {data}\n\n".encode())[0].data == data


def decode_bounded(body: bytes, *, max_event_size: int) -> list[ServerSentEvent]:
    decoder = SSEDecoder(max_event_size=max_event_size)
    return decoder.feed(body) + decoder.close()


class Scanned(bytearray):
    """A buffer that counts the bytes its line-end searches cover."""

    searched = 0

    def find(self, sub: Any, start: Any = None, end: Any = None) -> int:
        begin = 0 if start is None else start
        at = super().find(sub, begin)
        Scanned.searched += (at if at >= 0 else len(self)) - begin
        return at


def test_a_long_line_in_small_chunks_is_scanned_once() -> None:
    decoder = SSEDecoder()
    Scanned.searched = 0
    decoder._buffer = Scanned()
    line = b"data: " + b"q" * 200_000 + b"\n\n"
    events = [event for piece in split(line, [512]) for event in decoder.feed(piece)]
    assert events == [ServerSentEvent(data="q" * 200_000)]
    assert Scanned.searched <= 2 * len(line)  # a search each for CR and LF, never a rescan


def test_a_long_stream_split_at_every_byte_decodes_the_same() -> None:
    body = fixture_bytes("openai-responses/reasoning-summary-stream.sse")
    whole = decode(body)
    assert whole == reference(body) and len(whole) > 100
    assert decode(*split(body, [1])) == whole
    step = max(1, len(body) // 2000)
    for cut in range(0, len(body), step):
        assert decode(body[:cut], body[cut:]) == whole, cut
