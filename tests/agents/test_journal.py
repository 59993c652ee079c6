"""The fold: a thread's state rebuilt from its journal events."""

from __future__ import annotations

from datetime import UTC, datetime

from tidemill.agents.journal import (
    ApprovalDecided,
    ApprovalRequested,
    Correction,
    JournalEvent,
    ModelTurn,
    RunFailed,
    RunFinished,
    ThreadState,
    ToolFinished,
    ToolStarted,
    UserInput,
)
from tidemill.types import Decision, Message, ModelResponse, ToolCall, ToolResult, Usage

A = ToolCall(id="a", name="lookup", arguments={"q": 1})
B = ToolCall(id="b", name="pay", arguments={"amount": 5})


def fold(*events: JournalEvent) -> ThreadState:
    state = ThreadState("t")
    for seq, event in enumerate(events, start=1):
        state.apply(seq, event)
    return state


def turn(
    *calls: ToolCall, text: str = "", tokens: int = 1, started: tuple[str, ...] = ()
) -> ModelTurn:
    return ModelTurn(
        response=ModelResponse(
            message=Message.assistant(text, tool_calls=calls),
            usage=Usage(requests=1, input_tokens=tokens),
        ),
        started=started,
    )


def start(text: str = "hi", run_id: str = "r1") -> UserInput:
    return UserInput(messages=(Message.user(text),), run_id=run_id)


def result(call: ToolCall, content: str = "ok", *, error: bool = False) -> ToolFinished:
    return ToolFinished(
        result=ToolResult(call_id=call.id, name=call.name, content=content, is_error=error)
    )


def decided(call: ToolCall, decision: Decision) -> ApprovalDecided:
    return ApprovalDecided(call_id=call.id, decision=decision, decided_at=datetime.now(UTC))


def test_a_new_thread() -> None:
    state = ThreadState("t")
    assert (state.status, state.seq, state.messages, state.steps) == ("new", 0, [], [])


def test_a_finished_run() -> None:
    state = fold(
        start(),
        turn(A, tokens=3),
        ToolStarted(call=A),
        result(A),
        turn(text="done"),
        RunFinished(output="done"),
    )
    assert state.status == "finished"
    assert state.output == "done"
    assert state.seq == 6
    assert [m.role.value for m in state.messages] == ["user", "assistant", "tool", "assistant"]
    assert [len(s.tool_results) for s in state.steps] == [1, 0]
    assert state.usage == Usage(requests=2, input_tokens=4)
    assert state.iterations == 2
    assert state.open_calls == {} and state.attempts == {}


def test_open_started_pending_and_approved_calls() -> None:
    state = fold(start(), turn(A, B), ApprovalRequested(calls=(B,)), ToolStarted(call=A))
    assert state.status == "paused"
    assert list(state.open_calls) == ["a", "b"]
    assert list(state.pending) == ["b"]
    assert state.attempts == {"a": 1}
    state.apply(5, result(A))
    assert state.status == "paused"  # b still waits
    edited = Decision.approve({"amount": 2}, actor="ann")
    state.apply(6, decided(B, edited))
    assert state.status == "running"
    assert state.pending == {}
    assert state.approved["b"].arguments == {"amount": 2}
    [record] = state.steps[0].approvals
    assert (record.outcome, record.edited_arguments, record.actor) == (
        "edited",
        {"amount": 2},
        "ann",
    )


def test_calls_started_with_their_turn_fold_as_separate_starts_did() -> None:
    """Format 2 names a turn's first starts in the turn; format 1 wrote `ToolStarted` entries."""
    marked = fold(start(), turn(A, B, started=("a", "b")))
    separate = fold(start(), turn(A, B), ToolStarted(call=A), ToolStarted(call=B))
    for state in (marked, separate):
        assert state.attempts == {"a": 1, "b": 1}
        assert state.tool_calls == 2
        assert list(state.open_calls) == ["a", "b"]
    # A later attempt of a call started with its turn is an entry of its own.
    marked.apply(3, ToolStarted(call=A, attempt=2))
    assert (marked.attempts["a"], marked.tool_calls) == (2, 2)


def test_a_start_naming_no_call_of_its_turn_is_ignored() -> None:
    state = fold(start(), turn(A, started=("a", "elsewhere")))
    assert (state.attempts, state.tool_calls) == ({"a": 1}, 1)
    # The next turn's starts replace the last turn's.
    state.apply(3, result(A))
    state.apply(4, turn(B, started=("b",)))
    assert (state.attempts, state.tool_calls) == ({"b": 1}, 2)


def test_approving_with_the_same_arguments_is_not_an_edit() -> None:
    state = fold(
        start(),
        turn(B),
        ApprovalRequested(calls=(B,)),
        decided(B, Decision.approve(dict(B.arguments))),
    )
    assert state.steps[0].approvals[0].outcome == "approved"


def test_a_rejection_becomes_the_calls_error_result_without_counting_as_a_failure() -> None:
    state = fold(
        start(), turn(B), ApprovalRequested(calls=(B,)), decided(B, Decision.reject("too much"))
    )
    assert state.open_calls == {}
    last = state.messages[-1]
    assert last.is_error and last.tool_call_id == "b" and "too much" in last.content
    assert state.corrections == 0


def test_failed_calls_count_once_per_turn() -> None:
    state = fold(
        start(),
        turn(A, B),
        result(A, "bad", error=True),
        result(B, "bad", error=True),
        turn(A),
        result(A, "bad again", error=True),
    )
    assert state.corrections == 2
    assert state.last_error == "bad again"


def test_corrections_add_feedback_and_cost_an_iteration() -> None:
    state = fold(start(), Correction(error="nested", feedback="Call one tool at a time."))
    assert (state.iterations, state.corrections) == (1, 1)
    assert state.messages[-1].content == "Call one tool at a time."
    assert state.steps[0].note == "[recovered] nested"


def test_duplicate_results_are_ignored() -> None:
    state = fold(start(), turn(A), result(A, "first"), result(A, "second"))
    assert [m.content for m in state.messages if m.role.value == "tool"] == ["first"]


def test_a_new_run_resets_run_scoped_state_but_keeps_the_conversation() -> None:
    state = fold(
        start(),
        turn(A),
        result(A, error=True),
        RunFailed(reason="tool_call_retries", message="x"),
        start("again", "r2"),
    )
    assert state.status == "running"
    assert (state.run_id, state.steps, state.usage, state.corrections) == ("r2", [], Usage(), 0)
    assert state.error is None
    assert len(state.messages) == 4


def test_response_reflects_the_current_run() -> None:
    state = fold(start(), turn(text="hello"), RunFinished(output="hello"))
    response = state.response(latency_ms=2.0)
    assert (response.output, response.thread_id, response.latency_ms) == ("hello", "t", 2.0)
    assert response.metadata == {"run_id": "r1"}
    assert response.messages is not state.messages


def test_usage_read_between_events_follows_each_new_one() -> None:
    # The summed usage is kept once read; an event that adds to it must drop what was kept.
    state = fold(start(), turn(A, tokens=10))
    first = state.usage
    assert state.usage is first  # kept: a run's end reads it twice
    state.apply(3, result(A))
    assert state.usage is first  # a result without usage changes nothing
    state.apply(4, turn(tokens=5))
    assert (state.usage.requests, state.usage.input_tokens) == (2, 15)
    state.apply(5, ToolFinished(result=ToolResult(call_id="x", name="x", content="")))
    state.apply(6, start(run_id="r2"))
    assert state.usage.requests == 0
