"""The AWS event-stream decoder: every AWS codec test vector, positive and negative, and more."""

from __future__ import annotations

import base64
import json
import struct
import zlib
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from llm_replay import fixture_bytes, fixtures_dir, split

from tidemill.errors import ProviderError
from tidemill.llm.http._eventstream import (
    MAX_MESSAGE_LENGTH,
    EventStreamDecoder,
    EventStreamMessage,
)

VECTORS = "eventstream-vectors"
POSITIVE = [
    "all_headers",
    "empty_message",
    "int32_header",
    "payload_no_headers",
    "payload_one_str_header",
]
NEGATIVE = ["corrupted_header_len", "corrupted_headers", "corrupted_length", "corrupted_payload"]


def expected() -> dict[str, Any]:
    return dict(json.loads((fixtures_dir() / VECTORS / "decoded.json").read_bytes()))


def unsigned(crc: int) -> int:
    """decoded.json prints a CRC with its high bit set as a signed int32."""
    return crc & 0xFFFFFFFF


def as_recorded(value: object, kind: int) -> object:
    """A decoded header value in decoded.json's notation (bytes, strings, uuids in base64)."""
    if isinstance(value, str):
        return base64.b64encode(value.encode()).decode()
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, UUID):
        return base64.b64encode(value.bytes).decode()
    if isinstance(value, datetime):
        return (value - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(milliseconds=1)
    return value


def decode_all(data: bytes, sizes: list[int] | None = None) -> list[EventStreamMessage]:
    decoder = EventStreamDecoder()
    messages: list[EventStreamMessage] = []
    for piece in split(data, sizes or [len(data) or 1]):
        messages += decoder.feed(piece)
    messages += decoder.close()
    return messages


@pytest.mark.parametrize("name", POSITIVE)
@pytest.mark.parametrize("sizes", [None, [1], [3, 7]], ids=["whole", "bytewise", "uneven"])
def test_positive_vectors_decode_exactly(name: str, sizes: list[int] | None) -> None:
    want = expected()[f"positive/{name}"]
    (message,) = decode_all(fixture_bytes(f"{VECTORS}/positive-{name}.bin"), sizes)
    assert message.total_length == want["total_length"]
    assert message.headers_length == want["headers_length"]
    assert message.prelude_crc == unsigned(want["prelude_crc"])
    assert message.message_crc == unsigned(want["message_crc"])
    assert base64.b64encode(message.payload).decode() == want["payload"]
    assert [
        {"name": h.name, "type": h.type, "value": as_recorded(h.value, h.type)}
        for h in message.headers
    ] == want["headers"]


def test_header_values_are_typed() -> None:
    (message,) = decode_all(fixture_bytes(f"{VECTORS}/positive-all_headers.bin"))
    assert message.header("bool true") is True and message.header("bool false") is False
    assert message.header("byte") == -49 and message.header("int64") == 42424242
    assert message.header("byte buf") == b"I'm a little teapot!"
    assert message.text_header("content-type") == "application/json"
    assert message.text_header("byte buf") is None and message.header("missing") is None
    assert message.header("uuid") == UUID(bytes=bytes(range(1, 17)))
    assert message.header("timestamp") == datetime(1970, 1, 1, 2, 24, 35, 309000, tzinfo=UTC)


@pytest.mark.parametrize("name", NEGATIVE)
@pytest.mark.parametrize("sizes", [None, [1]], ids=["whole", "bytewise"])
def test_negative_vectors_raise_the_recorded_error(name: str, sizes: list[int] | None) -> None:
    message = expected()[f"negative/{name}"]
    with pytest.raises(ProviderError, match=message) as caught:
        decode_all(fixture_bytes(f"{VECTORS}/negative-{name}.bin"), sizes)
    assert caught.value.provider == "bedrock" and caught.value.retryable


def test_a_corrupted_length_fails_the_prelude_check_before_the_length_is_trusted() -> None:
    # The vector's length field claims more bytes than arrive: a decoder that trusted it
    # would wait for them instead of failing.
    data = fixture_bytes(f"{VECTORS}/negative-corrupted_length.bin")
    (total,) = struct.unpack(">I", data[:4])
    assert total != len(data)
    decoder = EventStreamDecoder()
    with pytest.raises(ProviderError, match="Prelude checksum mismatch"):
        decoder.feed(data)


def frame(headers: bytes, payload: bytes, *, total: int | None = None) -> bytes:
    """A message with correct checksums (and, when given, a made-up total length)."""
    size = total if total is not None else 16 + len(headers) + len(payload)
    prelude = struct.pack(">II", size, len(headers))
    prelude += struct.pack(">I", zlib.crc32(prelude))
    body = prelude + headers + payload
    return body + struct.pack(">I", zlib.crc32(body))


def string_header(name: str, value: str) -> bytes:
    raw = value.encode()
    return bytes([len(name)]) + name.encode() + b"\x07" + struct.pack(">H", len(raw)) + raw


def test_a_body_that_ends_inside_a_message_is_an_error() -> None:
    data = frame(string_header(":event-type", "messageStart"), b"{}")
    decoder = EventStreamDecoder("bedrock")
    assert decoder.feed(data[:-1]) == []
    with pytest.raises(ProviderError, match="ended inside a message"):
        decoder.close()
    # The error leaves the decoder empty: closing again is fine.
    assert decoder.close() == []


@pytest.mark.parametrize(
    ("headers", "payload", "total", "error"),
    [
        (b"", b"", 12, "Impossible message length 12"),
        (b"", b"", MAX_MESSAGE_LENGTH + 1, "Impossible message length"),
        (b"\x03abc\x07\x00\x09ab", b"", None, "malformed header"),  # string runs past the end
        (b"\x03abc\x0a", b"", None, "unknown header value type 10"),
        (b"\x02\xff\xfe\x07\x00\x00", b"", None, "malformed header"),  # not UTF-8
    ],
)
def test_impossible_frames_are_errors(
    headers: bytes, payload: bytes, total: int | None, error: str
) -> None:
    data = frame(headers, payload, total=total)
    if total is not None:  # only the prelude is right; that is what is checked first
        data = data[:12]
    with pytest.raises(ProviderError, match=error):
        EventStreamDecoder().feed(data)


def test_a_headers_length_beyond_the_message_is_an_error() -> None:
    prelude = struct.pack(">II", 20, 8)
    data = prelude + struct.pack(">I", zlib.crc32(prelude))
    with pytest.raises(ProviderError, match="Impossible headers length 8"):
        EventStreamDecoder().feed(data)


# -- properties over a real recording ------------------------------------------------------------

RECORDING = "bedrock-converse/text-stream.bin"
_settings = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_settings
@given(sizes=st.lists(st.integers(1, 300), min_size=1, max_size=8))
def test_any_chunking_gives_the_same_messages(sizes: list[int]) -> None:
    data = fixture_bytes(RECORDING)
    assert decode_all(data, sizes) == decode_all(data)
    assert len(decode_all(data)) == 33


@_settings
@given(data=st.data())
def test_any_corruption_is_a_provider_error(data: st.DataObject) -> None:
    body = bytearray(fixture_bytes(RECORDING))
    position = data.draw(st.integers(0, len(body) - 1), label="position")
    body[position] ^= data.draw(st.integers(1, 255), label="flip")
    sizes = data.draw(st.lists(st.integers(1, 500), min_size=1, max_size=4), label="sizes")
    with pytest.raises(ProviderError):
        decode_all(bytes(body), sizes)


@_settings
@given(data=st.data())
def test_any_truncation_is_an_error_or_a_frame_boundary(data: st.DataObject) -> None:
    body = fixture_bytes(RECORDING)
    whole = decode_all(body)
    cut = data.draw(st.integers(0, len(body) - 1), label="cut")
    try:
        messages = decode_all(body[:cut], [64])
    except ProviderError:
        return
    assert messages == whole[: len(messages)]
    assert sum(m.total_length for m in messages) == cut
