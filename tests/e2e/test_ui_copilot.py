"""The copilot's panel in the flow editor, in a real browser, as ada.

The server's copilot is scripted (`tests/e2e/scripted_server.py`): "add ..."
searches the flows and proposes `COPILOT_PROPOSAL` with `set_flow`; "test ..."
asks for a test run of the draft, which waits for ada's approval. The module
works on its own flow, `f/demo/cp_flow`.
"""

from __future__ import annotations

from typing import Any

import pytest
from tests.e2e.axe import assert_accessible
from tests.e2e.conftest import UiServer, screenshot, sign_in
from tests.e2e.scripted_server import COPILOT_PROPOSAL

pytest.importorskip("playwright")
from playwright.sync_api import expect

FLOW = "f/demo/cp_flow"
GREET_ONCE = {
    "summary": "Greet once",
    "inputs": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
    "steps": [
        {
            "id": "greet",
            "script": {"path": "f/demo/greet"},
            "inputs": {"name": {"expr": "flow_input.name"}},
        }
    ],
}
TURN = 30_000


@pytest.fixture(scope="module")
def seeded(ui_server: UiServer) -> None:
    ui_server.ws.write(FLOW, "flow", GREET_ONCE)


def test_the_copilot_proposes_a_change_and_test_runs_it_once_approved(
    page: Any, ui_server: UiServer, seeded: None, page_errors: list[str]
) -> None:
    sign_in(page)
    page.goto(f"/edit/{FLOW}")
    expect(page.get_by_role("heading", level=1)).to_have_text(f"Edit {FLOW}")
    yaml_view = page.get_by_label(f"Flow {FLOW} (YAML)")
    expect(yaml_view).to_contain_text("id: greet")
    expect(yaml_view).not_to_contain_text("id: again")

    page.get_by_role("button", name="Copilot").click()
    panel = page.get_by_role("complementary", name="Copilot")
    expect(panel).to_be_visible()
    box = panel.get_by_label("Message to the copilot")

    # A change: the turn searches, then proposes the flow with set_flow; its diff is shown.
    box.fill("Add a step that greets the greeting")
    panel.get_by_role("button", name="Send").click()
    conversation = panel.get_by_role("list", name="Conversation")
    expect(conversation).to_contain_text("Add a step that greets the greeting")
    expect(conversation.get_by_text("search_flows").first).to_be_visible(timeout=TURN)
    expect(conversation.get_by_text("set_flow").first).to_be_visible()
    change = panel.get_by_role("region", name=f"Proposed change to {FLOW}")
    expect(change).to_contain_text("id: again", timeout=TURN)
    expect(change).to_contain_text("summary: Greet twice")
    expect(conversation).to_contain_text("I added a step `again`")
    assert_accessible(page)

    # Accepting loads the copilot's draft into the editor; nothing is deployed.
    change.get_by_role("button", name="Accept").click()
    expect(change).to_contain_text("Accepted")
    expect(yaml_view).to_contain_text("id: again")
    graph = page.get_by_role("region", name="Steps of the flow")
    expect(graph.get_by_test_id("flow-step-again")).to_be_attached()
    expect(page.get_by_test_id("save-status")).to_have_text("Your draft")
    with ui_server.client("ada") as client:
        draft = client.get(f"/api/drafts/{FLOW}").json()
        deployed = client.get(f"/api/items/{FLOW}").json()
    assert draft["value"]["steps"] == COPILOT_PROPOSAL["steps"]
    assert deployed["value"]["steps"] == GREET_ONCE["steps"]

    # A test run waits for ada's go-ahead, inline; approved, it runs the draft.
    box.fill("Test it with Ada")
    panel.get_by_role("button", name="Send").click()
    expect(panel.get_by_role("button", name="Send")).to_be_disabled()
    confirm = panel.get_by_role("region", name="Run test_run_flow?")
    expect(confirm).to_be_visible(timeout=TURN)
    expect(confirm).to_contain_text("Ada")
    assert_accessible(page)
    confirm.scroll_into_view_if_needed()
    screenshot(page, "copilot.png")
    confirm.get_by_role("button", name="Approve").click()
    expect(conversation).to_contain_text("Test run succeeded: hello hello Ada", timeout=TURN)
    expect(panel.get_by_role("button", name="Send")).to_be_disabled()  # the box is empty
    assert not page_errors
