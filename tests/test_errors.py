from __future__ import annotations

import pytest

from tidemill.errors import (
    AgentInterrupt,
    JournalConflict,
    MaxIterationsExceeded,
    MissingDependencyError,
    TidemillError,
    ToolArgumentsError,
)
from tidemill.types import AgentResponse, ToolCall


def test_message_hint_and_context() -> None:
    error = TidemillError("It broke.", hint="Fix it.", context={"n": 1})
    assert str(error) == "It broke. Hint: Fix it."
    assert (error.message, error.hint, error.context) == ("It broke.", "Fix it.", {"n": 1})
    assert str(TidemillError("Plain.")) == "Plain."


def test_missing_dependency_names_the_extra() -> None:
    error = MissingDependencyError("psycopg", extra="postgres", feature="PostgreSQL")
    assert "pip install 'tidemill[postgres]'" in str(error)
    assert (error.package, error.extra) == ("psycopg", "postgres")


def test_interrupt_lists_the_pending_calls() -> None:
    call = ToolCall(id="c1", name="pay")
    error = AgentInterrupt(thread_id="t", pending=[call])
    assert "pay (c1)" in str(error) and "resume('t'" in str(error)
    assert error.context == {"thread_id": "t", "pending": ["c1"]}


def test_run_errors_carry_the_partial_response() -> None:
    partial = AgentResponse(output=None, thread_id="t")
    error = MaxIterationsExceeded(3, response=partial)
    assert error.response is partial and error.value == 3
    assert error.limit == "max_iterations"


def test_journal_conflict_and_tool_arguments() -> None:
    conflict = JournalConflict("t", 4)
    assert (conflict.thread_id, conflict.expected_seq) == ("t", 4)
    bad = ToolArgumentsError("add", ["a: required", "b: not an int"])
    assert str(bad) == "Invalid arguments for tool 'add': a: required; b: not an int"


def test_errors_are_catchable_by_the_base() -> None:
    with pytest.raises(TidemillError):
        raise JournalConflict("t", 0)


def test_errors_are_named_by_their_public_module() -> None:
    # The classes live in private modules; tracebacks and reprs still say `tidemill.errors.X`.
    import importlib
    import traceback

    import tidemill.errors as errors

    for symbol in errors.__all__:
        cls = getattr(errors, symbol)
        assert cls.__module__ == "tidemill.errors", symbol
        assert getattr(importlib.import_module(cls.__module__), cls.__qualname__) is cls
    error = errors.RunNotFound("No run 'r1'.")
    assert traceback.format_exception_only(error) == ["tidemill.errors.RunNotFound: No run 'r1'.\n"]


def test_the_rate_limit_hint_names_a_setting_models_accept() -> None:
    import tidemill
    from tidemill.errors import ConfigurationError, RateLimitError
    from tidemill.llm import RetryPolicy

    hint = RateLimitError("Slow down.", provider="openai").hint or ""
    assert "retry=RetryPolicy(max_retries=...)" in hint
    accepted = tidemill.agent().llm(
        "openai:gpt-4o-mini", api_key="sk-test", retry=RetryPolicy(max_retries=1)
    )
    assert accepted.describe()
    with pytest.raises(ConfigurationError):
        tidemill.agent().llm("openai:gpt-4o-mini", api_key="sk-test", max_retries=1).describe()
