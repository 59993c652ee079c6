"""A secret variable's value never reaches the model, through any of the copilot's tools."""

from __future__ import annotations

import pytest
from tests.copilot.conftest import Conversation, Shop, Transcript, call, sent_text, tool_results

from tidemill.copilot import TOOLS, Copilot
from tidemill.errors import AgentInterrupt
from tidemill.types import ToolCall


def _same_flow(transcript: Transcript) -> list[ToolCall]:
    text = transcript.last("show_flow")["yaml"]
    return [
        call("get_lint_errors", flow=text),
        call("set_flow", flow=text),
        call("patch_flow", old="amount: 5", new="amount: 6"),
    ]


def _read_back(transcript: Transcript) -> list[ToolCall]:
    runs = transcript.last("list_runs")
    return [call("get_run", run_id=run["run_id"]) for run in runs]


async def test_no_tool_shows_the_model_a_secret_value(shop: Shop) -> None:
    step_inputs = {"token": "$var:f/billing/stripe_key", "amount": 1}
    turns = [
        [
            call("search_flows", query="charge card"),
            call("search_scripts", query="charge"),
            call("get_flow_details", path="f/billing/charge"),
            call("get_script_details", path="f/billing/charge_card"),
            call("resource_type", query="openai"),
            call("show_flow"),
        ],
        _same_flow,
        [call("test_run_flow", inputs={})],
        [call("test_run_step", step_id="charge", inputs=step_inputs)],
        [call("list_runs")],
        _read_back,
        "done",
    ]
    model = Conversation(*turns).model()
    bot = Copilot(shop.bob, model=model, engine=shop.engine, flow="f/billing/charge")
    async with shop.engine.worker(poll=0.05):
        with pytest.raises(AgentInterrupt):
            await bot.ask("check the charge flow", thread_id="s")
        with pytest.raises(AgentInterrupt):
            await bot.decide("s", approved=True)
        await bot.decide("s", approved=True)

    called = {m.name for m in tool_results(model)}
    assert called == {t.name for t in TOOLS}  # every tool had its chance
    assert not [m.name for m in tool_results(model) if m.is_error]
    runs = await shop.engine.runs()
    assert len(runs) == 2 and all(r.status == "succeeded" for r in runs)
    # The runs did read the secret: the script printed it and returned it ...
    logs = [await run_logs(shop, r.id) for r in runs]
    assert all("charging with" in text for text in logs)
    # ... and none of it reached the model.
    assert shop.secret not in sent_text(model)
    assert "$var:f/billing/stripe_key" in sent_text(model)  # the reference, by path, is fine


async def run_logs(shop: Shop, run_id: str) -> str:
    return "".join(row.body for row in await shop.engine.logs(run_id))
