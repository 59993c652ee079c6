"""`OutputTail`: what a running script call has written so far, handed on as text.

A child of the pool writes a call's stdout and stderr to two capture files
(see `_child`); the pool reads them whole when the call ends. A caller that
wants the output while the call runs (to store a step's logs as they are
written) gives `ScriptPool.run` an `on_output` callback: the pool polls the
files with an `OutputTail`, which reads what was added since its last look,
decodes it (a UTF-8 character split across two looks is kept for the next)
and calls back with `(stream, text)`. What it hands on, joined, is what the
call's `ScriptOutcome` holds: the same `max_output` cut, the same note.
"""

from __future__ import annotations

import codecs
import os
from collections.abc import Callable

__all__ = ["OutputTail", "truncation_note"]

STREAMS = ("stdout", "stderr")


def truncation_note(limit: int) -> str:
    r"""What follows a stream's output once it passed `limit` bytes.

    Examples:
        >>> truncation_note(10)
        '\n[tidemill: output truncated after 10 bytes]'
    """
    return f"\n[tidemill: output truncated after {limit} bytes]"


class _Stream:
    """One capture file, read from where the last look stopped."""

    def __init__(self, path: str, limit: int) -> None:
        self.path = path
        self.limit = limit
        self.offset = 0
        self.cut = False
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def read(self, *, final: bool) -> str:
        """The text added since the last read (all that is left, decoded, when `final`)."""
        if self.cut:
            return ""
        try:
            size = os.stat(self.path).st_size
        except OSError:  # the file is gone: the pool removed the child's directory
            size = self.offset
        data = b""
        if min(size, self.limit) > self.offset:
            try:
                with open(self.path, "rb") as file:
                    file.seek(self.offset)
                    data = file.read(min(size, self.limit) - self.offset)
            except OSError:
                data = b""
            self.offset += len(data)
        over = size > self.limit and self.offset >= self.limit
        text = self.decoder.decode(data, final=final or over)
        if over:
            self.cut = True
            text += truncation_note(self.limit)
        return text


class OutputTail:
    """Hands on what a call adds to its capture files, as `(stream, text)`, in order of looks.

    Args:
        directory: The child's capture directory (its `stdout` and `stderr` files,
            emptied before the call was sent).
        limit: Bytes of each stream handed on; then a note says the rest was cut.
        on_output: Called with `("stdout" | "stderr", text)` for each new piece.
    """

    def __init__(self, directory: str, limit: int, on_output: Callable[[str, str], None]) -> None:
        self._streams = [(name, _Stream(os.path.join(directory, name), limit)) for name in STREAMS]
        self._on_output = on_output
        self._finished = False

    def poll(self) -> None:
        """Hand on what was written since the last look (nothing once finished)."""
        if not self._finished:
            self._look(final=False)

    def finish(self) -> None:
        """Hand on the rest, once: the call ended (or its process was killed)."""
        if not self._finished:
            self._finished = True
            self._look(final=True)

    def _look(self, *, final: bool) -> None:
        for name, stream in self._streams:
            text = stream.read(final=final)
            if text:
                self._on_output(name, text)
