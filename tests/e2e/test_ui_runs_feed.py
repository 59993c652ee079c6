"""The runs list over the runs feed in a real browser: new runs appear and finish without a
reload, and the list is read again when a run changes, not polled.

This module seeds one flow only it uses: `f/demo/runsfeed_nap`, a step that
sleeps a while, so a run stays `running` through a quiet spell (the list
polled every 3 s while a run was active, before the feed).
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from tests.e2e.conftest import UiServer, sign_in

pytest.importorskip("playwright")
from playwright.sync_api import expect

NAP = {
    "summary": "Sleep a while (the runs feed test's)",
    "steps": [
        {
            "id": "nap",
            "script": "import time\ndef main():\n    time.sleep(9)\n    return 'rested'\n",
        }
    ],
}

QUIET = 6000
"""Milliseconds watched while nothing changes: the list polled twice in as long before."""


@pytest.fixture(scope="module", autouse=True)
def seeded(ui_server: UiServer) -> None:
    ui_server.ws.write("f/demo/runsfeed_nap", "flow", NAP)


def submit(ui_server: UiServer, path: str, inputs: dict[str, Any] | None = None) -> str:
    with ui_server.client("ada") as client:
        answer = client.post("/api/runs", json={"path": path, "inputs": inputs or {}})
        assert answer.status_code == 201, answer.text
        return str(answer.json()["id"])


def test_the_runs_list_follows_the_feed_and_does_not_poll(
    page: Any, ui_server: UiServer, page_errors: list[str]
) -> None:
    reads: list[float] = []
    page.on(
        "request",
        lambda request: reads.append(time.monotonic()) if "/api/runs?" in request.url else None,
    )
    sign_in(page)
    page.goto("/runs")
    live = page.get_by_role("status", name="The list updates as runs change")
    expect(live).to_have_text("Live")

    # A run submitted elsewhere appears, and reaches succeeded, without a reload.
    hello = submit(ui_server, "f/demo/hello", {"name": "feed"})
    row = page.locator(f'tr[data-run-id="{hello}"]')
    expect(row.get_by_text("succeeded")).to_be_visible(timeout=15_000)
    expect(row.get_by_role("link", name="f/demo/hello")).to_be_visible()

    # A long run in the list: while it runs and nothing changes, the list is not read.
    napping = submit(ui_server, "f/demo/runsfeed_nap")
    nap_row = page.locator(f'tr[data-run-id="{napping}"]')
    expect(nap_row.get_by_text("running")).to_be_visible(timeout=15_000)
    page.wait_for_timeout(1000)  # the reads its run_queued asked for are done
    before = len(reads)
    page.wait_for_timeout(QUIET)
    assert len(reads) - before <= 1, f"the list was read {len(reads) - before} times while quiet"
    expect(live).to_have_text("Live")

    # Its end is a change: the list shows it without a reload.
    expect(nap_row.get_by_text("succeeded")).to_be_visible(timeout=15_000)
    # Every read was the page's first, the feed's opening, or one a change asked for.
    assert len(reads) <= 8, f"the list was read {len(reads)} times"
    assert not page_errors, page_errors
