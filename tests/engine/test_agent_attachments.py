"""`user_attachments` of `ai_agent` steps: images sent with the first user message.

Inline and linked steps, a static list and an expression's, on SQLite and
PostgreSQL with a scripted model that keeps its requests; bad attachments
refused (when the step runs, and by `attachment_problems` for a static
value, which flow validation reports); a step paused for an approval
resumes from its journal, the images sent once, in the first user message,
and kept there.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from tidemill.engine import AsyncEngine
from tidemill.errors import FlowValidationError, RunFailed
from tidemill.flows import Flow
from tidemill.flows._ai import attachment_problems
from tidemill.llm import Model, ScriptedModel
from tidemill.types import ImageRef, Message, ToolCall
from tidemill.workspace import AsyncWorkspace, MasterKey

pytestmark = pytest.mark.timeout(90)

GIF = "data:image/gif;base64,R0lGODlhAQABAAAAACw="
CHART = "https://example.com/chart.png"
SENT = (
    ImageRef(url=CHART),
    ImageRef(url=GIF, media_type="image/gif"),
)
"""What `[CHART, {url: GIF}]` reaches the model as."""
REFUND = "def main(order_id: str):\n    return 'refunded ' + order_id\n"


def flow(attachments: Any, *, agent: dict[str, Any] | None = None) -> Flow:
    inputs = {"user_message": "What is in these?", "user_attachments": attachments}
    step = {"id": "agent", "ai_agent": agent or {"model": "fake"}, "inputs": inputs}
    return Flow.model_validate({"steps": [step]})


def models(model: Model) -> Callable[[Any], Model]:
    return lambda choice: model


def first_user(model: ScriptedModel, request: int = 0) -> Message:
    (message,) = [m for m in model.requests[request].messages if m.role == "user"]
    return message


async def run(engine: AsyncEngine, model: Model, flow: Flow, inputs: Any = None) -> Any:
    async with engine.worker(poll=0.1, pool_size=1, models=models(model)):
        run_id = await engine.submit(flow, inputs)
        return await engine.wait(run_id, timeout=60)


async def test_an_inline_step_sends_the_images_with_the_user_message(engine: AsyncEngine) -> None:
    model = ScriptedModel(["A chart and a dot."])
    assert await run(engine, model, flow([CHART, {"url": GIF}])) == "A chart and a dot."
    message = first_user(model)
    assert (message.content, message.images) == ("What is in these?", SENT)


async def test_an_expression_gives_the_attachments(engine: AsyncEngine) -> None:
    model = ScriptedModel(["Seen."])
    pictures = [{"url": CHART, "media_type": "image/png"}]
    schema = {"type": "object", "properties": {"pictures": {"type": ["array", "null"]}}}
    bound = Flow.model_validate(
        {
            "inputs": schema,
            "steps": [
                {
                    "id": "agent",
                    "ai_agent": {"model": "fake"},
                    "inputs": {
                        "user_message": "Look.",
                        "user_attachments": {"expr": "flow_input.pictures"},
                    },
                }
            ],
        }
    )
    assert await run(engine, model, bound, {"pictures": pictures}) == "Seen."
    assert first_user(model).images == (ImageRef(url=CHART, media_type="image/png"),)
    # An expression's None (or `[]`) sends no image, and the same text.
    assert await run(engine, model, bound, {"pictures": None}) == "Seen."
    assert first_user(model, 1) == Message.user("Look.")


async def test_a_linked_step_sends_its_own_attachments(
    engine: AsyncEngine, store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if store_url.startswith("postgres"):
        monkeypatch.setenv("TIDEMILL_MASTER_KEY", MasterKey.generate().encoded())
    await engine._open()
    ada = AsyncWorkspace(engine.store, user="ada")
    try:
        await ada.add_folder("x")
        agent = {"model": "fake", "system": "Describe images."}
        await ada.write("f/x/looker", "resource", agent, resource_type="ai_agent")
        model = ScriptedModel(["Described."])
        async with engine.worker(poll=0.1, pool_size=1, models=models(model)):
            linked = flow([CHART, {"url": GIF}], agent={"agent": "f/x/looker"})
            run_id = await engine.submit(linked, run_as="ada")
            assert await engine.wait(run_id, timeout=60) == "Described."
        (system, user) = model.requests[0].messages
        assert system.content == "Describe images."
        assert (user.content, user.images) == ("What is in these?", SENT)
        # The attachments are the step's: the agent resource holds none.
        (recorded,) = await engine.linked_agents(run_id)
        assert "user_attachments" not in str(recorded)
    finally:
        await ada.close()


BAD = [
    ("https://example.com/a.png", None, "not a list"),
    ([42], 0, "neither an image URL"),
    ([CHART, {"media_type": "image/png"}], 1, "neither an image URL"),
    ([{"text": "hello", "name": "notes.txt"}], 0, "text file"),
    (["file:///etc/passwd"], 0, "not an http(s) or data: image URL"),
    ([CHART, "s3://bucket/cat.png"], 1, "stored files"),
    (["data:text/plain;base64,aGk="], 0, "not a base64 image"),
    (["data:image/png,not-base64"], 0, "not a base64 image"),
    (["data:image/png;base64,%%%"], 0, "not a base64 image"),
    ([{"url": CHART, "media_type": "application/pdf"}], 0, "not an image type"),
    ([{"url": CHART, "size": 3}], 0, "unknown keys 'size'"),
]


@pytest.mark.parametrize(("attachments", "index", "says"), BAD)
def test_static_attachments_that_cannot_be_sent_are_problems(
    attachments: Any, index: int | None, says: str
) -> None:
    ((field, message),) = attachment_problems(flow(attachments).steps[0].inputs)
    assert field == "inputs.user_attachments" + ("" if index is None else f"[{index}]")
    assert says in message
    assert attachment_problems(flow({"expr": "flow_input.x"}).steps[0].inputs) == []
    assert attachment_problems(flow([CHART, {"url": GIF}]).steps[0].inputs) == []


@pytest.mark.parametrize("linked", [False, True], ids=["inline", "linked"])
def test_flow_validation_refuses_static_attachments(linked: bool) -> None:
    agent = {"agent": "f/x/looker"} if linked else {"model": "fake"}
    inputs = {"user_message": "hi", "user_attachments": [CHART, "file:///etc/passwd"]}
    with pytest.raises(FlowValidationError) as caught:
        Flow.from_dict({"steps": [{"id": "look", "ai_agent": agent, "inputs": inputs}]})
    assert "step 'look', inputs.user_attachments[1]: " in str(caught.value)
    inputs["user_attachments"] = {"expr": "flow_input.pictures"}  # checked when it runs
    Flow.from_dict({"steps": [{"id": "look", "ai_agent": agent, "inputs": inputs}]})


@pytest.mark.parametrize("bound", [False, True], ids=["static", "expression"])
async def test_bad_attachments_fail_the_step_before_the_model_is_asked(
    engine: AsyncEngine, bound: bool
) -> None:
    model = ScriptedModel(["never"])
    cases = BAD[:1] + BAD[4:5] + BAD[6:7] if not bound else BAD
    async with engine.worker(poll=0.1, pool_size=1, models=models(model)):
        for attachments, index, says in cases:
            if not bound:  # a static value is refused when the flow is read, before any run
                with pytest.raises(FlowValidationError) as refused:
                    await engine.submit(flow(attachments))
                words = str(refused.value)
                assert "inputs.user_attachments" in words and says in words
                continue
            run_id = await engine.submit(flow({"expr": "flow_input.a"}), {"a": attachments})
            with pytest.raises(RunFailed) as caught:
                await engine.wait(run_id, timeout=60)
            error = caught.value.error
            assert error["type"] == "FlowInputError"
            assert (error["input"], error["index"]) == ("user_attachments", index)
            assert error["message"].startswith("step 'agent': ") and says in error["message"]
            assert error["hint"]
            (job,) = await engine.jobs(run_id)
            assert job.attempt == 1  # not retried
    assert model.requests == []


async def test_a_resumed_step_keeps_the_images_and_sends_them_once(engine: AsyncEngine) -> None:
    model = ScriptedModel(
        ["", "Refunded."],
        tool_calls=[[ToolCall(id="r1", name="refund", arguments={"order_id": "A1"})], []],
    )
    tool = {"name": "refund", "script": REFUND, "requires_approval": True}
    paused = flow([CHART, {"url": GIF}], agent={"model": "fake", "tools": [tool]})
    async with engine.worker(poll=0.1, pool_size=1, models=models(model)):
        run_id = await engine.submit(paused)
        for _ in range(1000):
            rows = await engine.approvals(run_id)
            if rows:
                break
            await asyncio.sleep(0.02)
        (row,) = rows
        assert len(model.requests) == 1
    # Another worker resumes the step from its journal.
    async with engine.worker(poll=0.1, pool_size=1, models=models(model)):
        await engine.approve(row.id, actor="alice")
        assert await engine.wait(run_id, timeout=60) == "Refunded."
    assert len(model.requests) == 2
    for request in (0, 1):
        message = first_user(model, request)
        assert (message.content, message.images) == ("What is in these?", SENT)
    transcript = await engine.transcript(run_id, "agent")
    assert [m.images for m in transcript if m.role == "user"] == [SENT]
    assert sum(len(m.images) for m in transcript) == 2
