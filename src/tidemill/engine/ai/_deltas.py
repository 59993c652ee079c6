"""An agent step's model text as it is written: `text_delta` run events, coalesced, best-effort.

The agent loop asks its model for whole responses (`Model.request`), and the
journal keeps each model turn whole. `TextDeltas.model` wraps the step's
model (and each specialist's) so that a request is made as a stream
(`Model.stream`) instead: the text that arrives is written to the run's
events as `text_delta`, and the request still answers with the whole
response, which the loop journals as before. Deltas are live progress for
whoever follows the run, not its record:

- they are coalesced: one store write per `DELTA_INTERVAL` seconds at most
  for the whole step execution (its specialists' turns included, each its
  own row), and a last write of a turn's rest before the turn is journaled
  (so before its `model_turn` event);
- a turn read back from the journal (a resumed step) is not asked again, so
  it has no deltas; a request that fails has none beyond those written;
- a delta that cannot be written is logged and dropped: the step goes on;
- secrets are masked as in logs, a tail that may begin one kept back until
  more text comes.

Each event's `data` is `turn` (the index of the model turn in its agent's
conversation: the assistant messages before it), `offset` (where `text`
starts in the turn's streamed text: 0 again when a turn is asked anew after
an unparseable answer), `text`, and for a specialist's turns `agent` (its
name) and `task` (which of its runs in this step execution, from 1).

A model whose provider answers a streaming request with plain JSON (an API
or a gateway that cannot stream) is asked again whole, and not streamed to
again in this process. A model without a streaming API of its own streams
its whole text as one delta (`Model.stream`'s default).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
import weakref
from collections.abc import Callable, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any

from pydantic import JsonValue

from tidemill.engine._models import ModelChoice, ModelResolver
from tidemill.engine._step_env import Secrets
from tidemill.errors import AgentError, ProviderError
from tidemill.llm import Model, ModelRequest
from tidemill.store import JobRow, RunRow, Store, Tx
from tidemill.types import Message, ModelResponse, ResponseDone, Role, TextDelta

__all__ = ["DELTA_INTERVAL", "StreamedModel", "TextDeltas"]

log = logging.getLogger("tidemill.worker")

DELTA_INTERVAL = 0.25
"""Seconds between two writes of `text_delta` events of one step execution, at least."""

CLOSE_WAIT = 5.0
"""Seconds a step's end waits for a `text_delta` write in flight before cutting it off."""

_PLAIN: weakref.WeakSet[Model] = weakref.WeakSet()
"""Models whose provider answered a streaming request with plain JSON: asked whole."""

Row = tuple[str, str, int | None, str | None, str, dict[str, Any], float]


@dataclass(eq=False)
class _Turn:
    """One model request's text, written or still to write."""

    labels: dict[str, Any]
    pending: str = ""
    offset: int = 0


@dataclass(eq=False)
class TextDeltas:
    """The `text_delta` events of one execution of an agent step (see the module's docs).

    Args:
        store: Where the run's events are.
        run: The step's run.
        job: The step's job.
        secrets: Masked in the text, as in the job's logs.
        interval: Seconds between two writes, at least.
        clock: Monotonic seconds.
    """

    store: Store
    run: RunRow
    job: JobRow
    secrets: Secrets = field(default_factory=Secrets)
    interval: float = DELTA_INTERVAL
    clock: Callable[[], float] = time.monotonic
    written: int = field(default=0, init=False)
    """Events written so far."""
    writes: int = field(default=0, init=False)
    """Store writes made so far (each of one event or more)."""
    dropped: int = field(default=0, init=False)
    """Events that could not be written (logged)."""
    _open: list[_Turn] = field(default_factory=list, init=False)
    _writing: asyncio.Task[None] | None = field(default=None, init=False)
    _last: float = field(default=-math.inf, init=False)
    _tasks: int = field(default=0, init=False)

    # -- the models ---------------------------------------------------------------

    def model(self, model: Model, agent: str = "") -> StreamedModel:
        """`model`, its text written as it comes; `agent` names a specialist's."""
        labels: dict[str, Any] = {}
        if agent:
            self._tasks += 1
            labels = {"agent": agent, "task": self._tasks}
        return StreamedModel(model, self, labels)

    def resolver(self, models: ModelResolver) -> ModelResolver:
        """`models`, each model it gives wrapped by `model` (a specialist's named after it)."""

        def resolve(choice: ModelChoice) -> Model:
            return self.model(models(choice), choice.agent)

        return resolve

    # -- a turn's text ------------------------------------------------------------

    def begin(self, turn: int, labels: dict[str, Any]) -> _Turn:
        """A model request starts: the `turn`-th of its conversation."""
        opened = _Turn({**labels, "turn": turn})
        self._open.append(opened)
        return opened

    def add(self, turn: _Turn, text: str) -> None:
        """More text of `turn`: written now if the last write is done and long enough ago."""
        turn.pending += text
        if self._writing is not None and not self._writing.done():
            return
        now = self.clock()
        if now - self._last < self.interval:
            return
        rows = [row for row in map(self._take, self._open) if row is not None]
        if rows:
            self._last = now
            self._writing = asyncio.create_task(self._write(rows))

    async def end(self, turn: _Turn) -> None:
        """`turn`'s response is whole: write the rest of its text, after any write in flight."""
        await self.settle()
        self.drop(turn)
        row = self._take(turn, final=True)
        if row is not None:
            self._last = self.clock()
            await self._write([row])

    def drop(self, turn: _Turn) -> None:
        """`turn` ends without a response (or was written): forget what is left of it."""
        if turn in self._open:
            self._open.remove(turn)

    async def settle(self) -> None:
        """Wait for the write in flight, if any (never raising what it raised)."""
        writing = self._writing
        if writing is not None and not writing.done():
            await asyncio.wait([writing])

    async def aclose(self) -> None:
        """At the step's end: wait (up to `CLOSE_WAIT` s) for the write in flight; drop the rest."""
        self._open.clear()
        writing = self._writing
        if writing is None or writing.done():
            return
        await asyncio.wait([writing], timeout=CLOSE_WAIT)
        if not writing.done():
            writing.cancel()
            await asyncio.wait([writing])

    # -- writing ------------------------------------------------------------------

    def _take(self, turn: _Turn, final: bool = False) -> Row | None:
        """The event of `turn`'s pending text, keeping back a tail that may begin a secret."""
        text = turn.pending
        keep = 0 if final or not self.secrets else self.secrets.pending(text)
        shown, turn.pending = text[: len(text) - keep], text[len(text) - keep :]
        if self.secrets:
            shown = self.secrets.mask(shown)
        if not shown:
            return None
        data = {**turn.labels, "offset": turn.offset, "text": shown}
        turn.offset += len(shown)
        run, job = self.run, self.job
        return (run.root_id, run.id, job.id, job.step_id, "text_delta", data, time.time())

    async def _write(self, rows: Sequence[Row]) -> None:
        """Add `rows` to the run's events in one write; a failure is logged, never raised."""
        try:
            if self.store.dialect == "postgres":  # one statement on the event loop
                await self.store.write_one(*Tx.events_statement(rows))
            else:
                await self.store.transact(lambda tx: _add(tx, rows))
        except Exception as exc:
            self.dropped += len(rows)
            log.warning(
                "%s/%s: %d text_delta event(s) not written (%s: %s); the step goes on",
                self.run.id, self.job.step_id, len(rows), type(exc).__name__, exc,
            )  # fmt: skip
            return
        self.writes += 1
        self.written += len(rows)


def _add(tx: Tx, rows: Sequence[Row]) -> None:
    for root_id, run_id, job_id, step_id, kind, data, at in rows:
        tx.add_event(run_id, kind, data, now=at, root_id=root_id, job_id=job_id, step_id=step_id)


def _turn_of(messages: Sequence[Message]) -> int:
    """The index of the turn a request asks for: the assistant messages before it."""
    return sum(1 for message in messages if message.role is Role.ASSISTANT)


def _plain(model: Model) -> bool:
    try:
        return model in _PLAIN
    except TypeError:  # pragma: no cover - an unhashable model
        return False


def _remember_plain(model: Model) -> None:
    with contextlib.suppress(TypeError):  # an unhashable model is streamed to again next time
        _PLAIN.add(model)


class StreamedModel(Model):
    """Wraps `model`: each request is streamed, its text handed to `deltas` as it comes.

    The request answers with the stream's whole response, as `model.request`
    would: the agent loop and the journal see no difference.
    """

    def __init__(self, model: Model, deltas: TextDeltas, labels: dict[str, Any]) -> None:
        self.inner = model
        self.deltas = deltas
        self.labels = labels
        self.provider = model.provider
        self.model_name = model.model_name
        self.supports_tools = model.supports_tools
        self.supports_output_format = model.supports_output_format

    async def request(self, request: ModelRequest) -> ModelResponse:
        """Stream the call; write its text as `text_delta` events; answer the whole response.

        Raises:
            ProviderError: As the model's stream raises it.
            AgentError: The stream ended without its final response.
        """
        inner = self.inner
        if _plain(inner):
            return await inner.request(request)
        deltas = self.deltas
        turn = deltas.begin(_turn_of(request.messages), self.labels)
        response: ModelResponse | None = None
        heard = False
        try:
            async with aclosing(inner.stream(request)) as events:
                async for event in events:
                    heard = True
                    if isinstance(event, TextDelta):
                        if event.delta:
                            deltas.add(turn, event.delta)
                    elif isinstance(event, ResponseDone):
                        response = event.response
        except ProviderError as exc:
            if heard or exc.status_code != 200:
                raise
            # A 200 answer that is not a stream: the API (or a gateway) cannot stream.
            log.warning(
                "%s:%s answered a streaming request whole; asking it whole from now on (%s)",
                inner.provider, inner.model_name, exc.message,
            )  # fmt: skip
            _remember_plain(inner)
            return await inner.request(request)
        finally:
            if response is None:
                deltas.drop(turn)
        if response is None:
            raise AgentError("The model's stream ended without its final response.")
        await deltas.end(turn)
        return response

    def describe(self) -> dict[str, JsonValue]:
        """The wrapped model's description."""
        return self.inner.describe()
