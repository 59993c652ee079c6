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
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator
from dataclasses import dataclass

__all__ = ["SSEDecoder", "ServerSentEvent", "aiter_sse"]

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

    Examples:
        >>> decoder = SSEDecoder()
        >>> decoder.feed(b"event: ping\ndata: {}\n\ndata: par")
        [ServerSentEvent(event='ping', data='{}', id=None, retry=None)]
        >>> decoder.feed(b"tial\r")
        []
        >>> decoder.close()
        [ServerSentEvent(event='message', data='partial', id=None, retry=None)]
    """

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._first_line = True
        self._event: str | None = None
        self._data: list[str] = []
        self._last_id: str | None = None
        self._retry: int | None = None

    def feed(self, chunk: bytes) -> list[ServerSentEvent]:
        """Decode `chunk` and return the events it completes."""
        self._buffer += chunk
        return self._drain(final=False)

    def close(self) -> list[ServerSentEvent]:
        """Decode what is left at the end of the body and return its events."""
        events = self._drain(final=True)
        if self._buffer:
            self._line(self._buffer.decode("utf-8", errors="replace"), events)
            self._buffer.clear()
        self._dispatch(events)
        return events

    def _drain(self, *, final: bool) -> list[ServerSentEvent]:
        buf = self._buffer
        events: list[ServerSentEvent] = []
        pos = 0
        # Positions of the next CR and LF at or after `pos`; -1 once none is left.
        # They are searched again only when passed, so a chunk is scanned once.
        cr = buf.find(b"\r")
        lf = buf.find(b"\n")
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
            self._line(buf[pos:end].decode("utf-8", errors="replace"), events)
            pos = end + size
        del buf[:pos]
        return events

    def _line(self, line: str, events: list[ServerSentEvent]) -> None:
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


async def aiter_sse(chunks: AsyncIterable[bytes]) -> AsyncIterator[ServerSentEvent]:
    """Decode an async iterable of byte chunks into events, flushing at its end."""
    decoder = SSEDecoder()
    async for chunk in chunks:
        for event in decoder.feed(chunk):
            yield event
    for event in decoder.close():
        yield event
