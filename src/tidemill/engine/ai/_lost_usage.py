"""Usage records for model calls whose worker died before it could store them.

A step's usage records are stored with its outcome or its pause. A worker
that dies mid-step stores none, yet the calls it made are in the agent's
journal: one `ModelTurn` per answered call, with the answer's tokens and
cost. The worker that continues the step compares the two: the journal's
answered turns beyond the step's stored answered calls (records without an
error, the specialists' aside, which journal elsewhere) are the lost ones,
and it stores a record for each with its own. Their latency is unknown (0).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tidemill.agents.journal import JournalRecord, ModelTurn
from tidemill.llm import Model

__all__ = ["lost_usage"]


def _answered(rows: Sequence[Mapping[str, Any]]) -> int:
    """Stored records of answered calls of the step's own agent."""
    return sum(1 for row in rows if row["error"] is None and "(specialist " not in row["model"])


def lost_usage(
    records: Sequence[JournalRecord],
    rows: Sequence[Mapping[str, Any]],
    model: Model,
    metadata: Mapping[str, str],
) -> list[dict[str, Any]]:
    """Records for the answered turns of the step's journal that `rows` (stored) lack.

    `rows` are the usage records stored for this step of this run, oldest
    first; the journal's answered turns are matched to them in order.

    Examples:
        >>> from datetime import datetime
        >>> from tidemill.agents.journal import JournalRecord, ModelTurn
        >>> from tidemill.llm import ScriptedModel
        >>> from tidemill.types import Message, ModelResponse, Usage
        >>> turn = ModelTurn(response=ModelResponse(message=Message.assistant("Hi"),
        ...     usage=Usage(input_tokens=5, output_tokens=1, requests=1), model="m1"))
        >>> journal = [JournalRecord(seq, turn, datetime.now()) for seq in (1, 2)]
        >>> stored = [{"error": None, "model": "m1"}]
        >>> [(r["model"], r["input_tokens"]) for r in lost_usage(journal, stored,
        ...     ScriptedModel(), {})]
        [('m1', 5)]
    """
    turns = [record.event.response for record in records if isinstance(record.event, ModelTurn)]
    missing = turns[_answered(rows) :]
    lost = []
    for response in missing:
        usage = response.usage
        lost.append(
            {
                "model": response.model or model.model_name,
                "provider": response.provider or model.provider,
                "input_tokens": usage.input_tokens,
                "output_tokens": usage.output_tokens,
                "cost_usd": usage.cost_usd if usage.unpriced_requests == 0 else None,
                "latency_ms": 0.0,
                "error": None,
                "experiment_id": metadata.get("experiment_id"),
                "exposure_id": metadata.get("exposure_id"),
            }
        )
    return lost
