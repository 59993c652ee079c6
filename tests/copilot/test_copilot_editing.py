"""Proposing flows: lint, set_flow and patch_flow save the user's draft (never deploy) or refuse."""

from __future__ import annotations

import json

import pytest
from tests.copilot.conftest import Conversation, Shop, Transcript, Turn, call, tool_results

from tidemill.copilot import Copilot
from tidemill.errors import ItemNotFound
from tidemill.types import Message, ToolCall

GOOD = """\
summary: Greet and notify
steps:
  - id: notify
    script: {path: f/notify/send_notification}
    inputs: {channel: ops, message: hello}
"""
BAD = """\
summary: Broken
steps:
  - id: notify
    script: {path: f/notify/send_notification}
    inputs: {channel: ops, message: hello}
  - id: after
    identity: {}
    needs: [notfy]
"""


async def _turns(
    shop: Shop, *turns: Turn | list[ToolCall], flow: str | None = None, user: str = "bob"
) -> list[Message]:
    model = Conversation(*turns, "done").model()
    ws = shop.bob if user == "bob" else shop.ada
    bot = Copilot(ws, model=model, engine=shop.engine, flow=flow)
    await bot.ask("change it")
    return tool_results(model)


async def test_lint_answers_the_validators_problems_and_saves_nothing(shop: Shop) -> None:
    good, bad = await _turns(
        shop,
        [call("get_lint_errors", flow=GOOD), call("get_lint_errors", flow=BAD)],
        flow="f/billing/new_flow",
    )
    assert json.loads(good.content) == {"path": "f/billing/new_flow", "valid": True, "problems": []}
    found = json.loads(bad.content)
    assert found["valid"] is False
    assert found["problems"][0]["step"] == "after"
    assert "notfy" in found["problems"][0]["message"]
    with pytest.raises(ItemNotFound):
        await shop.bob.draft("f/billing/new_flow")


async def test_set_flow_saves_a_valid_flow_as_the_users_draft_and_shows_the_diff(
    shop: Shop,
) -> None:
    (result,) = await _turns(shop, [call("set_flow", flow=GOOD, path="f/billing/greet")])
    answer = json.loads(result.content)
    assert not result.is_error
    assert answer["saved"] == "as your draft (not deployed)"
    assert "+- id: notify" in answer["diff"]
    draft = await shop.bob.draft("f/billing/greet")
    assert draft.value["steps"][0]["script"] == {"path": "f/notify/send_notification"}
    with pytest.raises(ItemNotFound):  # nothing deployed
        await shop.bob.get("f/billing/greet")
    with pytest.raises(ItemNotFound):  # and it is bob's draft, nobody else's
        await shop.ada.draft("f/billing/greet")


async def test_a_flow_that_does_not_validate_is_refused_with_its_problems(shop: Shop) -> None:
    (result,) = await _turns(shop, [call("set_flow", flow=BAD, path="f/billing/greet")])
    assert result.is_error
    refusal = json.loads(result.content)
    assert refusal["error"].startswith("The flow does not validate; nothing was saved")
    assert refusal["problems"][0]["step"] == "after"
    with pytest.raises(ItemNotFound):
        await shop.bob.draft("f/billing/greet")


async def test_set_flow_refuses_yaml_that_does_not_parse_and_a_flow_without_a_path(
    shop: Shop,
) -> None:
    broken, nowhere = await _turns(
        shop, [call("set_flow", flow="steps: [", path="f/billing/x"), call("set_flow", flow=GOOD)]
    )
    assert broken.is_error and "not valid YAML" in json.loads(broken.content)["error"]
    assert nowhere.is_error and "Pass `path`" in json.loads(nowhere.content)["hint"]


async def test_proposing_where_the_user_may_not_write_is_refused(shop: Shop) -> None:
    (result,) = await _turns(shop, [call("set_flow", flow=GOOD, path="f/private/payroll")])
    assert result.is_error
    assert "f/private/payroll" in json.loads(result.content)["error"]
    assert (await shop.ada.get("f/private/payroll")).summary == "Run the payroll"


def _rename(transcript: Transcript) -> list[ToolCall]:
    shown = transcript.last("show_flow")
    assert shown["state"] == "deployed"
    assert "summary: Refund an order" in shown["yaml"]
    return [call("patch_flow", old="summary: Refund an order", new="summary: Refund an order fast")]


async def test_patch_flow_replaces_one_exact_piece_of_the_current_yaml(shop: Shop) -> None:
    _, patched, again = await _turns(
        shop,
        [call("show_flow")],
        _rename,
        [call("show_flow")],
        flow="f/billing/refund",
    )
    answer = json.loads(patched.content)
    assert "-summary: Refund an order\n+summary: Refund an order fast" in answer["diff"]
    assert json.loads(again.content)["state"] == "your draft"
    assert (await shop.bob.draft("f/billing/refund")).summary == "Refund an order fast"
    assert (await shop.bob.get("f/billing/refund")).summary == "Refund an order"  # deployed


async def test_a_patch_whose_piece_is_missing_or_not_unique_changes_nothing(shop: Shop) -> None:
    missing, twice, empty = await _turns(
        shop,
        [
            call("patch_flow", old="summary: Nothing like it", new="x"),
            call("patch_flow", old="flow_input.order_id", new="flow_input.id"),
            call("patch_flow", old="", new="x"),
        ],
        flow="f/billing/refund",
    )
    assert "is not in the flow's YAML" in json.loads(missing.content)["error"]
    assert "is 2 times in the flow's YAML" in json.loads(twice.content)["error"]
    assert empty.is_error
    with pytest.raises(ItemNotFound):
        await shop.bob.draft("f/billing/refund")


async def test_a_patch_that_breaks_the_flow_is_refused_and_the_draft_kept(shop: Shop) -> None:
    first, broken = await _turns(
        shop,
        [
            call("patch_flow", old="summary: Refund an order", new="summary: Refund v2"),
            call("patch_flow", old="id: lookup", new="id: look up"),
        ],
        flow="f/billing/refund",
    )
    assert not first.is_error
    assert broken.is_error and json.loads(broken.content)["problems"]
    assert (await shop.bob.draft("f/billing/refund")).summary == "Refund v2"
