"""`sample_events`: one or more journal events of every kind, every field set."""

from __future__ import annotations

from datetime import UTC as _UTC
from datetime import datetime, timedelta, timezone

from tidemill.agents.checkpoint._compact import fold_snapshot
from tidemill.agents.journal import (
    ApprovalDecided,
    ApprovalRequested,
    Correction,
    GraphCheckpoint,
    GraphWrite,
    GraphWrites,
    JournalEvent,
    MemoryRecalled,
    MemorySummarized,
    ModelTurn,
    OutputRejected,
    RecalledUnit,
    RunFailed,
    RunFinished,
    ToolFinished,
    ToolStarted,
    UserInput,
)
from tidemill.types import (
    Decision,
    ImageRef,
    Message,
    ModelResponse,
    Reasoning,
    ToolCall,
    ToolResult,
    Usage,
)

__all__ = ["sample_events"]


def sample_events(tag: str = "") -> list[JournalEvent]:
    """One or more events of every journal kind, with every field set to something.

    Args:
        tag: Mixed into ids and texts, so different threads hold different events.

    Returns:
        The events, in a plausible order for a run.

    Examples:
        >>> sorted({event.kind for event in sample_events()})[:3]
        ['approval_decided', 'approval_requested', 'correction']
    """
    search = ToolCall(
        id=f"call_{tag}search",
        name="search",
        arguments={"query": f"tides {tag}", "limit": 3, "near": {"lat": 51.5, "lon": -0.12}},
        signature="gemini-thought-signature==",
    )
    broken = ToolCall(id=f"call_{tag}broken", name="search", raw_arguments='{"query": "tid')
    pay = ToolCall(id=f"call_{tag}pay", name="pay", arguments={"amount": 12, "memo": None})
    response = ModelResponse(
        message=Message.assistant(
            f"Let me look that up. {tag}",
            tool_calls=(search, broken, pay),
            reasoning=(
                Reasoning(text="The user wants tides.", signature="sig-9f2", provider="anthropic"),
                Reasoning(redacted_data="b3BhcXVl", provider="anthropic", id="rs_1"),
            ),
            name="planner",
        ),
        usage=Usage(
            requests=1,
            input_tokens=1200,
            output_tokens=96,
            cache_read_tokens=1024,
            cache_write_tokens=128,
            reasoning_tokens=40,
        ),
        finish_reason="tool_calls",
        model="model-2024-05-01",
        provider="scripted",
        response_id=f"resp_{tag}",
    )
    found = ToolResult(call_id=search.id, name="search", content="3 results: 06:12, 18:40")
    failed = ToolResult(call_id=broken.id, name="search", content="Not JSON.", is_error=True)
    india = timezone(timedelta(hours=5, minutes=30))
    events: list[JournalEvent] = [
        UserInput(
            messages=(
                Message.system("Answer briefly."),
                Message.user(
                    f"When is high tide? {tag}",
                    images=(
                        ImageRef(url="https://example.com/chart.png", media_type="image/png"),
                        ImageRef(url="data:image/gif;base64,R0lGODlhAQABAAAAACw=", detail="low"),
                    ),
                ),
                Message.tool(failed),
            ),
            run_id=f"run_{tag}",
        ),
        ModelTurn(response=response),
        ModelTurn(response=response, started=(search.id, pay.id)),
        Correction(error="The tool call could not be parsed.", feedback="Send one JSON object."),
        ToolStarted(call=search),
        ToolStarted(call=search, attempt=2),
        ToolFinished(result=found, duration_ms=12.5),
        ToolFinished(result=failed),
        ApprovalRequested(calls=(pay,)),
        ApprovalDecided(
            call_id=pay.id,
            decision=Decision.approve({"amount": 10, "memo": "edited"}, actor="ana@example.com"),
            decided_at=datetime(2024, 5, 17, 9, 30, 15, 123456, tzinfo=india),
        ),
        ApprovalDecided(
            call_id=pay.id,
            decision=Decision.reject("Not on a Friday.", actor="bo"),
            decided_at=datetime(2024, 5, 17, 4, 0, tzinfo=_UTC),
        ),
        RunFinished(
            output={
                "answer": "06:12",
                "confidence": 0.75,
                "tides": [{"at": "06:12", "height_m": 4.2}, {"at": "18:40", "height_m": 3.9}],
                "exact": True,
                "note": None,
                "count": 2,
            }
        ),
        RunFinished(output="plain text"),
        OutputRejected(errors=("population: Field required",), feedback="Reply again."),
        MemorySummarized(
            summary="The user asked about tides in Brest.", upto=4, usage=Usage(requests=1)
        ),
        MemoryRecalled(
            units=(RecalledUnit(start=0, end=2, text=f"user: Tides in Brest? {tag}"),),
            usage=Usage(requests=1, input_tokens=7, cost_usd=0.0001),
        ),
        RunFailed(reason="limit", limit="max_iterations", message="10 iteration(s) used"),
        RunFailed(reason="tool_call_retries", message="The tool raised ValueError: bad"),
        GraphCheckpoint(
            checkpoint_id=f"1ef1-{tag}0002",
            parent_id=f"1ef1-{tag}0001",
            checkpoint={
                "v": 4,
                "id": f"1ef1-{tag}0002",
                "ts": "2024-05-17T09:30:15.123456+00:00",
                "channel_versions": {
                    "messages": "00000002.5f1c",
                    "branch:to:agent": "00000002.a0b1",
                },
                "versions_seen": {"agent": {"branch:to:agent": "00000001.9e2d"}},
                "updated_channels": ["messages"],
                "channel_values": {
                    "messages": [{"$model": "Message", "data": {"role": "user", "content": tag}}],
                    "branch:to:agent": None,
                },
            },
            metadata={"source": "loop", "step": 1, "parents": {}, "score": 0.5},
        ),
        GraphWrites(
            checkpoint_ns=f"tools:{tag}",
            checkpoint_id=f"1ef1-{tag}0002",
            task_id=f"task-{tag}",
            task_path="~__pregel_pull, tools",
            writes=(
                GraphWrite(channel="messages", idx=0, value=[{"$tuple": ["a", 1, None]}]),
                GraphWrite(
                    channel="__interrupt__", idx=-3, value={"$serde": "msgpack", "data": "kQ=="}
                ),
            ),
        ),
    ]
    # The fold of all of them, as a compaction or a fork writes it.
    snapshot = fold_snapshot(f"sample-{tag}", enumerate(events, start=1))
    events.append(snapshot.model_copy(update={"forked_from": f"origin-{tag}", "forked_at": 7}))
    return events
