"""Noticing that a client went away, and cancelling the work done for it.

A client that gives up on a whole (non-streamed) answer closes its
connection; the ASGI server then answers `receive()` with `http.disconnect`.
`CancelOnDisconnect` listens for it while the upstream call is made, and
cancels the task making it: the upstream request is closed as the call
unwinds, so a vendor stops generating (and billing) for nobody. A stream
does the same in `EventStreamResponse`.
"""

from __future__ import annotations

import asyncio
from types import TracebackType

from starlette.types import Receive

__all__ = ["CancelOnDisconnect", "wait_for_disconnect"]


async def wait_for_disconnect(receive: Receive) -> None:
    """Return when the client has gone away (or the server can no longer tell)."""
    try:
        while (await receive())["type"] != "http.disconnect":
            pass
    except Exception:  # a broken receive channel means the same: stop
        return


class CancelOnDisconnect:
    """Cancel the task in this block if the client disconnects meanwhile.

    Use it once the whole request has been read. On a disconnect, the block
    is cancelled and the cancellation ends at the block's end, so the task
    carries on (to send nothing); `gone` says that it happened. A
    cancellation from anywhere else passes through.

    Args:
        receive: The request's ASGI `receive`.

    Examples:
        >>> async def answer(receive):
        ...     async with CancelOnDisconnect(receive) as watch:
        ...         await asyncio.sleep(30)
        ...     return watch.gone
        >>> async def gone():
        ...     return {"type": "http.disconnect"}
        >>> asyncio.run(answer(gone))
        True
    """

    def __init__(self, receive: Receive) -> None:
        self.receive = receive
        self.gone = False
        self._task: asyncio.Task[object] | None = None
        self._listener: asyncio.Task[None] | None = None

    async def __aenter__(self) -> CancelOnDisconnect:
        self._task = asyncio.current_task()
        assert self._task is not None, "an ASGI app runs in a task"
        self._listener = asyncio.get_running_loop().create_task(wait_for_disconnect(self.receive))
        self._listener.add_done_callback(self._left)
        return self

    def _left(self, listener: asyncio.Task[None]) -> None:
        if not listener.cancelled() and self._task is not None:
            self.gone = True
            self._task.cancel()

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool:
        listener, self._listener = self._listener, None
        if listener is not None:
            listener.remove_done_callback(self._left)
            listener.cancel()
        if not self.gone or self._task is None:
            return False
        # Ours to end only if nobody else asked for the cancellation too.
        return self._task.uncancel() == 0 and isinstance(error, asyncio.CancelledError)
