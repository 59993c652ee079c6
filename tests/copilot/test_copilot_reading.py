"""The copilot's reading tools, called by a scripted model through the agent runtime."""

from __future__ import annotations

import json

from tests.copilot.conftest import Conversation, Shop, call, tool_results

from tidemill.copilot import Copilot
from tidemill.types import Message, ToolCall


async def _ask(shop: Shop, calls: list[ToolCall], *, user: str = "ada") -> list[Message]:
    """Let the copilot (as `user`) make `calls` in one turn; the results it was sent."""
    model = Conversation(calls, "done").model()
    bot = Copilot(shop.ada if user == "ada" else shop.bob, model=model, engine=shop.engine)
    reply = await bot.ask("look around")
    assert reply.output == "done"
    return tool_results(model)


async def test_search_flows_and_scripts_answer_path_and_summary_best_first(shop: Shop) -> None:
    results = await _ask(
        shop, [call("search_flows", query="procss invoice"), call("search_scripts", query="notify")]
    )
    flows, scripts = results
    assert flows.name == "search_flows" and not flows.is_error
    found = json.loads(flows.content)
    assert found[0] == {"path": "f/billing/process_invoice", "summary": "Process an invoice"}
    assert all(set(hit) == {"path", "summary"} for hit in found)
    assert "f/billing/load_invoice" not in flows.content  # a script, not a flow
    assert json.loads(scripts.content)[0]["path"] == "f/notify/send_notification"


async def test_search_only_finds_what_the_user_may_read(shop: Shop) -> None:
    (ada_hits,) = await _ask(shop, [call("search_flows", query="payroll")])
    (bob_hits,) = await _ask(shop, [call("search_flows", query="payroll")], user="bob")
    assert [h["path"] for h in json.loads(ada_hits.content)] == ["f/private/payroll"]
    assert json.loads(bob_hits.content) == []


async def test_flow_details_show_the_input_schema_and_the_step_structure(shop: Shop) -> None:
    results = await _ask(shop, [call("get_flow_details", path="f/billing/process_invoice")])
    (result,) = results
    details = json.loads(result.content)
    assert details["summary"] == "Process an invoice"
    assert details["description"] == "Load an invoice and compute what is due."
    assert details["inputs"]["required"] == ["invoice_id"]
    assert details["steps"] == [
        {
            "id": "load",
            "summary": "Load the invoice",
            "kind": "script",
            "script": "f/billing/load_invoice",
        },
        {"id": "due", "summary": "", "kind": "script", "inline": True},
    ]


async def test_script_details_show_the_schema_and_the_code_cut_past_the_limit(shop: Shop) -> None:
    model = Conversation(
        [call("get_script_details", path="f/notify/send_notification")], "done"
    ).model()
    bot = Copilot(shop.ada, model=model)
    bot.session.max_code_chars = 40
    await bot.ask("read it")
    (result,) = tool_results(model)
    details = json.loads(result.content)
    assert details["summary"] == "Send a notification message to a channel (email, Slack, SMS)."
    assert details["schema"]["required"] == ["channel", "message"]
    assert len(details["code"]) == 40
    assert "only the first 40 are shown" in details["truncated"]


async def test_reading_a_path_the_user_may_not_read_is_refused_as_missing(shop: Shop) -> None:
    results = await _ask(
        shop,
        [
            call("get_flow_details", path="f/private/payroll"),
            call("get_script_details", path="f/private/payroll"),
            call("get_flow_details", path="f/billing/load_invoice"),
        ],
        user="bob",
    )
    private_flow, private_script, wrong_kind = results
    for refused in (private_flow, private_script):
        assert refused.is_error
        assert "f/private/payroll" in json.loads(refused.content)["error"]
        assert "Run the payroll" not in refused.content
    assert wrong_kind.is_error
    assert (
        json.loads(wrong_kind.content)["error"] == "f/billing/load_invoice is a script, not a flow."
    )


async def test_resource_types_come_with_schemas_and_resource_paths_only(shop: Shop) -> None:
    await shop.ada.write(
        "f/billing/crm",
        "resource_type",
        {"type": "object", "properties": {"url": {"type": "string"}}},
        summary="A CRM's base URL",
    )
    results = await _ask(
        shop, [call("resource_type", query="openai"), call("resource_type", query="crm")]
    )
    openai, crm = results
    types = {t["name"]: t for t in json.loads(openai.content)}
    assert types["openai"]["schema"]["properties"]["api_key"]["writeOnly"] is True
    assert types["openai"]["resources"] == ["f/billing/stripe"]
    assert "$var:" not in openai.content  # the resource's value is never shown
    custom = json.loads(crm.content)
    assert custom[0]["name"] == "f/billing/crm"
    assert custom[0]["schema"]["properties"] == {"url": {"type": "string"}}
