"""An incremental decoder for the AWS event-stream binary framing.

Bedrock's `ConverseStream` answers with `application/vnd.amazon.eventstream`:
a sequence of binary messages, each laid out as

```
prelude   total length (uint32) · headers length (uint32) · prelude CRC32 (uint32)
headers   name length (uint8) · name (UTF-8) · value type (uint8) · value, repeated
payload   total length - headers length - 16 bytes
trailer   message CRC32 (uint32) of everything before it
```

all big-endian. Header values are typed: booleans (types 0 and 1, no
bytes), signed integers of 1, 2, 4 and 8 bytes (2 to 5), byte arrays and
UTF-8 strings with a 2-byte length (6 and 7), a millisecond timestamp (8)
and a UUID (9).

The network hands the body over in chunks of any size, so `EventStreamDecoder`
buffers until a whole message is there. Both checksums are verified, the
prelude's before its lengths are trusted, so a corrupted length can neither
send the decoder waiting for gigabytes nor misframe what follows; any
corruption, and a body that ends inside a message, is a `ProviderError`.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from uuid import UUID

from tidemill.errors import ProviderError

__all__ = [
    "MAX_HEADERS_LENGTH",
    "MAX_MESSAGE_LENGTH",
    "EventStreamDecoder",
    "EventStreamHeader",
    "EventStreamMessage",
    "HeaderValue",
]

MAX_MESSAGE_LENGTH = 16 * 1024 * 1024
"""The largest message AWS sends (16 MiB); a longer prelude is corruption."""
MAX_HEADERS_LENGTH = 128 * 1024
"""The largest headers section AWS sends (128 KiB)."""

_PRELUDE = struct.Struct(">III")
_PRELUDE_LENGTH = 12
_OVERHEAD = _PRELUDE_LENGTH + 4  # prelude and the message CRC
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_INTEGERS = {
    2: struct.Struct(">b"),
    3: struct.Struct(">h"),
    4: struct.Struct(">i"),
    5: struct.Struct(">q"),
}
_LENGTH = struct.Struct(">H")
_TIMESTAMP = struct.Struct(">q")

HeaderValue = bool | int | bytes | str | datetime | UUID
"""A decoded header value; the type follows the header's wire type."""


@dataclass(frozen=True, slots=True)
class EventStreamHeader:
    """One header of a message."""

    name: str
    type: int
    """The wire type, 0 to 9."""
    value: HeaderValue


@dataclass(frozen=True, slots=True)
class EventStreamMessage:
    """One decoded, checksum-verified message."""

    headers: tuple[EventStreamHeader, ...]
    payload: bytes
    total_length: int
    headers_length: int
    prelude_crc: int
    message_crc: int

    def header(self, name: str) -> HeaderValue | None:
        """The value of the header `name`, or `None` when the message has none.

        Examples:
            >>> message = EventStreamMessage(
            ...     (EventStreamHeader(":event-type", 7, "messageStart"),), b"{}", 0, 0, 0, 0
            ... )
            >>> message.header(":event-type"), message.header(":exception-type")
            ('messageStart', None)
        """
        for header in self.headers:
            if header.name == name:
                return header.value
        return None

    def text_header(self, name: str) -> str | None:
        """The value of the header `name` if it is a string, else `None`."""
        value = self.header(name)
        return value if isinstance(value, str) else None


class EventStreamDecoder:
    r"""Turn the bytes of an event stream, in any chunking, into messages.

    Feed it chunks as they arrive and call `close` at the end of the body,
    which raises if the body stopped inside a message.

    Args:
        provider: The provider's name, for the errors.

    Examples:
        >>> frame = bytes.fromhex("000000100000000005c248eb7d98c8ff")  # an empty message
        >>> decoder = EventStreamDecoder()
        >>> decoder.feed(frame[:7]), len(decoder.feed(frame[7:]))
        ([], 1)
        >>> decoder.close()
        []
    """

    def __init__(self, provider: str = "bedrock") -> None:
        self.provider = provider
        self._buffer = bytearray()

    def feed(self, chunk: bytes) -> list[EventStreamMessage]:
        """Take `chunk`; return the messages it completes.

        Raises:
            ProviderError: When a checksum fails or a length is impossible.
        """
        self._buffer += chunk
        buffer = self._buffer
        messages: list[EventStreamMessage] = []
        start = 0
        while len(buffer) - start >= _PRELUDE_LENGTH:
            total, headers_length = self._check_prelude(buffer, start)
            if len(buffer) - start < total:
                break
            messages.append(self._message(bytes(buffer[start : start + total]), headers_length))
            start += total
        del buffer[:start]
        return messages

    def close(self) -> list[EventStreamMessage]:
        """End the stream; nothing may be left over.

        Raises:
            ProviderError: When the body ended inside a message.
        """
        if self._buffer:
            left = len(self._buffer)
            self._buffer.clear()
            raise self._error(
                f"The {self.provider} event stream ended inside a message ({left} bytes left over)."
            )
        return []

    # -- mechanics -----------------------------------------------------------------------

    def _check_prelude(self, buffer: bytearray, start: int) -> tuple[int, int]:
        total, headers_length, prelude_crc = _PRELUDE.unpack_from(buffer, start)
        if zlib.crc32(buffer[start : start + 8]) != prelude_crc:
            raise self._error("Prelude checksum mismatch in the event stream.")
        if not _OVERHEAD <= total <= MAX_MESSAGE_LENGTH:
            raise self._error(f"Impossible message length {total} in the event stream.")
        if headers_length > min(MAX_HEADERS_LENGTH, total - _OVERHEAD):
            raise self._error(f"Impossible headers length {headers_length} in the event stream.")
        return total, headers_length

    def _message(self, frame: bytes, headers_length: int) -> EventStreamMessage:
        (message_crc,) = struct.unpack_from(">I", frame, len(frame) - 4)
        if zlib.crc32(frame[:-4]) != message_crc:
            raise self._error("Message checksum mismatch in the event stream.")
        headers_end = _PRELUDE_LENGTH + headers_length
        (prelude_crc,) = struct.unpack_from(">I", frame, 8)
        return EventStreamMessage(
            headers=self._headers(frame[_PRELUDE_LENGTH:headers_end]),
            payload=frame[headers_end:-4],
            total_length=len(frame),
            headers_length=headers_length,
            prelude_crc=prelude_crc,
            message_crc=message_crc,
        )

    def _headers(self, data: bytes) -> tuple[EventStreamHeader, ...]:
        headers: list[EventStreamHeader] = []
        position = 0
        try:
            while position < len(data):
                size = data[position]
                name = data[position + 1 : position + 1 + size].decode("utf-8")
                position += 1 + size
                kind = data[position]
                value, position = self._value(kind, data, position + 1)
                headers.append(EventStreamHeader(name, kind, value))
        except (IndexError, struct.error, UnicodeDecodeError, ValueError, OverflowError) as exc:
            raise self._error(f"A malformed header in the event stream: {exc}.") from exc
        return tuple(headers)

    def _value(self, kind: int, data: bytes, position: int) -> tuple[HeaderValue, int]:
        if kind in (0, 1):
            return kind == 0, position
        if kind in _INTEGERS:
            integer = _INTEGERS[kind]
            return integer.unpack_from(data, position)[0], position + integer.size
        if kind in (6, 7):
            (length,) = _LENGTH.unpack_from(data, position)
            start = position + 2
            raw = data[start : start + length]
            if len(raw) != length:
                raise ValueError("a header value runs past the headers")
            return (raw.decode("utf-8") if kind == 7 else raw), start + length
        if kind == 8:
            (millis,) = _TIMESTAMP.unpack_from(data, position)
            return _EPOCH + timedelta(milliseconds=millis), position + 8
        if kind == 9:
            raw = data[position : position + 16]
            return UUID(bytes=raw), position + 16
        raise ValueError(f"unknown header value type {kind}")

    def _error(self, message: str) -> ProviderError:
        return ProviderError(
            message,
            provider=self.provider,
            retryable=True,
            hint="The response was cut short or garbled on the way; try again.",
        )
