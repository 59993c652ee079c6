"""A stdio server's stderr: logged, and its last lines kept for error messages."""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections import deque
from typing import TextIO

__all__ = ["StderrPump"]

_log = logging.getLogger("tidemill.tools.mcp")


class StderrPump:
    """A pipe for a server's stderr, read by a daemon thread.

    Each line goes to the `tidemill.tools.mcp` logger at DEBUG level (servers
    log every request there, which a terminal does not want), and the last
    `keep` lines stay for the error that says why the server failed.
    """

    def __init__(self, server: str, *, keep: int = 20, max_chars: int = 2000) -> None:
        read_fd, write_fd = os.pipe()
        self._server = server
        self._reader = os.fdopen(read_fd, "rb")
        self.writer: TextIO | None = os.fdopen(write_fd, "w", encoding="utf-8", errors="replace")
        """The end to give the server process as its stderr."""
        self._lines: deque[str] = deque(maxlen=keep)
        self._max_chars = max_chars
        self._thread = threading.Thread(
            target=self._pump, name=f"tidemill-mcp-{server}-stderr", daemon=True
        )
        self._thread.start()

    def release_writer(self) -> None:
        """Close this process's copy of the write end, once the server holds its own.

        Without this the reader would never see the end of the stream.
        """
        writer, self.writer = self.writer, None
        if writer is not None:
            writer.close()

    def tail(self) -> str | None:
        """The last lines read, or None when the server wrote nothing."""
        text = "\n".join(line for line in self._lines if line.strip())
        if not text:
            return None
        return text if len(text) <= self._max_chars else "..." + text[-self._max_chars :]

    async def aclose(self, grace: float = 1.0) -> None:
        """Wait up to `grace` seconds for the last output, then stop waiting.

        The thread is a daemon: a grandchild process that keeps the pipe open
        cannot hold up the caller.
        """
        self.release_writer()
        if self._thread.is_alive():
            await asyncio.to_thread(self._thread.join, grace)

    def _pump(self) -> None:
        with self._reader:
            for raw in self._reader:
                line = raw.decode("utf-8", errors="replace").rstrip()
                self._lines.append(line)
                _log.debug("MCP server %s: %s", self._server, line)
