"""Test runs of the draft wait for the user's approval; runs are read back to debug."""

from __future__ import annotations

import json

import pytest
from tests.copilot.conftest import Conversation, Shop, Transcript, call, tool_results

from tidemill.copilot import Copilot
from tidemill.errors import AgentInterrupt
from tidemill.types import ToolCall

DRAFT = {
    "summary": "Notify",
    "inputs": {"type": "object", "properties": {"text": {"type": "string"}}},
    "steps": [
        {
            "id": "notify",
            "script": {"path": "f/notify/send_notification"},
            "inputs": {"channel": "ops", "message": {"expr": "flow_input.text"}},
        },
        {"id": "done", "identity": {}, "inputs": {"sent": {"expr": "results.notify.sent"}}},
    ],
}


async def _paused(bot: Copilot, text: str) -> AgentInterrupt:
    with pytest.raises(AgentInterrupt) as paused:
        await bot.ask(text, thread_id="t1")
    return paused.value


async def test_a_test_run_waits_for_approval_then_runs_the_draft(shop: Shop) -> None:
    await shop.bob.save_draft("f/notify/ping", "flow", DRAFT)
    model = Conversation(
        [call("test_run_flow", inputs={"text": "hi"})],
        lambda t: f"Run {t.last('test_run_flow')['status']}",
    ).model()
    bot = Copilot(shop.bob, model=model, engine=shop.engine, flow="f/notify/ping")
    pause = await _paused(bot, "try it")
    assert [c.name for c in pause.pending] == ["test_run_flow"]
    assert await shop.engine.runs() == []  # nothing ran before the approval

    async with shop.engine.worker(poll=0.05):
        reply = await bot.decide("t1", approved=True)
    assert reply.output == "Run succeeded"
    (result,) = tool_results(model)
    view = json.loads(result.content)
    assert view["result"] == {"sent": True}
    assert [s["step"] for s in view["steps"]] == ["notify", "done"]
    assert view["steps"][0]["result"]["message"] == "hi"
    assert "notify ops" in view["logs"]
    (run,) = await shop.engine.runs()
    assert run.run_as == "bob"
    assert run.source is not None and run.source["draft"] is True
    assert run.source["path"] == "f/notify/ping"


async def test_a_test_run_not_approved_does_not_run(shop: Shop) -> None:
    await shop.bob.save_draft("f/notify/ping", "flow", DRAFT)
    model = Conversation(
        [call("test_run_step", step_id="notify", inputs={"channel": "a", "message": "b"})],
        "Understood.",
    ).model()
    bot = Copilot(shop.bob, model=model, engine=shop.engine, flow="f/notify/ping")
    await _paused(bot, "try the step")
    reply = await bot.decide("t1", approved=False)
    assert reply.output == "Understood."
    (result,) = tool_results(model)
    assert result.is_error
    assert "did not approve" in result.content
    assert await shop.engine.runs() == []


async def test_a_single_step_runs_as_a_one_step_flow_with_the_inputs_given(shop: Shop) -> None:
    await shop.bob.save_draft("f/notify/ping", "flow", DRAFT)
    model = Conversation(
        [call("test_run_step", step_id="notify", inputs={"channel": "sms", "message": "yo"})],
        [call("test_run_step", step_id="nope", inputs={})],
        "done",
    ).model()
    bot = Copilot(shop.bob, model=model, engine=shop.engine, flow="f/notify/ping")
    await _paused(bot, "try the step")
    async with shop.engine.worker(poll=0.05):
        with pytest.raises(AgentInterrupt):
            await bot.decide("t1", approved=True)
        await bot.decide("t1", approved=True)
    ran, missing = tool_results(model)
    view = json.loads(ran.content)
    assert view["status"] == "succeeded"
    assert view["step"] == "notify"
    assert view["result"] == {"sent": True, "channel": "sms", "message": "yo"}
    assert [s["step"] for s in view["steps"]] == ["notify"]
    assert missing.is_error and "No step 'nope'" in missing.content


def _debug(transcript: Transcript) -> list[ToolCall]:
    (run,) = transcript.last("list_runs")
    return [call("get_run", run_id=run["run_id"])]


async def test_runs_are_listed_and_read_back_with_their_step_errors(shop: Shop) -> None:
    failing = {
        "summary": "Fails",
        "steps": [{"id": "boom", "script": "def main():\n    raise ValueError('no invoice')\n"}],
    }
    await shop.bob.save_draft("f/billing/broken", "flow", failing)
    async with shop.engine.worker(poll=0.05):
        run_id = await shop.engine.submit_path(shop.bob, "f/billing/broken", {}, draft=True)
        with pytest.raises(Exception, match="no invoice"):
            await shop.engine.wait(run_id, timeout=30)
    # ada's run of another flow is not bob's to see.
    async with shop.engine.worker(poll=0.05):
        theirs = await shop.engine.submit_path(shop.ada, "f/private/payroll", {})
        await shop.engine.wait(theirs, timeout=30)
    model = Conversation(
        [call("list_runs")], _debug, [call("get_run", run_id=theirs)], "done"
    ).model()
    bot = Copilot(shop.bob, model=model, engine=shop.engine, flow="f/billing/broken")
    await bot.ask("why does it fail?")
    listed, read, refused = tool_results(model)
    (row,) = json.loads(listed.content)
    assert row["run_id"] == run_id and row["status"] == "failed" and row["draft"] is True
    view = json.loads(read.content)
    assert view["error"]["step"] == "boom"
    assert "no invoice" in view["steps"][0]["error"]["message"]
    assert refused.is_error and "No run" in refused.content
    assert "payroll" not in refused.content


async def test_without_an_engine_test_runs_are_refused(shop: Shop) -> None:
    await shop.bob.save_draft("f/notify/ping", "flow", DRAFT)
    model = Conversation([call("test_run_flow", inputs={})], [call("list_runs")], "ok").model()
    bot = Copilot(shop.bob, model=model, flow="f/notify/ping")
    await _paused(bot, "run it")
    await bot.decide("t1", approved=True)
    ran, listed = tool_results(model)
    assert ran.is_error and "no engine" in ran.content
    assert listed.is_error
