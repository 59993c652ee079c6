r"""An incremental decoder for server-sent events (SSE).

Both the OpenAI-style and Anthropic streams are SSE: lines of `field: value`,
events separated by a blank line. The network hands the body over in chunks
of any size, so a chunk may end inside a line, inside a UTF-8 character or
between the `\r` and `\n` of a line ending. `SSEDecoder` buffers what it
cannot decode yet and returns each event once its blank line has arrived.

It follows the WHATWG event-stream rules: `\r\n`, `\n` and `\r` all end a
line; lines starting with `:` are comments (OpenRouter sends
`: OPENROUTER PROCESSING` as a keep-alive); several `data:` lines join with
`\n`; one space after the colon is dropped. Data is returned exactly as sent,
so the spaces Anthropic pads its JSON with stay; `json.loads` ignores them.

A line, and the data of one event, are bounded (`MAX_EVENT_SIZE`, or
`max_event_size=`): an upstream that sends more without ending it gets a
`ProviderError` (code `event_too_long`) as soon as the bound is crossed,
rather than the memory and time to hold it. Each byte is searched for a
line end once, however the body is cut into chunks.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator
from dataclasses import dataclass

from tidemill.errors import ProviderError

__all__ = ["MAX_EVENT_SIZE", "SSEDecoder", "ServerSentEvent", "aiter_sse"]

MAX_EVENT_SIZE = 64 * 1024 * 1024
"""The longest line, and the most data one event may carry, in bytes (64 MiB).

Real events are far smaller; the largest are whole responses repeated at a
stream's end (OpenAI's `response.completed`), which may hold generated images.
"""

_BOM = "\ufeff"


@dataclass(frozen=True, slots=True)
class ServerSentEvent:
    """One decoded event."""

    event: str = "message"
    """The `event:` field, `message` when the event named none."""
    data: str = ""
    """The `data:` lines, joined with newlines."""
    id: str | None = None
    """The last `id:` seen on the stream, if any."""
    retry: int | None = None
    """The last `retry:` reconnection delay (milliseconds) seen, if any."""


class SSEDecoder:
    r"""Turn the bytes of an event stream, in any chunking, into events.

    Feed it chunks as they arrive and call `close` at the end of the body:
    an event whose blank line never came is still returned then, because
    some servers end the body right after the last `data:` line.

    Args:
        provider: Who sends the stream, named by the error for an over-long event.
        max_event_size: The longest line, and the most data one event may
            carry, in bytes.

    Examples:
        >>> decoder = SSEDecoder()
        >>> decoder.feed(b"event: ping\ndata: {}\n\ndata: par")
        [ServerSentEvent(event='ping', data='{}', id=None, retry=None)]
        >>> decoder.feed(b"tial\r")
        []
        >>> decoder.close()
        [ServerSentEvent(event='message', data='partial', id=None, retry=None)]
    """

    def __init__(self, provider: str = "upstream", *, max_event_size: int = MAX_EVENT_SIZE) -> None:
        self.provider = provider
        self.max_event_size = max_event_size
        self._buffer = bytearray()
        self._scanned = 0
        """Leading bytes of `_buffer` already searched: they hold no line end."""
        self._size = 0
        """Bytes of the data lines of the current event so far."""
        self._first_line = True
        self._event: str | None = None
        self._data: list[str] = []
        self._last_id: str | None = None
        self._retry: int | None = None

    def feed(self, chunk: bytes) -> list[ServerSentEvent]:
        """Decode `chunk` and return the events it completes.

        Raises:
            ProviderError: When a line, or the data of an event, grows past
                `max_event_size` (code `event_too_long`).
        """
        self._buffer += chunk
        events = self._drain(final=False)
        if len(self._buffer) > self.max_event_size:  # a line that has not ended yet
            raise self._too_long()
        return events

    def close(self) -> list[ServerSentEvent]:
        """Decode what is left at the end of the body and return its events.

        Raises:
            ProviderError: As `feed`.
        """
        events = self._drain(final=True)
        if self._buffer:
            self._line(self._buffer.decode("utf-8", errors="replace"), len(self._buffer), events)
            self._buffer.clear()
        self._scanned = 0
        self._dispatch(events)
        return events

    def _drain(self, *, final: bool) -> list[ServerSentEvent]:
        buf = self._buffer
        events: list[ServerSentEvent] = []
        limit = self.max_event_size
        pos = 0
        # Positions of the next CR and LF at or after `pos`; -1 once none is left.
        # They are searched again only when passed, and a line left over from the
        # last chunk is not searched again, so each byte is scanned once.
        cr = buf.find(b"\r", self._scanned)
        lf = buf.find(b"\n", self._scanned)
        while True:
            if 0 <= cr < pos:
                cr = buf.find(b"\r", pos)
            if 0 <= lf < pos:
                lf = buf.find(b"\n", pos)
            if cr < 0 and lf < 0:
                break
            if cr < 0 or (0 <= lf < cr):
                end, size = lf, 1
            elif cr + 1 < len(buf):
                end, size = cr, 2 if buf[cr + 1] == 0x0A else 1
            elif final:
                end, size = cr, 1
            else:
                break  # a CR as the last byte: an LF may follow in the next chunk
            if end - pos > limit:
                raise self._too_long()
            self._line(buf[pos:end].decode("utf-8", errors="replace"), end - pos, events)
            pos = end + size
        del buf[:pos]
        # What is left is the start of a line, searched through (but for a last CR).
        self._scanned = len(buf) - 1 if buf.endswith(b"\r") else len(buf)
        return events

    def _line(self, line: str, size: int, events: list[ServerSentEvent]) -> None:
        if self._first_line:
            self._first_line = False
            line = line.removeprefix(_BOM)
        if not line:
            self._dispatch(events)
            return
        if line.startswith(":"):
            return
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._size += size
            if self._size > self.max_event_size:
                raise self._too_long()
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id":
            if "\0" not in value:
                self._last_id = value
        elif name == "retry" and value.isascii() and value.isdigit():
            self._retry = int(value)

    def _dispatch(self, events: list[ServerSentEvent]) -> None:
        if self._data:
            events.append(
                ServerSentEvent(
                    event=self._event or "message",
                    data="\n".join(self._data),
                    id=self._last_id,
                    retry=self._retry,
                )
            )
        self._data = []
        self._event = None
        self._size = 0

    def _too_long(self) -> ProviderError:
        self._buffer.clear()  # nothing more is decoded: free what was held
        self._scanned = 0
        self._data = []
        return ProviderError(
            f"{self.provider} sent an over-long event: a server-sent event line or event "
            f"longer than {self.max_event_size} bytes. The stream was stopped there.",
            provider=self.provider,
            code="event_too_long",
            hint="Check that the base URL points at the vendor's API; a model's events are "
            "far smaller.",
        )


async def aiter_sse(chunks: AsyncIterable[bytes]) -> AsyncIterator[ServerSentEvent]:
    """Decode an async iterable of byte chunks into events, flushing at its end."""
    decoder = SSEDecoder()
    async for chunk in chunks:
        for event in decoder.feed(chunk):
            yield event
    for event in decoder.close():
        yield event
