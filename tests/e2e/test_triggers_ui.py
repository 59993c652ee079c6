"""Triggers in the web UI: a schedule made, read, paused and resumed; a flow's triggers and its
webhook token; a run waiting for an event, shown as such and finished by sending the event."""

from __future__ import annotations

from typing import Any

import httpx
from playwright.sync_api import expect
from tests.e2e.axe import assert_accessible
from tests.e2e.conftest import UiServer, screenshot, sign_in

WAIT_FLOW = {
    "summary": "Wait for go, then greet whoever sent it",
    "inputs": {
        "type": "object",
        "properties": {"key": {"type": "string", "description": "The event's key"}},
        "required": ["key"],
    },
    "steps": [
        {"id": "hold", "wait_for_event": {"name": "go", "key": "flow_input.key"}},
        {
            "id": "finish",
            "script": {"path": "f/demo/greet"},
            "inputs": {"name": {"expr": "results.hold.who"}},
        },
    ],
}

# A `datetime-local` value (the browser's zone) `seconds` from now.
_LATER = """(seconds) => {
  const at = new Date(Date.now() + seconds * 1000)
  const two = (n) => String(n).padStart(2, '0')
  const day = `${at.getFullYear()}-${two(at.getMonth() + 1)}-${two(at.getDate())}`
  return `${day}T${two(at.getHours())}:${two(at.getMinutes())}`
}"""


def test_a_schedule_is_made_in_the_ui_then_paused_and_resumed(
    page: Any, ui_server: UiServer, page_errors: list[str]
) -> None:
    path = "f/demo/e2e_morning"
    sign_in(page)
    page.goto("/workspace")
    page.get_by_text("New…").click()
    form = page.get_by_role("form", name="New schedule")
    form.get_by_label("Schedule path").fill(path)
    form.get_by_label("Flow or script to run").fill("f/demo/greet")
    form.get_by_label("Cron").fill("0 9 * * 1-5")
    form.get_by_label("Time zone").fill("Europe/Paris")
    expect(form.get_by_text("Fires every weekday (Monday to Friday) at 09:00.")).to_be_visible()
    # The script's input schema gives the inputs a form of their own.
    form.get_by_label("name").fill("Ada")
    assert_accessible(page)
    screenshot(page, "new-schedule.png")
    form.get_by_role("button", name="Create the schedule").click()

    expect(page.get_by_role("heading", level=1)).to_have_text(path)
    spec = page.get_by_test_id("schedule-spec")
    words = "every weekday (Monday to Friday) at 09:00, 0 9 * * 1-5 in Europe/Paris"
    expect(spec).to_contain_text(words)
    expect(spec.get_by_role("link", name="f/demo/greet")).to_be_visible()
    fires = page.get_by_role("list", name="Next fires").get_by_role("listitem")
    expect(fires).to_have_count(5)
    expect(fires.first).to_contain_text("09:00 Europe/Paris")
    expect(page.get_by_text("It has not fired yet.")).to_be_visible()
    assert ui_server.ws.schedule(path).spec.inputs == {"name": "Ada"}
    assert_accessible(page)
    screenshot(page, "schedule.png")

    page.get_by_role("button", name="Pause").click()
    expect(page.get_by_test_id("schedule-state")).to_have_text("paused")
    expect(page.get_by_text("Paused: it fires nothing until it is resumed.")).to_be_visible()
    assert ui_server.ws.schedule(path).spec.enabled is False
    page.get_by_role("button", name="Resume").click()
    expect(page.get_by_test_id("schedule-state")).to_have_text("enabled")
    expect(fires).to_have_count(5)
    assert ui_server.ws.schedule(path).spec.enabled is True
    ui_server.ws.delete(path)
    assert page_errors == []


def test_a_flows_triggers_list_its_schedules_and_make_a_webhook_token(
    page: Any, ui_server: UiServer, page_errors: list[str]
) -> None:
    schedule = "f/demo/e2e_hello_nightly"
    nightly = {"cron": "30 2 * * *", "target": "f/demo/hello", "inputs": {"name": "Bob"}}
    ui_server.ws.write(schedule, "schedule", nightly)
    try:
        sign_in(page)
        page.goto("/workspace/f/demo/hello")
        triggers = page.get_by_role("region", name="Triggers")
        listed = triggers.get_by_role("list", name="Schedules of f/demo/hello")
        line = listed.get_by_test_id(f"schedule-{schedule}")
        expect(line).to_contain_text("every day at 02:30 (UTC)")
        expect(line).to_contain_text("next")
        url = f"{ui_server.url}/hooks/f/demo/hello"
        expect(triggers.get_by_text(url, exact=True)).to_be_visible()
        expect(triggers.get_by_label("curl example for f/demo/hello")).to_contain_text(
            "Idempotency-Key"
        )
        triggers.get_by_role("button", name="Create webhook token").click()
        token = triggers.get_by_test_id("new-token").input_value()
        expect(triggers.get_by_text("Its scopes: hooks:write:f/demo/hello.")).to_be_visible()
        assert_accessible(page)
        screenshot(page, "triggers.png")

        # The token starts this flow by its webhook, and nothing else.
        headers = {"Authorization": f"Bearer {token}"}
        with httpx.Client(base_url=ui_server.url, headers=headers, timeout=30) as client:
            started = client.post("/hooks/f/demo/hello?wait=20s", json={"name": "Hook"})
            assert started.status_code == 200, started.text
            assert started.json()["result"] == "hello Hook"
            assert client.post("/hooks/f/demo/approve", json={}).status_code == 403
        triggers.get_by_role("button", name="I have copied it").click()
        expect(triggers.get_by_test_id("new-token")).to_have_count(0)
        assert page_errors == []
    finally:
        ui_server.ws.delete(schedule)


def test_a_run_waiting_for_an_event_says_so_and_the_event_sent_from_the_ui_finishes_it(
    page: Any, ui_server: UiServer, page_errors: list[str]
) -> None:
    ui_server.ws.write("f/demo/wait", "flow", WAIT_FLOW)
    sign_in(page)
    page.goto("/workspace/f/demo/wait")
    run_form = page.get_by_role("form", name="Run f/demo/wait")
    run_form.get_by_label("key").fill("A-1")
    run_form.get_by_role("button", name="Start a run").click()

    expect(page.get_by_label("Run status")).to_have_text("waiting")
    wait = page.get_by_test_id("wait-event")
    expect(wait).to_contain_text("hold: Waiting for event go with key A-1")
    expect(wait).to_contain_text("tidemill events send go --key A-1")
    node = page.get_by_test_id("step-hold")
    expect(node).to_have_attribute("data-status", "waiting_event")
    expect(node).to_contain_text("waiting for event")
    assert_accessible(page)
    screenshot(page, "waiting-run.png")

    send = page.get_by_role("form", name="Send event go")
    send.get_by_label("Payload (JSON)").fill('{"who": "Bob"}')
    with page.expect_response(lambda r: r.url.endswith("/api/events")) as answer:
        send.get_by_role("button", name="Send event").click()
    assert len(answer.value.json()["delivered_to"]) == 1
    # The run goes on at once: its waits (and this form) go away as it finishes.
    expect(page.get_by_label("Run status")).to_have_text("succeeded", timeout=30_000)
    expect(page.get_by_role("region", name="Result")).to_contain_text("hello Bob")
    expect(page.get_by_test_id("step-hold")).to_have_attribute("data-status", "succeeded")
    assert page_errors == []


def test_a_run_started_later_from_the_ui_says_when_it_starts(
    page: Any, ui_server: UiServer, page_errors: list[str]
) -> None:
    sign_in(page)
    page.goto("/workspace/f/demo/hello")
    run_form = page.get_by_role("form", name="Run f/demo/hello")
    run_form.get_by_label("name").fill("Later")
    later = page.evaluate(_LATER, 2 * 3600 + 60)  # the browser's own wall clock, 2 h 1 min on
    run_form.get_by_label("Start at (optional)").fill(later)
    run_form.get_by_role("button", name="Start it later").click()

    expect(page.get_by_test_id("wait-start")).to_contain_text("greet: Starts at")
    expect(page.get_by_test_id("wait-start")).to_contain_text("(in 2 h)")
    expect(page.get_by_test_id("step-greet")).to_have_attribute("data-status", "scheduled")
    page.get_by_role("button", name="Cancel").click()
    expect(page.get_by_label("Run status")).to_have_text("cancelled")
    assert page_errors == []
