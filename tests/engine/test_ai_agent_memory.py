"""Scoped memory of `ai_agent` steps, on SQLite and PostgreSQL, with scripted models.

Recall is one untrusted user-role message before the new user message; memory
is kept per (memory id, flow/step) and written only with a step's success.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from tidemill.engine import AsyncEngine
from tidemill.engine._memory import RECALL_HEADER, memory_uuid
from tidemill.engine._models import ModelChoice
from tidemill.errors import RunFailed
from tidemill.flows import Flow
from tidemill.llm import Model, ModelRequest, ScriptedModel
from tidemill.types import Message, ToolCall

pytestmark = pytest.mark.timeout(90)

SYSTEM = "You answer questions."
REFUND = "def main(order_id: str):\n    return f'refunded {order_id}'\n"


def answers() -> ScriptedModel:
    """Answers every request with `re: <last user message>`."""

    def answer(request: ModelRequest) -> str:
        last = [m for m in request.messages if m.role == "user"][-1]
        return f"re: {last.content}"

    return ScriptedModel(handler=answer)


def memory_flow(
    *, turns: int = 10, step_id: str = "agent", name: str = "support", **agent: Any
) -> Flow:
    body = {
        "id": step_id,
        "ai_agent": {"model": "fake", "system": SYSTEM, "memory": {"turns": turns}, **agent},
        "inputs": {
            "user_message": {"expr": "flow_input.text"},
            "memory_id": {"expr": "flow_input.memory"},
        },
    }
    return Flow.model_validate({"name": name, "steps": [body]})


def resolver(model: Model) -> Callable[[ModelChoice], Model]:
    return lambda choice: model


async def ask(engine: AsyncEngine, flow: Flow, model: Model, text: str, memory: Any = None) -> Any:
    inputs = {"text": text, "memory": memory}
    async with engine.worker(poll=0.1, pool_size=1, models=resolver(model)):
        run_id = await engine.submit(flow, inputs)
        return await engine.wait(run_id, timeout=60)


def recalled(request: ModelRequest) -> list[Message]:
    """The recalled-memory messages of a request."""
    return [m for m in request.messages if RECALL_HEADER in (m.content or "")]


async def stored(engine: AsyncEngine, store_url: str) -> list[tuple[Any, ...]]:
    from tidemill.store import Store, StoreURL

    store = Store(StoreURL.parse(store_url))
    try:
        return await store.transact(
            lambda tx: tx.all(
                "SELECT memory_id, step_key, seq, role, content FROM tm_agent_memory "
                "ORDER BY memory_id, step_key, seq"
            )
        )
    finally:
        await store.close()


async def test_a_second_run_recalls_the_first_as_untrusted_user_context(
    engine: AsyncEngine, store_url: str
) -> None:
    model = answers()
    flow = memory_flow()
    assert await ask(engine, flow, model, "My name is Ada.", "c-1") == "re: My name is Ada."
    (first,) = model.requests
    assert recalled(first) == []
    assert await ask(engine, flow, model, "What is my name?", "c-1") == "re: What is my name?"
    second = model.requests[1]
    system, memory, user = second.messages
    assert system == Message.system(SYSTEM)
    assert "My name is Ada." not in (system.content or "")
    assert memory.role == "user"
    assert (memory.content or "").startswith(RECALL_HEADER)
    assert "[user]: My name is Ada." in (memory.content or "")
    assert "[assistant]: re: My name is Ada." in (memory.content or "")
    assert user == Message.user("What is my name?")
    assert not any(m.role == "assistant" for m in second.messages)
    c1 = memory_uuid("c-1", scope="flow:support")
    assert await stored(engine, store_url) == [
        (c1, "agent", 1, "user", "My name is Ada."),
        (c1, "agent", 2, "assistant", "re: My name is Ada."),
        (c1, "agent", 3, "user", "What is my name?"),
        (c1, "agent", 4, "assistant", "re: What is my name?"),
    ]


async def test_another_memory_id_another_step_or_flow_recall_nothing(engine: AsyncEngine) -> None:
    model = answers()
    await ask(engine, memory_flow(), model, "secret: 42", "c-1")
    await ask(engine, memory_flow(), model, "hello", "c-2")
    await ask(engine, memory_flow(step_id="other"), model, "hello", "c-1")
    await ask(engine, memory_flow(name="billing"), model, "hello", "c-1")
    assert [recalled(request) for request in model.requests[1:]] == [[], [], []]
    await ask(engine, memory_flow(), model, "again", "c-1")
    (memory,) = recalled(model.requests[-1])
    assert "secret: 42" in (memory.content or "") and "hello" not in (memory.content or "")


async def test_no_memory_id_or_no_memory_setting_stores_nothing(
    engine: AsyncEngine, store_url: str
) -> None:
    model = answers()
    await ask(engine, memory_flow(), model, "first")
    await ask(engine, memory_flow(), model, "second", "")
    plain = Flow.model_validate(
        {"name": "support", "steps": [{"id": "agent", "ai_agent": {"model": "fake"},
         "inputs": {"user_message": "hi", "memory_id": "c-1"}}]}
    )  # fmt: skip
    await ask(engine, plain, model, "third")
    assert await stored(engine, store_url) == []
    await ask(engine, memory_flow(), model, "fourth", "c-1")
    assert recalled(model.requests[-1]) == []


async def test_a_failed_step_stores_nothing(engine: AsyncEngine, store_url: str) -> None:
    model = ScriptedModel(["", "never"], tool_calls=[[ToolCall(id="c1", name="x", arguments={})]])
    with pytest.raises(RunFailed) as caught:
        await ask(engine, memory_flow(max_iterations=1), model, "loop", "c-1")
    assert caught.value.error["type"] == "LimitExceeded"
    assert await stored(engine, store_url) == []


async def test_turns_caps_what_is_recalled(engine: AsyncEngine) -> None:
    model = answers()
    flow = memory_flow(turns=2)
    for text in ("one", "two", "three"):
        await ask(engine, flow, model, text, "c-1")
    await ask(engine, flow, model, "four", "c-1")
    (memory,) = recalled(model.requests[-1])
    content = memory.content or ""
    assert "[user]: one" not in content
    assert content.index("[user]: two") < content.index("[assistant]: re: two")
    assert content.index("[assistant]: re: two") < content.index("[user]: three")


async def test_a_resume_after_an_approval_does_not_recall_twice(
    engine: AsyncEngine, store_url: str
) -> None:
    model = answers()
    await ask(engine, memory_flow(), model, "remember A1", "c-1")
    refund = {"name": "refund", "script": REFUND, "requires_approval": True}
    scripted = ScriptedModel(
        ["", "Refunded."],
        tool_calls=[[ToolCall(id="r1", name="refund", arguments={"order_id": "A1"})], []],
    )
    flow = memory_flow(tools=[refund])
    async with engine.worker(poll=0.1, pool_size=1, models=resolver(scripted)):
        run_id = await engine.submit(flow, {"text": "Refund it", "memory": "c-1"})
        for _ in range(1000):
            rows = await engine.approvals(run_id)
            if rows:
                break
            await asyncio.sleep(0.02)
        (row,) = rows
        await engine.approve(row.id, actor="alice")
        assert await engine.wait(run_id, timeout=60) == "Refunded."
    first, second = scripted.requests
    assert len(recalled(first)) == 1 and len(recalled(second)) == 1
    assert [m.role for m in second.messages[:3]] == ["system", "user", "user"]
    rows = await stored(engine, store_url)
    assert [(r[2], r[3], r[4]) for r in rows][-2:] == [
        (3, "user", "Refund it"),
        (4, "assistant", "Refunded."),
    ]
