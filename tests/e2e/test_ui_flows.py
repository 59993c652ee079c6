"""The web UI's main flows in a real browser: sign in, follow runs, decide an approval, sign out.

One run is started from its flow's page, one through the API (with a token
of ada's); everything else goes through the pages, by the accessible names
and test ids the UI promises (listed in `ui/README.md`).
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from tests.e2e.conftest import PASSWORD, UiServer

pytest.importorskip("playwright")
from playwright.sync_api import expect


def sign_in(page: Any, user: str = "ada") -> None:
    page.goto("/")
    expect(page).to_have_url(re.compile(r"/sign-in"))
    page.get_by_label("Username").fill(user)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", level=1, name="Runs")).to_be_visible()
    nav = page.get_by_role("navigation", name="Main")
    for link in ("Runs", "Approvals", "Workspace"):
        expect(nav.get_by_role("link", name=link)).to_be_visible()
    expect(page.get_by_test_id("current-user")).to_have_text(user)


def submit(ui_server: UiServer, path: str, inputs: dict[str, Any] | None = None) -> str:
    with ui_server.client("ada") as client:
        answer = client.post("/api/runs", json={"path": path, "inputs": inputs or {}})
        assert answer.status_code == 201, answer.text
        return str(answer.json()["id"])


def test_sign_in_follow_a_run_approve_and_sign_out(
    page: Any, ui_server: UiServer, page_errors: list[str]
) -> None:
    sign_in(page)

    # A run of f/demo/hello, started from its page with its input's form, succeeds.
    page.goto("/workspace/f/demo/hello")
    start = page.get_by_role("form", name="Run f/demo/hello")
    expect(start.get_by_role("button", name="Start a run")).to_be_disabled()  # name is required
    start.get_by_label("name").fill("e2e")
    start.get_by_role("button", name="Start a run").click()
    expect(page).to_have_url(re.compile(r"/runs/[^/?]+"))
    hello = page.url.split("/runs/")[1].split("?")[0]
    expect(page.get_by_role("heading", level=1)).to_contain_text("f/demo/hello")
    expect(page.get_by_label("Run status")).to_have_text("succeeded", timeout=30_000)
    greet = page.get_by_test_id("step-greet")
    expect(greet).to_have_attribute("data-status", "succeeded")
    greet.click()
    expect(page.get_by_role("complementary", name="Step greet")).to_contain_text("Attempts")
    # The run's result (the drawer of its last step shows it too, as that step's output).
    expect(page.get_by_role("region", name="Result").get_by_text('"hello e2e"')).to_be_visible()

    # The runs list shows it, linked by its flow path.
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Runs").click()
    row = page.locator(f'tr[data-run-id="{hello}"]')
    expect(row).to_contain_text("succeeded")
    row.get_by_role("link", name="f/demo/hello").click()
    expect(page).to_have_url(re.compile(rf"/runs/{hello}"))
    expect(page.get_by_label("Run status")).to_have_text("succeeded")

    # A run of f/demo/approve waits at its approval step; ada approves it in the inbox.
    approve = submit(ui_server, "f/demo/approve")
    page.goto(f"/runs/{approve}")
    expect(page.get_by_role("heading", level=1)).to_contain_text("f/demo/approve")
    expect(page.get_by_label("Run status")).to_have_text("waiting", timeout=30_000)
    expect(page.get_by_test_id("step-prepare")).to_have_attribute("data-status", "succeeded")
    expect(page.get_by_test_id("step-ok")).to_have_attribute("data-status", "waiting")

    page.get_by_role("navigation", name="Main").get_by_role("link", name="Approvals").click()
    expect(page.get_by_role("heading", level=1, name="Approvals")).to_be_visible()
    card = page.get_by_role("article").filter(has_text="Ship 42?")
    expect(card).to_have_count(1)
    expect(card.get_by_role("button", name="Reject")).to_be_visible()
    card.get_by_label("Comment (optional)").fill("ship it")
    card.get_by_role("button", name="Approve").click()
    expect(card).to_have_count(0)

    page.goto(f"/runs/{approve}")
    expect(page.get_by_label("Run status")).to_have_text("succeeded", timeout=30_000)
    expect(page.get_by_test_id("step-ok")).to_have_attribute("data-status", "succeeded")
    expect(page.get_by_test_id("step-finish")).to_have_attribute("data-status", "succeeded")
    expect(page.get_by_text('"hello ada"')).to_be_visible()

    # Signing out ends the session: the pages send the visitor to sign in.
    page.get_by_role("button", name="Sign out").click()
    expect(page).to_have_url(re.compile(r"/sign-in"))
    page.goto("/runs")
    expect(page).to_have_url(re.compile(r"/sign-in"))
    expect(page.get_by_role("button", name="Sign in")).to_be_visible()
    assert page_errors == []


def test_a_wrong_password_shows_the_api_message(page: Any, page_errors: list[str]) -> None:
    page.goto("/sign-in")
    page.get_by_label("Username").fill("bob")
    page.get_by_label("Password").fill("not the password")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_be_visible()
    expect(page).to_have_url(re.compile(r"/sign-in"))
    assert page_errors == []


def test_the_workspace_shows_an_item_and_its_versions(
    page: Any, ui_server: UiServer, page_errors: list[str]
) -> None:
    with ui_server.client("ada") as client:
        item = client.get("/api/items/f/demo/greet").json()
        answer = client.put(
            "/api/items/f/demo/greet",
            json={
                "kind": "script",
                "value": item["value"].replace("'hello '", "'hi '"),
                "message": "say hi",
            },
        )
        assert answer.status_code == 200, answer.text
        version = answer.json()["version"]
    sign_in(page)
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Workspace").click()
    expect(page.get_by_role("heading", level=1, name="Workspace")).to_be_visible()
    page.get_by_role("searchbox", name="Search").fill("greet")
    page.get_by_role("button", name="Search").click()
    page.get_by_role("link", name="f/demo/greet").first.click()
    expect(page.get_by_role("heading", level=1, name="f/demo/greet")).to_be_visible()
    expect(page.get_by_text("say hi")).to_be_visible()
    diff = page.locator("figure.diff")
    expect(diff.locator('tr[data-kind="add"]')).to_contain_text("'hi '")
    expect(diff.locator('tr[data-kind="remove"]')).to_contain_text("'hello '")

    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name=f"Restore v{version - 1}").click()
    expect(page.get_by_role("link", name=f"v{version + 1}")).to_be_visible()
    with ui_server.client("ada") as client:
        assert "'hello '" in client.get("/api/items/f/demo/greet").json()["value"]
    assert page_errors == []


def test_a_script_is_edited_and_saved_as_a_new_version(
    page: Any, ui_server: UiServer, page_errors: list[str]
) -> None:
    with ui_server.client("ada") as client:
        answer = client.put(
            "/api/items/f/demo/edited",
            json={"kind": "script", "value": "'''Edit me.'''\ndef main():\n    return 1\n"},
        )
        assert answer.status_code == 200, answer.text
    sign_in(page)
    page.goto("/workspace/f/demo/edited")
    expect(page.get_by_role("heading", level=1, name="f/demo/edited")).to_be_visible()
    page.get_by_role("button", name="Edit").click()
    editor = page.get_by_role("textbox", name="Code of f/demo/edited")
    editor.click()
    page.keyboard.press("ControlOrMeta+a")
    page.keyboard.insert_text("'''Edited.'''\ndef main():\n    return 2\n")
    page.get_by_label("What changed (optional)").fill("return 2")
    page.get_by_role("button", name="Save as v2").click()
    expect(page.get_by_text("return 2").first).to_be_visible()
    expect(page.get_by_role("link", name="v2")).to_be_visible()
    with ui_server.client("ada") as client:
        item = client.get("/api/items/f/demo/edited").json()
    assert item["version"] == 2
    assert item["value"] == "'''Edited.'''\ndef main():\n    return 2\n"
    assert item["summary"] == "Edited."
    assert page_errors == []
