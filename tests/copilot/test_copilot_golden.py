"""Golden tasks, scripted: the copilot reuses what the workspace has and leaves a valid draft.

Each scripted model decides its calls from what the tools answered, as a
real model would: the paths come from the searches, the inputs from the
schemas that `get_flow_details` and `get_script_details` read.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from tests.copilot.conftest import Conversation, Shop, Transcript, call, tool_results

from tidemill.copilot import Copilot
from tidemill.errors import AgentInterrupt
from tidemill.types import ToolCall

NEW = "f/billing/invoice_then_notify"


def _bind(schema: dict[str, Any], values: dict[str, Any]) -> dict[str, Any]:
    """Inputs for every required property of `schema`, from `values`."""
    return {name: values[name] for name in schema.get("required", [])}


def _details(transcript: Transcript) -> list[ToolCall]:
    flow = transcript.last("search_flows")[0]["path"]
    script = transcript.last("search_scripts")[0]["path"]
    return [call("get_flow_details", path=flow), call("get_script_details", path=script)]


def _compose(transcript: Transcript) -> list[ToolCall]:
    flow = transcript.last("get_flow_details")
    script = transcript.last("get_script_details")
    document = {
        "summary": "Process an invoice, then send a notification",
        "inputs": flow["inputs"],
        "steps": [
            {
                "id": "process",
                "flow": flow["path"],
                "inputs": _bind(flow["inputs"], {"invoice_id": {"expr": "flow_input.invoice_id"}}),
            },
            {
                "id": "notify",
                "script": {"path": script["path"]},
                "inputs": _bind(
                    script["schema"],
                    {"channel": "billing", "message": {"expr": "'Invoice processed'"}},
                ),
            },
        ],
    }
    return [call("set_flow", flow=yaml.safe_dump(document, sort_keys=False), path=NEW)]


async def test_send_a_notification_after_processing_an_invoice_reuses_both(shop: Shop) -> None:
    model = Conversation(
        [call("search_flows", query="process invoice")],
        [call("search_scripts", query="send notification")],
        _details,
        _compose,
        lambda t: "Saved a draft that reuses f/billing/process_invoice.",
    ).model()
    bot = Copilot(shop.bob, model=model, engine=shop.engine)
    await bot.ask("send a notification after processing an invoice")

    order = [m.name for m in tool_results(model)]
    assert order.index("search_flows") < order.index("search_scripts") < order.index("set_flow")
    draft = await shop.bob.draft(NEW)
    process, notify = draft.value["steps"]
    assert process["flow"] == "f/billing/process_invoice"
    assert process["inputs"] == {"invoice_id": {"expr": "flow_input.invoice_id"}}
    assert notify["script"] == {"path": "f/notify/send_notification"}
    assert set(notify["inputs"]) == {"channel", "message"}
    assert await shop.bob.lint_flow(NEW, draft.value) == []
    assert "search_flows" in model.requests[0].messages[0].content  # the prompt says so

    async with shop.engine.worker(poll=0.05):
        run_id = await shop.engine.submit_path(shop.bob, NEW, {"invoice_id": "INV-7"}, draft=True)
        assert await shop.engine.wait(run_id, timeout=30) == {
            "sent": True,
            "channel": "billing",
            "message": "Invoice processed",
        }


def _insert_approval(transcript: Transcript) -> list[ToolCall]:
    text = transcript.last("show_flow")["yaml"]
    line = next(x for x in text.splitlines() if x.strip() == "- id: refund")
    indent = line[: line.index("-")]
    approval = (
        f"{indent}- id: approve_refund\n"
        f"{indent}  summary: A person approves the refund\n"
        f"{indent}  approval:\n"
        f"{indent}    message: Refund this order?\n"
        f"{indent}    timeout: 3d\n"
    )
    return [call("patch_flow", old=line + "\n", new=approval + line + "\n")]


async def test_add_an_approval_before_the_refund_gives_a_resumable_approval(shop: Shop) -> None:
    model = Conversation(
        [call("show_flow")],
        _insert_approval,
        [call("test_run_flow", inputs={"order_id": "A1", "amount": 30})],
        lambda t: f"The run is {t.last('test_run_flow')['status']} for the approval.",
    ).model()
    bot = Copilot(shop.bob, model=model, engine=shop.engine, flow="f/billing/refund")
    bot.session.run_timeout = 1.0
    with pytest.raises(AgentInterrupt):
        await bot.ask("add an approval before the refund", thread_id="r")

    draft = await shop.bob.draft("f/billing/refund")
    assert [s["id"] for s in draft.value["steps"]] == ["lookup", "approve_refund", "refund"]
    assert draft.value["steps"][1]["approval"]["message"] == "Refund this order?"

    async with shop.engine.worker(poll=0.05):
        reply = await bot.decide("r", approved=True)
        assert reply.output == "The run is waiting for the approval."
        (run,) = await shop.engine.runs()
        (pending,) = await shop.engine.approvals(run.id)
        await shop.engine.approve(pending.id, actor="ada")
        assert await shop.engine.wait(run.id, timeout=30) == {"refunded": "A1", "amount": 30}
