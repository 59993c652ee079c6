"""The access log: one line per request, with its model, tokens, cost and latency.

`AccessLog` wraps the whole app. It notes the status the app sends and
writes one line on the `tidemill.llm.proxy.access` logger (at info level)
when the response has gone out:

    127.0.0.1:52814 "POST /v1/chat/completions" 200 model=claude tokens=16+12 cost=$0.000228 412ms

Tokens and cost are `?` when the upstream reported no usage, the cost also
when the price is not known. The path is logged without its query string,
which may hold a key a client sent there (`?api_key=...`); the client's own
text (the path, the model name) is escaped and cut short, so a hostile
value stays on one short line.
The chat handler fills the request's `AccessRecord` (the model asked for,
the usage of the answer); a stream's usage is read as its closing events are
written (`MeteredEncoder`). A request whose client left before an answer is
logged with status `-`.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tidemill.llm._model import Model
from tidemill.llm._pricing import price_usage
from tidemill.llm.proxy._chunks import ChunkEncoder
from tidemill.types import FinishReason, Usage

__all__ = [
    "ACCESS_LOGGER",
    "AccessLog",
    "AccessRecord",
    "MeteredEncoder",
    "access_record",
    "track",
]

ACCESS_LOGGER = "tidemill.llm.proxy.access"
"""The logger the access lines go to."""

_logger = logging.getLogger(ACCESS_LOGGER)
_SCOPE_KEY = "tidemill.access"
_SHOWN = 120  # characters of a client's text in a line
_ESCAPED = {" ": "\\x20", '"': '\\"', "\\": "\\\\"}


@dataclass(slots=True)
class AccessRecord:
    """What the chat handler learnt about one request, for its access line."""

    model_name: str | None = None
    """The `model` the client asked for."""
    model: Model | None = None
    """The model that served it, to price usage that came without a cost."""
    usage: Usage | None = None
    """The answer's usage, once known."""


def access_record(scope: Scope) -> AccessRecord | None:
    """The record of the request in `scope`, when the access log is on."""
    record = scope.get(_SCOPE_KEY)
    return record if isinstance(record, AccessRecord) else None


def track(scope: Scope) -> AccessRecord:
    """The record of the request in `scope`, made now if it has none.

    A wrapper that needs what the chat handler learns (its model and usage,
    to meter a caller, say) calls it before passing the request on; the
    access log then fills and writes the same record.
    """
    record = access_record(scope)
    if record is None:
        record = scope[_SCOPE_KEY] = AccessRecord()
    return record


class MeteredEncoder(ChunkEncoder):
    """A `ChunkEncoder` that keeps the usage of the stream's closing events in `record`.

    With `record` None (the access log is off) it is a plain `ChunkEncoder`.
    """

    def __init__(
        self,
        record: AccessRecord | None,
        *,
        model: str,
        response_id: str,
        created: int,
        include_usage: bool = False,
    ) -> None:
        super().__init__(
            model=model, response_id=response_id, created=created, include_usage=include_usage
        )
        self.record = record

    def closing(self, reason: FinishReason, usage: Usage) -> bytes:
        """The closing events, as `ChunkEncoder` writes them; `usage` is kept."""
        if self.record is not None:
            self.record.usage = usage
        return super().closing(reason, usage)


class AccessLog:
    """ASGI middleware writing one access line per HTTP request.

    Args:
        app: The app to wrap.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not _logger.isEnabledFor(logging.INFO):
            await self.app(scope, receive, send)  # no line to write: nothing to note
            return
        record = track(scope)
        status: int | None = None
        started = time.monotonic()

        async def noting(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, noting)
        finally:
            _logger.info("%s", _line(scope, status, record, (time.monotonic() - started) * 1000))


def _line(scope: Scope, status: int | None, record: AccessRecord, elapsed_ms: float) -> str:
    client = scope.get("client")
    peer = f"{client[0]}:{client[1]}" if client else "-"
    parts = [
        f'{peer} "{scope.get("method", "-")} {_shown(str(scope.get("path", "")))}"',
        "-" if status is None else str(status),
    ]
    if record.model_name is not None:
        parts.append(f"model={_shown(record.model_name)}")
    usage = record.usage
    if usage is not None and usage.unreported_requests:  # the upstream sent no usage
        parts += ["tokens=?", "cost=?"]
    elif usage is not None:
        parts.append(f"tokens={usage.input_tokens}+{usage.output_tokens}")
        parts.append(f"cost={_cost(usage, record.model)}")
    parts.append(f"{elapsed_ms:.0f}ms")
    return " ".join(parts)


def _cost(usage: Usage, model: Model | None) -> str:
    """The cost in dollars, `?` when the price is not known."""
    if not usage.cost_usd and not usage.unpriced_requests and model is not None:
        # A relayed stream's usage comes straight from the upstream, not yet priced.
        usage = price_usage(usage, provider=model.provider, models=(model.model_name,))
    if usage.unpriced_requests or (not usage.cost_usd and model is None):
        return "?"
    return f"${usage.cost_usd:.6f}"


def _shown(text: str) -> str:
    """`text` on one line, control characters, spaces and quotes escaped, cut short."""
    cut = text[:_SHOWN]
    shown = "".join(ch if ch.isprintable() and ch not in _ESCAPED else _escaped(ch) for ch in cut)
    return shown + ("..." if len(text) > _SHOWN else "")


def _escaped(ch: str) -> str:
    if ch in _ESCAPED:
        return _ESCAPED[ch]
    return ch.encode("unicode_escape").decode("ascii")
