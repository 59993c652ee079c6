"""The flow editor (`/edit/<path>`) in a real browser, as ada.

It works on its own copies (`f/demo/fe_*`): a flow linking an agent copy, a plain
flow, and a new flow; the shared seeded items are never touched.
"""

from __future__ import annotations

import copy
import re
import time
from typing import Any

import pytest
from tests.e2e.conftest import ASSISTANT, SUPPORT, UiServer, screenshot, sign_in

pytest.importorskip("playwright")
from playwright.sync_api import expect

FLOW = "f/demo/fe_support"
AGENT = "f/demo/fe_agent"
PLAIN = "f/demo/fe_plain"
UNLINK = "f/demo/fe_unlink"
PLAIN_FLOW = {"summary": "Plain", "steps": [{"id": "first", "identity": True}]}


@pytest.fixture(scope="module")
def seeded(ui_server: UiServer) -> None:
    """The module's own agent, two flows linking it, and a plain flow."""
    ws = ui_server.ws
    ws.write(AGENT, "resource", ASSISTANT, resource_type="ai_agent", summary="fe copy")
    flow = copy.deepcopy(SUPPORT)
    flow["steps"][0]["ai_agent"] = {"agent": AGENT}
    ws.write(FLOW, "flow", flow)
    ws.write(PLAIN, "flow", PLAIN_FLOW)
    ws.write(UNLINK, "flow", flow)


def editor(page: Any, path: str) -> Any:
    """The YAML editor's content (CodeMirror), focused with the cursor at the end."""
    content = page.get_by_label(f"Flow {path} (YAML)")
    content.click()
    page.keyboard.press("Control+End")
    return content


def saved(page: Any) -> None:
    expect(page.get_by_test_id("save-status")).to_have_text("Saved draft", timeout=10_000)


def draft_of(ui_server: UiServer, path: str) -> Any:
    with ui_server.client("ada") as client:
        answer = client.get(f"/api/drafts/{path}")
        return None if answer.status_code == 404 else answer.json()


def test_edit_run_and_deploy_a_flow_with_its_agent_draft(
    page: Any, ui_server: UiServer, seeded: None, page_errors: list[str]
) -> None:
    sign_in(page)
    page.goto(f"/workspace/{FLOW}")
    page.get_by_role("link", name="Open in the flow editor").click()
    expect(page).to_have_url(re.compile(rf"/edit/{FLOW}$"))
    expect(page.get_by_role("heading", level=1)).to_have_text(f"Edit {FLOW}")
    expect(page.get_by_test_id("save-status")).to_have_text("No draft: the deployed flow")

    # The graph: the linked step, and its agent's tools hanging off it.
    graph = page.get_by_role("region", name="Steps of the flow")
    expect(graph.get_by_test_id("flow-step-answer")).to_contain_text(AGENT)
    expect(graph.get_by_test_id("flow-tool-answer-lookup_order")).to_be_visible()
    expect(graph.get_by_test_id("flow-tool-answer-issue_refund")).to_contain_text("needs approval")

    # Typing a step: the graph follows, and the draft is saved.
    editor(page, FLOW)
    page.keyboard.insert_text("  - id: wrap_up\n    identity: true\n")
    expect(graph.get_by_test_id("flow-step-wrap_up")).to_be_visible()
    saved(page)
    draft = draft_of(ui_server, FLOW)
    assert [s["id"] for s in draft["value"]["steps"]] == ["answer", "wrap_up"]

    # A key the schema does not know: marked in the text and listed; the server refuses it.
    page.keyboard.insert_text("    bogus_key: 1\n")
    problems = page.get_by_role("region", name="Problems")
    expect(problems).to_contain_text("steps.1: unknown key `bogus_key`")
    expect(page.locator(".cm-lintRange-error")).to_have_count(1)
    expect(page.get_by_test_id("save-status")).to_have_text("Draft not saved", timeout=10_000)
    expect(page.get_by_role("alert")).to_contain_text("bogus_key")
    assert "bogus_key" not in str(draft_of(ui_server, FLOW)["value"])
    page.keyboard.press("Control+z")
    expect(problems).to_contain_text("No problems found")
    expect(page.get_by_test_id("save-status")).to_have_text("Saved draft")

    # Clicking a tool selects its step: the linked card, and the tool's input overrides.
    graph.get_by_test_id("flow-tool-answer-lookup_order").click()
    panel = page.get_by_role("complementary", name="Step answer")
    card = panel.get_by_role("region", name=f"Linked to {AGENT}")
    expect(card).to_contain_text("You are the demo support agent.")
    expect(panel.get_by_role("link", name="Edit the agent")).to_have_attribute(
        "href", f"/agents/{AGENT}?from={FLOW.replace('/', '%2F')}"
    )
    panel.get_by_label("order_id of lookup_order: where it comes from").select_option("value")
    panel.get_by_label("order_id of lookup_order", exact=True).fill("A-2002")
    saved(page)
    answer = draft_of(ui_server, FLOW)["value"]["steps"][0]["ai_agent"]
    assert answer == {"agent": AGENT, "tool_inputs": {"lookup_order": {"order_id": "A-2002"}}}

    # Run the draft with its input's form: the run page shows it.
    run_form = page.get_by_role("form", name=f"Run the draft of {FLOW}")
    run_form.get_by_label("message").fill("my order arrived broken")
    run_form.get_by_role("button", name="Run the draft").click()
    expect(page).to_have_url(re.compile(r"/runs/[^/?]+"))
    run_id = page.url.split("/runs/")[1].split("?")[0]
    expect(page.get_by_role("heading", level=1)).to_contain_text(FLOW)
    with ui_server.client("ada") as client:
        run = client.get(f"/api/runs/{run_id}").json()
    assert run["path"] == FLOW and run["draft"] is True

    # A draft of the agent (made elsewhere): the graph and the card show it, badged.
    changed = {**ASSISTANT, "system": "You are the fe draft agent.\nBe brief."}
    with ui_server.client("ada") as client:
        put = client.put(
            f"/api/drafts/{AGENT}",
            json={"kind": "resource", "value": changed, "resource_type": "ai_agent"},
        )
        assert put.status_code == 200, put.text
    page.goto(f"/edit/{FLOW}")
    expect(page.get_by_test_id("save-status")).to_have_text("Your draft")
    graph = page.get_by_role("region", name="Steps of the flow")
    expect(graph.get_by_test_id("flow-step-answer")).to_contain_text("Draft")
    expect(graph.get_by_test_id("flow-tool-answer-issue_refund")).to_contain_text("Draft")
    graph.get_by_test_id("flow-step-answer").click()
    card = page.get_by_role("region", name=f"Linked to {AGENT}")
    expect(card).to_contain_text("You are the fe draft agent.")
    screenshot(page, "flow-editor.png")

    # Deploy, the agent's draft along (listed, checked).
    page.get_by_role("button", name="Deploy…").click()
    dialog = page.get_by_role("dialog", name=f"Deploy {FLOW}")
    agent_box = dialog.get_by_role("checkbox", name=AGENT)
    expect(agent_box).to_be_checked()
    dialog.get_by_label("What changed (optional)").fill("wrap up, and the fe agent's new prompt")
    dialog.get_by_role("button", name="Deploy").click()
    expect(page).to_have_url(re.compile(rf"/workspace/{FLOW}$"))
    expect(page.locator(".facts")).to_contain_text("2")
    with ui_server.client("ada") as client:
        flow = client.get(f"/api/items/{FLOW}").json()
        agent = client.get(f"/api/items/{AGENT}").json()
        assert client.get(f"/api/drafts/{FLOW}").status_code == 404
        assert client.get(f"/api/drafts/{AGENT}").status_code == 404
    assert flow["version"] == 2
    assert [s["id"] for s in flow["value"]["steps"]] == ["answer", "wrap_up"]
    assert agent["version"] == 2
    assert agent["value"]["system"].startswith("You are the fe draft agent.")
    assert page_errors == []


def test_bad_yaml_keeps_the_last_good_draft_and_discard_drops_it(
    page: Any, ui_server: UiServer, seeded: None, page_errors: list[str]
) -> None:
    sign_in(page)
    page.goto(f"/edit/{PLAIN}")
    expect(page.get_by_test_id("save-status")).to_have_text("No draft: the deployed flow")
    editor(page, PLAIN)
    page.keyboard.insert_text("  - id: second\n    identity: true\n")
    saved(page)
    good = draft_of(ui_server, PLAIN)["value"]
    assert [s["id"] for s in good["steps"]] == ["first", "second"]

    # YAML that does not parse: its problem is listed on its line, and nothing is sent.
    page.keyboard.insert_text("  - id: [broken\n")
    problems = page.get_by_role("region", name="Problems")
    expect(problems).to_contain_text(re.compile(r"Line [78]: Flow sequence .*\(YAML\)"))
    expect(page.get_by_test_id("save-status")).to_have_text(
        "Not saved: the YAML does not parse (your last saved draft is kept)", timeout=10_000
    )
    time.sleep(1.5)  # longer than the autosave's wait
    assert draft_of(ui_server, PLAIN)["value"] == good

    # YAML the schema accepts but the server does not: its check, on the step's line.
    page.keyboard.press("Control+z")
    saved(page)
    page.keyboard.insert_text("  - id: third\n    identity: true\n    needs: [nowhere]\n")
    server_check = re.compile(r"Line 9: third\.needs: .*nowhere.*\(server check\)")
    expect(problems).to_contain_text(server_check)
    expect(page.locator(".cm-lintRange-error")).to_have_count(1)
    expect(page.get_by_test_id("save-status")).to_have_text("Draft not saved", timeout=10_000)
    expect(page.get_by_role("alert")).to_contain_text("nowhere")
    assert draft_of(ui_server, PLAIN)["value"] == good

    # Discard: back to the deployed flow, and no draft.
    page.on("dialog", lambda d: d.accept())
    page.get_by_role("button", name="Discard draft").click()
    expect(page.get_by_test_id("save-status")).to_have_text("No draft: the deployed flow")
    expect(problems).to_contain_text("No problems found")
    graph = page.get_by_role("region", name="Steps of the flow")
    expect(graph.get_by_test_id("flow-step-first")).to_be_visible()
    expect(graph.get_by_test_id("flow-step-second")).to_have_count(0)
    assert draft_of(ui_server, PLAIN) is None
    assert page_errors == []


def test_a_new_flow_starts_from_a_template_and_deploys(
    page: Any, ui_server: UiServer, seeded: None, page_errors: list[str]
) -> None:
    path = "f/demo/fe_new"
    sign_in(page)
    page.goto(f"/edit/{path}")
    expect(page.get_by_test_id("save-status")).to_have_text("A new flow: not saved yet")
    expect(page.locator(".page-head")).to_contain_text("new flow")
    graph = page.get_by_role("region", name="Steps of the flow")
    expect(graph.get_by_test_id("flow-step-start")).to_be_visible()
    # Completion offers the step's keys at the cursor.
    editor(page, path)
    page.keyboard.insert_text("    summ")
    option = page.get_by_role("option", name=re.compile("^summary"))
    expect(option).to_be_visible()
    option.click()
    page.keyboard.insert_text("The first step\n")
    saved(page)
    assert draft_of(ui_server, path)["value"]["steps"][0]["summary"] == "The first step"
    page.get_by_role("button", name="Deploy…").click()
    dialog = page.get_by_role("dialog", name=f"Deploy {path}")
    expect(dialog).to_contain_text("No drafts of the agents it links.")
    dialog.get_by_role("button", name="Deploy").click()
    expect(page).to_have_url(re.compile(rf"/workspace/{path}$"))
    with ui_server.client("ada") as client:
        item = client.get(f"/api/items/{path}").json()
    assert item["version"] == 1 and item["value"]["steps"][0]["summary"] == "The first step"
    assert page_errors == []


def test_unlink_a_step_copies_the_agent_into_the_draft(
    page: Any, ui_server: UiServer, seeded: None, page_errors: list[str]
) -> None:
    sign_in(page)
    page.goto(f"/edit/{UNLINK}")
    graph = page.get_by_role("region", name="Steps of the flow")
    expect(graph.get_by_test_id("flow-tool-answer-lookup_order")).to_be_visible()
    graph.get_by_test_id("flow-step-answer").click()
    panel = page.get_by_role("complementary", name="Step answer")
    panel.get_by_role("button", name="Unlink").click()
    # The caller's draft now holds the agent's configuration; the editor shows it.
    expect(panel.get_by_role("region", name=re.compile("^Linked to"))).to_have_count(0)
    expect(graph.get_by_test_id("flow-tool-answer-lookup_order")).to_have_count(0)
    with ui_server.client("ada") as client:  # as deployed now (the first test deploys a change)
        system = client.get(f"/api/items/{AGENT}").json()["value"]["system"]
    yaml_text = page.get_by_label(f"Flow {UNLINK} (YAML)")
    expect(yaml_text).to_contain_text(system.splitlines()[0])
    expect(page.get_by_test_id("save-status")).to_have_text("Your draft")
    agent = draft_of(ui_server, UNLINK)["value"]["steps"][0]["ai_agent"]
    assert "agent" not in agent or agent["agent"] is None
    assert [t["name"] for t in agent["tools"]] == ["lookup_order", "issue_refund"]
    with ui_server.client("ada") as client:
        assert client.get(f"/api/items/{UNLINK}").json()["version"] == 1  # nothing deployed
    assert page_errors == []
