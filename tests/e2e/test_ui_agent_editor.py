"""The agent editor in a browser: a draft autosaved, run as a preview, deployed, restored.

The module seeds its own agent (`f/demo/ae_agent`, a copy of the seeded
assistant) and a flow linking it (`f/demo/ae_flow`, like `f/demo/support`),
so that nothing here changes what other modules see. The scripted model
answers with the first line of its system prompt, which tells a run of the
draft from a run of the deployed agent.
"""

from __future__ import annotations

import re
import time
from typing import Any

import httpx
import pytest
from tests.e2e.axe import AXE, report, violations
from tests.e2e.conftest import AGENT_SYSTEM, ASSISTANT, SUPPORT, UiServer, screenshot, sign_in

pytest.importorskip("playwright")
from playwright.sync_api import expect

AGENT = "f/demo/ae_agent"
FLOW = "f/demo/ae_flow"
EDITED = "You are the edited agent.\nLook orders up before acting."
_AXE_DRAWER = """async () => {
  const results = await window.axe.run('.history-drawer', { resultTypes: ['violations'] })
  return results.violations.filter((v) => ['serious', 'critical'].includes(v.impact)).map((v) => ({
    id: v.id, impact: v.impact, help: v.help, helpUrl: v.helpUrl,
    nodes: v.nodes.map((n) => ({ target: n.target, failureSummary: n.failureSummary })),
  }))
}"""


@pytest.fixture(scope="module")
def seeded(ui_server: UiServer) -> None:
    """The module's own agent and the flow linking it (version 1 each)."""
    ui_server.ws.write(
        AGENT, "resource", ASSISTANT, resource_type="ai_agent", summary="The agent editor's agent"
    )
    step = {
        "id": "answer",
        "ai_agent": {"agent": AGENT},
        "inputs": {"user_message": {"expr": "flow_input.message"}},
    }
    ui_server.ws.write(FLOW, "flow", {**SUPPORT, "steps": [step]})


def run_through_refund(client: httpx.Client, *, draft: bool) -> Any:
    """Run the flow (ada's drafts, with `draft`), approve its refund, and answer its result."""
    body = {"path": FLOW, "inputs": {"message": "My order A-1001 arrived broken."}, "draft": draft}
    started = client.post("/api/runs", json=body)
    assert started.status_code == 201, started.text
    run = started.json()["id"]
    deadline = time.monotonic() + 60
    while True:
        assert time.monotonic() < deadline, f"run {run} asked for no approval"
        waits = client.get("/api/approvals", params={"run_id": run}).json()
        if waits:
            break
        time.sleep(0.2)
    (wait,) = waits
    assert wait["details"]["tool"] == "issue_refund"
    decided = client.post(f"/api/approvals/{wait['id']}/approve", json={})
    assert decided.status_code == 200, decided.text
    while (shown := client.get(f"/api/runs/{run}").json())["status"] != "succeeded":
        assert shown["status"] in ("queued", "running", "waiting"), shown
        assert time.monotonic() < deadline, shown
        time.sleep(0.2)
    assert shown["draft"] is draft
    return shown["result"]


def test_edit_preview_deploy_and_restore_an_agent(
    page: Any, ui_server: UiServer, seeded: None, page_errors: list[str]
) -> None:
    sign_in(page)
    # The agent's workspace page opens it in the editor.
    page.goto(f"/workspace/{AGENT}")
    page.get_by_role("link", name="Open in the agent editor").click()
    expect(page).to_have_url(re.compile(rf"/agents/{AGENT}$"))
    expect(page.get_by_text("Deployed v1")).to_be_visible()

    # Opened over a flow: a way back to it, and what the edit reaches.
    page.goto(f"/agents/{AGENT}?from={FLOW}")
    expect(page.get_by_role("heading", level=1, name=AGENT)).to_be_visible()
    expect(page.get_by_role("link", name=f"Back to {FLOW}")).to_have_attribute(
        "href", f"/edit/{FLOW}"
    )
    expect(page.get_by_text("This edits the agent itself")).to_be_visible()
    expect(page.get_by_test_id("agent-showing")).to_have_text("deployed version 1")
    refund = page.get_by_role("article", name="issue_refund")
    expect(refund.get_by_label("Requires approval")).to_be_checked()

    system = page.get_by_label("System prompt")
    expect(system).to_have_value(AGENT_SYSTEM)
    system.fill(EDITED)
    status = page.get_by_test_id("save-status")
    expect(status).to_have_text("Draft saved")
    expect(page.get_by_test_id("draft-badge")).to_have_text("Draft")
    expect(page.get_by_test_id("agent-showing")).to_have_text("your draft (deployed: version 1)")

    # The server refuses an invalid agent: its problems are shown, the text stays, the draft too.
    iterations = page.get_by_label("Max iterations")
    iterations.fill("0")
    expect(status).to_have_text("Draft not saved")
    refusal = page.get_by_role("alert").filter(has_text="Draft not saved")
    expect(refusal).to_contain_text("max_iterations")
    expect(iterations).to_have_value("0")
    with ui_server.client("ada") as client:
        kept = client.get(f"/api/drafts/{AGENT}").json()["value"]
        assert kept["max_iterations"] == 6 and kept["system"] == EDITED
    iterations.fill("6")
    expect(status).to_have_text("Draft saved")
    expect(refusal).to_have_count(0)

    with ui_server.client("ada") as client:
        deployed = client.get(f"/api/items/{AGENT}").json()
        assert (deployed["version"], deployed["value"]) == (1, ASSISTANT)
        draft = client.get(f"/api/drafts/{AGENT}").json()
        assert draft["value"] == {**ASSISTANT, "system": EDITED}
        assert draft["summary"] == "The agent editor's agent"
        # A draft run of the flow uses ada's draft; a plain run the deployed agent.
        assert str(run_through_refund(client, draft=True)).startswith("You are the edited agent.:")
        plain = str(run_through_refund(client, draft=False))
        assert plain.startswith(AGENT_SYSTEM.splitlines()[0] + ":")

    # Deploying writes the draft as version 2 and drops it.
    page.get_by_label("What changed").fill("a new first line")
    page.get_by_role("button", name="Deploy", exact=True).click()
    expect(page.get_by_text("Deployed v2")).to_be_visible()
    expect(page.get_by_test_id("draft-badge")).to_have_count(0)
    expect(status).to_have_text("No unsaved changes")
    expect(system).to_have_value(EDITED)
    with ui_server.client("ada") as client:
        deployed = client.get(f"/api/items/{AGENT}").json()
        assert (deployed["version"], deployed["value"]["system"]) == (2, EDITED)
        assert client.get(f"/api/drafts/{AGENT}").status_code == 404

    # History: v1 against v2, then v1 restored as v3.
    page.get_by_role("button", name="History").click()
    drawer = page.get_by_role("dialog", name=f"History of {AGENT}")
    expect(drawer).to_be_visible()
    expect(drawer.get_by_text("a new first line")).to_be_visible()
    drawer.get_by_role("radio", name="Compare from v1").check()
    drawer.get_by_role("radio", name="Compare to v2").check()
    expect(drawer.get_by_role("heading", name="Changes from v1 to v2")).to_be_visible()
    diff = drawer.locator("figure.diff")
    expect(diff).to_contain_text("You are the demo support agent.")
    expect(diff).to_contain_text("You are the edited agent.")
    screenshot(page, "agent-editor.png", full_page=False)
    if AXE.is_file():  # the open drawer, which the screen-by-screen check does not open
        violations(page)  # loads axe-core into the page (the whole screen is test_ui_a11y's)
        found = page.evaluate(_AXE_DRAWER)
        assert found == [], report(found)

    drawer.get_by_role("button", name="Restore v1").click()
    drawer.get_by_role("group", name="Restore v1").get_by_role("button", name="Restore").click()
    expect(drawer.get_by_text("Restored v1 as v3.")).to_be_visible()
    expect(drawer.get_by_text("No differences between v1 and v3.")).to_be_visible()
    with ui_server.client("ada") as client:
        v1 = client.get(f"/api/items/{AGENT}", params={"version": 1}).json()
        v3 = client.get(f"/api/items/{AGENT}").json()
        assert v3["version"] == 3 and v3["value"] == v1["value"] == ASSISTANT

    page.keyboard.press("Escape")
    expect(drawer).to_have_count(0)
    expect(page.get_by_text("Deployed v3")).to_be_visible()
    expect(system).to_have_value(AGENT_SYSTEM)
    assert page_errors == []
