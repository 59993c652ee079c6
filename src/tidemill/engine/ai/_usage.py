"""`MeteredModel`: a model that keeps one usage record per call an agent step makes.

The agent loop calls the model through it; each call, failed ones included,
becomes a record (model, provider, tokens, cost, latency, error, and the
step's `experiment_id` / `exposure_id`). Only the calls of this attempt
segment are kept, so a step that pauses and resumes never stores a call twice.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from tidemill.engine.ai._action import usage_record
from tidemill.llm import Model, ModelRequest
from tidemill.types import ModelResponse

__all__ = ["MeteredModel"]


class MeteredModel(Model):
    """Wraps `model`, appending a usage record to `records` for every request.

    `observe`, if given, is called with each record as it is made. A
    specialist's model passes the step's `records` to add to, and its
    `agent` name, which the records' `model` then carries:
    `"<model> (specialist <agent>)"` (metrics see the plain model name).
    `hold`, if given, is awaited before each request: the worker's check
    that it still holds the step's job (`StepEnv.hold`).

    Examples:
        >>> import asyncio
        >>> from tidemill.llm import ScriptedModel
        >>> from tidemill.types import Message
        >>> metered = MeteredModel(ScriptedModel(["Hi!"]), {"experiment_id": "e1"})
        >>> _ = asyncio.run(metered.request(ModelRequest([Message.user("Hello")])))
        >>> [(r["provider"], r["output_tokens"], r["experiment_id"]) for r in metered.records]
        [('scripted', 1, 'e1')]
    """

    def __init__(
        self,
        model: Model,
        metadata: Mapping[str, str],
        observe: Callable[[dict[str, Any]], None] | None = None,
        *,
        records: list[dict[str, Any]] | None = None,
        agent: str = "",
        hold: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.inner = model
        self.hold = hold
        self.observe = observe
        self.agent = agent
        self.metadata = dict(metadata)
        self.provider = model.provider
        self.model_name = model.model_name
        self.supports_tools = model.supports_tools
        self.supports_output_format = model.supports_output_format
        self.records: list[dict[str, Any]] = [] if records is None else records

    async def request(self, request: ModelRequest) -> ModelResponse:
        """Ask the wrapped model; record the call, whether it answered or failed."""
        if self.hold is not None:
            await self.hold()  # before the call: it is billed, and the journal may have moved on
        started = time.perf_counter()
        try:
            response = await self.inner.request(request)
        except (Exception, asyncio.CancelledError) as exc:  # cancelled: cut off by a bound
            elapsed = time.perf_counter() - started
            self._keep(usage_record(self.inner, self.metadata, elapsed, error=exc))
            raise
        elapsed = time.perf_counter() - started
        self._keep(usage_record(self.inner, self.metadata, elapsed, response))
        return response

    def _keep(self, record: dict[str, Any]) -> None:
        if self.observe is not None:
            self.observe(record)
        if self.agent:
            record = {**record, "model": f"{record['model']} (specialist {self.agent})"}
        self.records.append(record)
