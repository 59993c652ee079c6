"""Every screen of the web UI, checked by axe-core: no serious or critical violations.

Each screen is a test of its own, opened signed in as ada (through the
sign-in form, once per module) except the sign-in page itself; each gets a
full-page screenshot in `tests/e2e/artifacts/a11y/<screen>.png` (the
artifacts folder is `$TIDEMILL_E2E_ARTIFACTS` when set), taken before
the check, so that a failing screen can be looked at.

axe checks no focus styles, so `test_keyboard_focus_is_visible` tabs
through a few screens and asks every control it reaches for a solid ring.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from tests.e2e.axe import AXE, report, violations
from tests.e2e.conftest import UiServer, need, screenshot, sign_in

pytest.importorskip("playwright")
from playwright.sync_api import expect

GATE = "f/demo/a11y_gate"
GATE_MESSAGE = "Hold for the accessibility check"
"""A flow of this module's, whose run waits for ada's decision: the approvals inbox has a card."""


@dataclass(frozen=True)
class Screen:
    """A screen: where it is (`{run}`, `{logs}`: the module's runs), what shows it is ready."""

    url: str
    heading: str
    """Text the page's `h1` contains."""
    ready: str | None = None
    """A selector that must be visible too (the data the screen loads)."""
    signed_in: bool = True


SCREENS = {
    "sign-in": Screen("/sign-in", "Sign in", signed_in=False),
    "runs": Screen("/runs", "Runs", "tr[data-run-id]"),
    "run": Screen("/runs/{run}", "f/demo/hello", '[data-testid="step-greet"]'),
    "run-step": Screen("/runs/{run}?step=greet", "f/demo/hello", 'aside[aria-label="Step greet"]'),
    "run-logs": Screen("/runs/{logs}?step=emit", "f/demo/a11y_logs", "pre.logs"),
    "approvals": Screen("/approvals", "Approvals", f'article:has-text("{GATE_MESSAGE}")'),
    "workspace": Screen("/workspace", "Workspace", 'a[href="/workspace/f/demo/greet"]'),
    "item-script": Screen("/workspace/f/demo/greet", "f/demo/greet"),
    "item-flow": Screen("/workspace/f/demo/hello", "f/demo/hello", "pre.json"),
    "item-variable": Screen("/workspace/f/demo/region", "f/demo/region"),
    "flow-editor": Screen("/edit/f/demo/hello", "f/demo/hello", ".cm-content"),
    "agent-editor": Screen("/agents/f/demo/assistant", "f/demo/assistant", ".cm-content"),
    "people": Screen("/people", "People"),
    "folders": Screen("/folders", "Folders"),
    "tokens": Screen("/tokens", "Tokens"),
    "audit": Screen("/audit", "Audit"),
    "not-found": Screen("/no/such/page", "Not found"),
}

# Screens whose violations are in files another helper is changing now (the lead fixes them).


@pytest.fixture(scope="module")
def axe_ready() -> None:
    need(AXE.is_file(), f"no axe-core ({AXE}): `make ui` installs the UI's packages")


def finished(client: Any, run: str, status: str = "succeeded") -> None:
    """Wait until `run` has `status`."""
    deadline = time.monotonic() + 30
    while (now := client.get(f"/api/runs/{run}").json()["status"]) != status:
        assert now in ("queued", "running") and time.monotonic() < deadline, now
        time.sleep(0.1)


@pytest.fixture(scope="module")
def hello_run(ui_server: UiServer) -> str:
    """A finished run of f/demo/hello, started by ada through the API."""
    with ui_server.client("ada") as client:
        answer = client.post("/api/runs", json={"path": "f/demo/hello", "inputs": {"name": "x"}})
        assert answer.status_code == 201, answer.text
        run = str(answer.json()["id"])
        finished(client, run)
    return run


@pytest.fixture(scope="module")
def logs_run(ui_server: UiServer) -> str:
    """A finished run of this module's flow whose step printed 200 lines (its drawer scrolls)."""
    script = "def main():\n    for i in range(200):\n        print('line', i)\n"
    flow = {"summary": "Print 200 lines", "steps": [{"id": "emit", "script": script}]}
    with ui_server.client("ada") as client:
        answer = client.put("/api/items/f/demo/a11y_logs", json={"kind": "flow", "value": flow})
        assert answer.status_code == 200, answer.text
        answer = client.post("/api/runs", json={"path": "f/demo/a11y_logs", "inputs": {}})
        assert answer.status_code == 201, answer.text
        finished(client, str(answer.json()["id"]))
        return str(answer.json()["id"])


@pytest.fixture(scope="module")
def waiting_gate(ui_server: UiServer) -> str:
    """A run of `GATE`, waiting for ada's approval (never decided: a card in her inbox)."""
    flow = {
        "summary": "Wait for a decision (the accessibility check's)",
        "steps": [{"id": "hold", "approval": {"message": GATE_MESSAGE, "approvers": ["ada"]}}],
    }
    with ui_server.client("ada") as client:
        answer = client.put(f"/api/items/{GATE}", json={"kind": "flow", "value": flow})
        assert answer.status_code == 200, answer.text
        answer = client.post("/api/runs", json={"path": GATE, "inputs": {}})
        assert answer.status_code == 201, answer.text
        run = str(answer.json()["id"])
        finished(client, run, "waiting")
    return run


@pytest.fixture(scope="module")
def ada_state(browser: Any, ui_server: UiServer) -> dict[str, Any]:
    """The cookies of ada signed in through the form (a context's storage state)."""
    context = browser.new_context(base_url=ui_server.url)
    try:
        sign_in(context.new_page())
        state: dict[str, Any] = context.storage_state()
        return state
    finally:
        context.close()


@pytest.fixture
def open_screen(
    browser: Any,
    ui_server: UiServer,
    ada_state: dict[str, Any],
    hello_run: str,
    logs_run: str,
    waiting_gate: str,
    axe_ready: None,
) -> Iterator[Any]:
    """Opens a screen in a new context (signed in as ada unless the screen is sign-in's)."""
    contexts: list[Any] = []

    def open_(screen: Screen) -> Any:
        state = ada_state if screen.signed_in else None
        context = browser.new_context(
            base_url=ui_server.url, storage_state=state, viewport={"width": 1280, "height": 900}
        )
        context.set_default_timeout(15_000)
        contexts.append(context)
        page = context.new_page()
        page.goto(screen.url.format(run=hello_run, logs=logs_run))
        heading = page.get_by_role("heading", level=1)
        expect(heading).to_contain_text(screen.heading, timeout=15_000)
        if screen.ready:
            expect(page.locator(screen.ready).first).to_be_visible(timeout=15_000)
        loading = page.locator("main").get_by_text(re.compile(r"^Loading"))
        expect(loading).to_have_count(0, timeout=15_000)
        return page

    try:
        yield open_
    finally:
        for context in contexts:
            context.close()


@pytest.mark.parametrize("name", list(SCREENS))
def test_screen_has_no_serious_accessibility_violations(name: str, open_screen: Any) -> None:
    page = open_screen(SCREENS[name])
    screenshot(page, f"a11y/{name}.png")
    found = violations(page)
    assert not found, f"{name} ({page.url}):\n{report(found)}"


_FOCUSED = """(count) => {
  const e = document.activeElement
  if (!e || e === document.body) return null
  if (e.dataset.tabbed === undefined) e.dataset.tabbed = String(count)  // the order it was reached
  const style = getComputedStyle(e)
  return {
    order: Number(e.dataset.tabbed),
    element: e.tagName.toLowerCase() + (e.id ? '#' + e.id : '') + ' '
      + (e.textContent || '').trim().slice(0, 30),
    style: style.outlineStyle,
    width: parseFloat(style.outlineWidth),
    // a part of a native control (a date field's picker button) has the focus: the browser draws it
    inner: !e.matches(':focus'),
  }
}"""


@pytest.mark.parametrize(
    ("name", "reaches"),
    [("sign-in", "button Sign in"), ("runs", "button Filter"), ("run", "button greet script")],
)
def test_keyboard_focus_is_visible(name: str, reaches: str, open_screen: Any) -> None:
    """Tabbing through a screen, every control it reaches shows a solid ring of 2px or more."""
    page = open_screen(SCREENS[name])
    seen: list[dict[str, Any]] = []
    for _ in range(40):
        page.keyboard.press("Tab")
        focused = page.evaluate(_FOCUSED, len(seen))
        again = seen and focused and focused["order"] == seen[-1]["order"]
        if focused is None or (focused["order"] != len(seen) and not again):  # back at the start
            break
        seen.append(focused)  # again when a field's parts (a date's day, month, year) are tabbed
    tabbed = " | ".join(f["element"] for f in seen)
    assert any(f["element"].startswith(reaches) for f in seen), tabbed
    faint = [f for f in seen if not f["inner"] and (f["style"] != "solid" or f["width"] < 2)]
    assert not faint, f"{name}: focus rings missing or thin: {faint}"
