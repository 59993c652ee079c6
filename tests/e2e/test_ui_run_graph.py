"""The run page's graph stays still while the run moves: no node hidden again, no refit.

React Flow hides a node it has no size for; the run page rebuilds its nodes on
every event, so a graph that did not keep their sizes would blink (and refit)
on each one, and clicks on a node would race the blinking.
"""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect
from tests.e2e.conftest import PASSWORD, UiServer

STEADY = {
    "summary": "Three steps that take their time, printing as they go",
    "steps": [
        {
            "id": "first",
            "script": "import time\ndef main():\n    for i in range(6):\n"
            "        print('tick', i, flush=True)\n        time.sleep(0.25)\n    return 1\n",
        },
        {"id": "second", "script": "import time\ndef main():\n    time.sleep(0.5)\n    return 2\n"},
        {"id": "third", "script": "def main():\n    return 3\n"},
    ],
}

# Installed before the page's scripts: every time a shown node is hidden again, and each
# transform the graph's viewport takes once its nodes were first shown.
_WATCH = """
window.__graph = { shown: new Set(), rehidden: [], transforms: [] };
new MutationObserver(() => {
  const g = window.__graph;
  for (const node of document.querySelectorAll('.react-flow__node')) {
    const id = node.getAttribute('data-id');
    if (node.style.visibility === 'hidden') { if (g.shown.has(id)) g.rehidden.push(id); }
    else g.shown.add(id);
  }
  const viewport = document.querySelector('.react-flow__viewport');
  if (viewport && g.shown.size >= 3) {
    const t = viewport.style.transform;
    if (g.transforms[g.transforms.length - 1] !== t) g.transforms.push(t);
  }
}).observe(document, {
  childList: true, subtree: true, attributes: true, attributeFilter: ['style'],
});
"""


@pytest.fixture(scope="module")
def steady(ui_server: UiServer) -> str:
    ui_server.ws.write("f/demo/graph_steady", "flow", STEADY)
    return "f/demo/graph_steady"


def test_the_graph_keeps_its_nodes_and_view_while_the_run_moves(
    page: Any, ui_server: UiServer, steady: str, page_errors: list[str]
) -> None:
    page.goto("/sign-in")
    page.get_by_label("Username").fill("ada")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_test_id("current-user")).to_have_text("ada")

    page.add_init_script(_WATCH)
    with ui_server.client("ada") as client:
        answer = client.post("/api/runs", json={"path": steady, "inputs": {}})
        assert answer.status_code == 201, answer.text
        run_id = answer.json()["id"]
    page.goto(f"/runs/{run_id}")
    expect(page.get_by_test_id("step-first")).to_be_visible()
    expect(page.get_by_label("Run status")).to_have_text("succeeded", timeout=30_000)
    expect(page.get_by_test_id("step-third")).to_have_attribute("data-status", "succeeded")
    graph = page.evaluate(
        "() => ({ shown: [...window.__graph.shown], rehidden: window.__graph.rehidden,"
        " transforms: window.__graph.transforms })"
    )
    assert sorted(graph["shown"]) == ["first", "second", "third"]
    assert graph["rehidden"] == [], f"nodes hidden again while the run moved: {graph['rehidden']}"
    assert len(graph["transforms"]) <= 2, f"the view moved: {graph['transforms']}"
    assert page_errors == []
