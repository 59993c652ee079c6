"""An agent's run in a real browser: start it, watch it go live, approve its tool call with edited
arguments in the inbox, then read its transcript, journal, graph and timeline; cancel and retry.

The agent is `f/demo/support`'s (scripted by `scripted_server.py`): it looks
order A-1001 up, asks to refund its 129 EUR (`issue_refund` needs approval),
then answers with what the refund said. This module seeds two flows only it
uses: `f/demo/agentrun_hold` (an approval step, to cancel),
`f/demo/agentrun_fails` (a script that raises, to retry) and
`f/demo/agentrun_loop` (a loop, whose steps group under it).
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from tests.e2e.axe import assert_accessible
from tests.e2e.conftest import UiServer, screenshot, sign_in

pytest.importorskip("playwright")
from playwright.sync_api import expect

# Named apart from test_ui_a11y.py's run.png, approvals.png and runs.png, which are other screens.
HOLD = {
    "summary": "Wait for a decision nobody makes (the cancel test's)",
    "steps": [
        {"id": "hold", "approval": {"message": "Hold for the cancel test", "approvers": ["ada"]}}
    ],
}
FAILS = {
    "summary": "Fail every time (the retry test's)",
    "steps": [{"id": "boom", "script": "def main():\n    raise RuntimeError('boom on purpose')\n"}],
}

LOOP = {
    "summary": "Double each item in a loop (the sub-steps test's)",
    "steps": [
        {
            "id": "doubled",
            "for_each": {
                "items": [1, 2],
                "steps": [
                    {
                        "id": "double",
                        "script": "def main(x):\n    return x * 2\n",
                        "inputs": {"x": {"expr": "iter.value"}},
                    }
                ],
            },
        }
    ],
}


@pytest.fixture(scope="module", autouse=True)
def seeded(ui_server: UiServer) -> None:
    ui_server.ws.write("f/demo/agentrun_hold", "flow", HOLD)
    ui_server.ws.write("f/demo/agentrun_fails", "flow", FAILS)
    ui_server.ws.write("f/demo/agentrun_loop", "flow", LOOP)


def submit(ui_server: UiServer, path: str, inputs: dict[str, Any] | None = None) -> str:
    with ui_server.client("ada") as client:
        answer = client.post("/api/runs", json={"path": path, "inputs": inputs or {}})
        assert answer.status_code == 201, answer.text
        return str(answer.json()["id"])


def test_an_agent_run_is_approved_with_edited_arguments_and_its_transcript_shows_it(
    page: Any, ui_server: UiServer, page_errors: list[str]
) -> None:
    sign_in(page)

    # Started from the flow's page; the run page follows it without a reload.
    page.goto("/workspace/f/demo/support")
    start = page.get_by_role("form", name="Run f/demo/support")
    start.get_by_label("message").fill("My order A-1001 arrived broken")
    start.get_by_role("button", name="Start a run").click()
    expect(page).to_have_url(re.compile(r"/runs/[^/?]+"))
    run_id = page.url.split("/runs/")[1].split("?")[0]
    page.evaluate("() => { window.__sameDocument = true }")
    expect(page.get_by_label("Run status")).to_have_text("waiting", timeout=30_000)
    expect(page.get_by_test_id("step-answer")).to_have_attribute("data-status", "waiting")
    assert page.evaluate("() => window.__sameDocument === true"), "the page was reloaded"

    # The approval waits: the transcript shows the pending call, the inbox decides it.
    with ui_server.client("ada") as client:
        pending = client.get("/api/approvals", params={"run_id": run_id}).json()
    assert [(a["kind"], a["details"]["tool"]) for a in pending] == [("tool_call", "issue_refund")]
    approval_id = pending[0]["id"]
    page.get_by_role("link", name="Open its approvals").click()
    expect(page.get_by_role("heading", level=1, name="Approvals")).to_be_visible()
    card = page.locator(f'article[data-approval-id="{approval_id}"]')
    expect(card).to_contain_text("issue_refund")
    expect(card).to_contain_text('"amount": 129')
    expect(card).to_contain_text("ago")  # its age
    card.get_by_role("button", name="Edit arguments").click()
    card.get_by_label(re.compile(r"^amount")).fill("100")
    card.get_by_label("Feedback for the model (optional)").fill("100 is what we refund")
    screenshot(page, "agent-approvals.png")
    assert_accessible(page)
    card.get_by_role("button", name="Approve").click()
    expect(card).to_have_count(0)

    # The run finishes with the edited amount.
    page.goto(f"/runs/{run_id}")
    expect(page.get_by_label("Run status")).to_have_text("succeeded", timeout=30_000)
    expect(page.get_by_text("refunded 100.00 EUR on A-1001").first).to_be_visible()
    with ui_server.client("ada") as client:
        assert (
            client.get(f"/api/runs/{run_id}")
            .json()["result"]
            .endswith("refunded 100.00 EUR on A-1001")
        )

    # The graph: the agent step's attempts and duration, and its tool calls on demand.
    node = page.get_by_test_id("step-answer")
    expect(node).to_have_attribute("data-status", "succeeded")
    expect(node.get_by_test_id("attempts")).to_have_text("×1")
    expect(node.get_by_test_id("duration")).to_have_text(re.compile(r"\d+( ms| s)"))
    # Its transcript is read when the node is first expanded: then the toggle counts the calls.
    page.get_by_role("button", name="Show tool calls of answer").click()
    expect(page.get_by_test_id("child-answer::call::call_lookup")).to_have_attribute(
        "data-status", "succeeded"
    )
    expect(page.get_by_test_id("child-answer::call::call_refund")).to_contain_text("amount=129")
    screenshot(page, "agent-run.png")
    assert_accessible(page)
    page.get_by_role("button", name="Hide 2 tool calls of answer").click()
    expect(page.get_by_test_id("child-answer::call::call_lookup")).to_have_count(0)

    # The timeline: the step's attempt and the approval's wait, with their times.
    timeline = page.get_by_role("table", name="Timeline of the steps and waits")
    expect(timeline.locator('tr[data-kind="attempt"]')).to_contain_text("attempt 1")
    expect(timeline.locator('tr[data-kind="wait"]')).to_contain_text("approval of issue_refund")

    # The step's drawer: its output, the transcript with the approval at its call, the journal.
    node.click()
    drawer = page.get_by_role("complementary", name="Step answer")
    expect(drawer).to_contain_text("refunded 100.00 EUR on A-1001")  # its output: the result
    turns = drawer.get_by_role("list", name="Turns")
    expect(turns.get_by_test_id("tool-call-lookup_order")).to_contain_text('"order_id": "A-1001"')
    expect(turns.get_by_test_id("tool-call-lookup_order")).to_contain_text("arrived broken")
    refund = turns.get_by_test_id("tool-call-issue_refund")
    expect(refund).to_contain_text("refunded 100.00 EUR on A-1001")
    decided = refund.get_by_role("group", name="Approval of issue_refund")
    expect(decided).to_contain_text("approved by ada")
    expect(decided).to_contain_text("100 is what we refund")
    expect(decided.locator('tr[data-kind="remove"]')).to_contain_text('"amount": 129')
    expect(decided.locator('tr[data-kind="add"]')).to_contain_text('"amount": 100')
    usage = turns.get_by_test_id("turn-usage")
    expect(usage).to_have_count(3)  # three model calls, one per assistant turn
    expect(usage.first).to_contain_text("scripted")
    expect(usage.first).to_contain_text(re.compile(r"\d+ → \d+ tokens"))

    journal = drawer.get_by_role("list", name="Journal entries")
    expect(journal.locator("li").first).to_be_visible()
    entries = journal.locator("li")
    kinds = [k.strip() for k in entries.locator("code").all_inner_texts()]
    marks = entries.locator(".journal-mark").all_inner_texts()
    assert "approval_requested" in kinds and "approval_decided" in kinds, kinds
    # What the agent did before it paused for the approval was read back when it resumed.
    paused = kinds.index("approval_requested")
    assert set(marks[: paused + 1]) == {"replayed"}, list(zip(kinds, marks, strict=True))
    assert set(marks[kinds.index("approval_decided") :]) == {"ran live"}, list(
        zip(kinds, marks, strict=True)
    )
    # The whole drawer in the picture (it scrolls on its own on the page).
    drawer.evaluate("(el) => { el.style.maxHeight = 'none' }")
    screenshot(page, "transcript.png")
    assert_accessible(page)

    # The runs list shows it.
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Runs").click()
    expect(page.locator(f'tr[data-run-id="{run_id}"]')).to_contain_text("succeeded")
    screenshot(page, "agent-runs.png")
    assert page_errors == []


def test_bob_neither_sees_nor_decides_adas_agent_run(
    page: Any, ui_server: UiServer, page_errors: list[str]
) -> None:
    run_id = submit(ui_server, "f/demo/support", {"message": "A-1001 again"})
    with ui_server.client("ada") as ada:
        for _ in range(120):
            pending = ada.get("/api/approvals", params={"run_id": run_id}).json()
            if pending:
                break
            page.wait_for_timeout(250)
        assert len(pending) == 1, pending
        # The tool call's approval names no approvers: whoever may see the run may decide it.
        assert pending[0]["approvers"] == []
    with ui_server.client("bob") as bob:
        assert bob.get(f"/api/runs/{run_id}").status_code == 404
        assert bob.get("/api/approvals", params={"run_id": run_id, "status": "any"}).json() == []
        refused = bob.post(f"/api/approvals/{pending[0]['id']}/approve", json={})
        assert refused.status_code == 404, refused.text

    sign_in(page, "bob")
    page.goto(f"/approvals?run={run_id}")
    expect(page.get_by_text("Nothing waits for you.")).to_be_visible()
    page.goto(f"/runs/{run_id}")
    expect(page.get_by_role("alert")).to_contain_text("that bob may see")

    with ui_server.client("ada") as ada:  # leave nothing pending for the other modules
        answer = ada.post(f"/api/approvals/{pending[0]['id']}/reject", json={"comment": "test"})
        assert answer.status_code == 200, answer.text
    assert page_errors == []


def test_a_run_is_cancelled_and_a_failed_one_retried_from_the_run_page(
    page: Any, ui_server: UiServer, page_errors: list[str]
) -> None:
    sign_in(page)
    page.goto("/runs")
    hold = submit(ui_server, "f/demo/agentrun_hold")
    # The list picks the new run up by itself.
    expect(page.locator(f'tr[data-run-id="{hold}"]')).to_contain_text("waiting", timeout=30_000)
    page.locator(f'tr[data-run-id="{hold}"]').get_by_role("link").click()
    expect(page.get_by_label("Run status")).to_have_text("waiting", timeout=30_000)
    cancel = page.get_by_role("button", name="Cancel", exact=True)  # not the cancelled step's node
    cancel.click()
    expect(page.get_by_label("Run status")).to_have_text("cancelled", timeout=30_000)
    expect(page.get_by_test_id("step-hold")).to_have_attribute("data-status", "cancelled")
    expect(cancel).to_have_count(0)

    fails = submit(ui_server, "f/demo/agentrun_fails")
    page.goto(f"/runs/{fails}")
    expect(page.get_by_label("Run status")).to_have_text("failed", timeout=30_000)
    boom = page.get_by_test_id("step-boom")
    expect(boom.get_by_test_id("attempts")).to_have_text("×1")
    page.get_by_role("button", name="Retry", exact=True).click()
    expect(boom.get_by_test_id("attempts")).to_have_text("×2", timeout=30_000)
    expect(page.get_by_label("Run status")).to_have_text("failed", timeout=30_000)
    boom.click()
    expect(page.get_by_role("complementary", name="Step boom")).to_contain_text("boom on purpose")
    assert page_errors == []


def test_a_loops_steps_are_grouped_under_it_and_collapse(
    page: Any, ui_server: UiServer, page_errors: list[str]
) -> None:
    run_id = submit(ui_server, "f/demo/agentrun_loop")
    sign_in(page)
    page.goto(f"/runs/{run_id}")
    expect(page.get_by_label("Run status")).to_have_text("succeeded", timeout=30_000)
    expect(page.get_by_text("[\n  2,\n  4\n]")).to_be_visible()  # the loop's result
    children = page.locator('[data-testid^="child-"]')
    expect(children).to_have_count(0)  # collapsed at first
    page.get_by_role("button", name="Show 2 sub-steps of doubled").click()
    expect(children).to_have_count(2)
    for i in range(2):
        expect(children.nth(i)).to_have_attribute("data-status", "succeeded")
        expect(children.nth(i)).to_contain_text("double")
    # A sub-step selects the step it belongs to.
    children.first.click()
    expect(page.get_by_role("complementary", name="Step doubled")).to_be_visible()
    page.get_by_role("button", name="Hide 2 sub-steps of doubled").click()
    expect(children).to_have_count(0)
    timeline = page.get_by_role("table", name="Timeline of the steps and waits")
    expect(timeline.locator('tr[data-kind="attempt"]')).to_have_count(3)  # the loop and its 2 items
    assert page_errors == []
