"""Guardrails on durable journals: what is journaled is redacted, a blocked run's state is kept.

Each test writes through one checkpointer and checks through a new one on
the same SQLite file or PostgreSQL schema (skipped, saying why, when
TIDEMILL_TEST_POSTGRES_URL is not set), as another process would see it.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tidemill import AgentRuntime, GuardrailViolation
from tidemill.agents.checkpoint import Checkpointer, PostgresCheckpointer, SQLiteCheckpointer
from tidemill.agents.guardrails import RuleGuardrail
from tidemill.agents.journal import JournalRecord
from tidemill.llm import ScriptedModel
from tidemill.types import TextDelta

SECRET = "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789ABCD"
EMAIL, PHONE = "ann@example.org", "+1 415 555 0100"


@dataclass
class Store:
    """One durable journal; `open()` gives a new checkpointer on it, as a new process would."""

    name: str
    open: Callable[[], Checkpointer]


@pytest.fixture(params=["sqlite", "postgres"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    if request.param == "sqlite":
        path = tmp_path / "journal.db"
        yield Store("sqlite", lambda: SQLiteCheckpointer(path))
        return
    url = request.getfixturevalue("postgres_url")
    schema = f"tidemill_test_{os.getpid()}_{secrets.token_hex(4)}"
    yield Store("postgres", lambda: PostgresCheckpointer(url, schema=schema))
    dropper = PostgresCheckpointer(url, schema=schema)
    await dropper.drop_schema()
    await dropper.aclose()


def guarded(model: ScriptedModel, action: str, checkpointer: Checkpointer) -> AgentRuntime:
    return AgentRuntime(
        model=model,
        guardrail=RuleGuardrail(on_violation=action),  # type: ignore[arg-type]
        checkpointer=checkpointer,
    )


async def journal_of(store: Store, thread_id: str) -> list[JournalRecord]:
    """The thread's journal, read back through a new checkpointer."""
    reader = store.open()
    try:
        return await reader.read(thread_id)
    finally:
        await reader.aclose()


def dump(records: list[JournalRecord]) -> str:
    return "".join(record.event.model_dump_json() for record in records)


async def test_redacted_input_and_output_are_what_is_journaled(store: Store) -> None:
    writer = store.open()
    model = ScriptedModel([f"Call {PHONE} or mail {EMAIL}."])
    response = await guarded(model, "redact", writer).arun(f"I am {EMAIL}", thread_id="t")
    await writer.aclose()
    assert response.output == "Call [PHONE] or mail [EMAIL]."

    records = await journal_of(store, "t")
    kinds = [r.event.kind for r in records]
    assert kinds[0] == "user_message" and kinds[-1] == "finished"
    assert records[0].event.messages[0].content == "I am [EMAIL]"  # type: ignore[union-attr]
    assert records[-1].event.output == "Call [PHONE] or mail [EMAIL]."  # type: ignore[union-attr]
    text = dump(records)
    assert EMAIL not in text and "555 0100" not in text
    assert "[PHONE]" in text  # the model's turn is journaled redacted, not dropped

    # A new runtime on the store carries the thread on from the redacted history.
    reopened = store.open()
    later = ScriptedModel(["Noted."])
    runtime = guarded(later, "redact", reopened)
    state = await runtime.astate("t")
    assert state is not None and state.status == "finished"
    await runtime.arun("And then?", thread_id="t")
    sent = [m.content for m in later.requests[0].messages]
    assert sent == ["I am [EMAIL]", "Call [PHONE] or mail [EMAIL].", "And then?"]
    await reopened.aclose()


async def test_a_redacted_stream_is_journaled_redacted(store: Store) -> None:
    writer = store.open()
    model = ScriptedModel([f"Write to {EMAIL} today."])
    events = [e async for e in guarded(model, "redact", writer).astream("Contact?", thread_id="s")]
    await writer.aclose()
    assert "".join(e.delta for e in events if isinstance(e, TextDelta)) == "Write to [EMAIL] today."
    records = await journal_of(store, "s")
    assert records[-1].event.output == "Write to [EMAIL] today."  # type: ignore[union-attr]
    assert EMAIL not in dump(records)


async def test_a_blocked_input_stores_nothing_at_all(store: Store) -> None:
    writer = store.open()
    model = ScriptedModel(["never"])
    with pytest.raises(GuardrailViolation) as info:
        await guarded(model, "block", writer).arun(f"my key is {SECRET}", thread_id="b")
    await writer.aclose()
    assert info.value.side == "input" and model.requests == []
    assert await journal_of(store, "b") == []
    reader = store.open()
    try:
        assert "b" not in await reader.threads()
    finally:
        await reader.aclose()


async def test_a_blocked_output_leaves_a_failed_thread_that_goes_on_elsewhere(
    store: Store,
) -> None:
    writer = store.open()
    with pytest.raises(GuardrailViolation) as info:
        await guarded(ScriptedModel([f"Here: {SECRET}"]), "block", writer).arun(
            "Key?", thread_id="t"
        )
    await writer.aclose()
    assert info.value.side == "output"

    records = await journal_of(store, "t")
    assert SECRET not in dump(records)
    assert records[-1].event.kind == "failed"

    # Another runtime, on a new checkpointer, sees the failed run and can go on.
    reopened = store.open()
    model = ScriptedModel(["Sorry, I cannot share that."])
    runtime = guarded(model, "block", reopened)
    state = await runtime.astate("t")
    assert state is not None and state.status == "failed"
    response = await runtime.arun("Then what?", thread_id="t")
    assert response.output == "Sorry, I cannot share that."
    sent = " ".join(m.content for m in model.requests[0].messages)
    assert SECRET not in sent and "Key?" in sent
    state_after = await runtime.astate("t")
    assert state_after is not None and state_after.status == "finished"
    await reopened.aclose()
