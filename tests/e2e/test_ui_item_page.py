"""An item's page: what running it takes, and the History drawer clearing past versions."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import expect
from tests.e2e.conftest import UiServer, sign_in


def test_past_versions_are_cleared_from_the_item_page(
    page: Any, ui_server: UiServer, page_errors: list[str]
) -> None:
    path = "f/demo/history_three"
    for n in range(3):
        ui_server.ws.write(path, "script", f"def main():\n    return {n}\n", message=f"v{n + 1}")
    sign_in(page)
    page.goto(f"/workspace/{path}")
    versions = page.locator("table.versions tbody tr")
    expect(versions).to_have_count(3)

    page.get_by_role("button", name="History…").click()
    drawer = page.get_by_role("dialog", name=f"History of {path}")
    drawer.get_by_role("button", name="Clear past versions").click()
    drawer.get_by_role("button", name="Cancel").click()  # asked first: nothing dropped yet
    assert len(ui_server.ws.history(path)) == 3
    drawer.get_by_role("button", name="Clear past versions").click()
    drawer.get_by_role("button", name="Clear them").click()
    expect(drawer.get_by_role("button", name="Clear past versions")).to_have_count(0)
    page.keyboard.press("Escape")
    expect(versions).to_have_count(1)
    assert [v.version for v in ui_server.ws.history(path)] == [3]
    assert page_errors == []


def test_a_flow_and_a_script_say_what_they_take(page: Any, page_errors: list[str]) -> None:
    sign_in(page)
    page.goto("/workspace/f/demo/hello")
    rows = page.get_by_role("table", name="Inputs of f/demo/hello").get_by_role("row")
    expect(rows).to_have_count(2)
    expect(rows.nth(1)).to_have_text("namestringyesWhom to greet")
    page.goto("/workspace/f/demo/greet")
    rows = page.get_by_role("table", name="Inputs of f/demo/greet").get_by_role("row")
    expect(rows.nth(1)).to_contain_text("name")
    expect(rows.nth(1)).to_contain_text("string")
    assert page_errors == []
