"""axe-core in a Playwright page: its serious and critical violations, and a readable report.

axe is the UI's own dev dependency (`ui/node_modules/axe-core`, installed by
`make ui`). The UI's page has a nonce content security policy, which blocks
the inline `<script>` that `page.add_script_tag` would add; so the file's
text is evaluated through the DevTools protocol instead (`page.evaluate`,
which the policy does not govern), leaving the page's policy in force.

Examples:
    >>> node = {"target": ["#q"], "html": '<input id="q">', "failureSummary": "Fix it"}
    >>> print(report([{"id": "label", "impact": "critical", "help": "Inputs need labels",
    ...     "helpUrl": "https://x/label", "nodes": [node]}]))
    label (critical): Inputs need labels https://x/label
      #q <input id="q">: Fix it
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

AXE = Path(__file__).parents[2] / "ui" / "node_modules" / "axe-core" / "axe.min.js"
SERIOUS = ("serious", "critical")
"""The impacts a screen must not have."""

_RUN = """async () => {
  const results = await window.axe.run(document, { resultTypes: ['violations'] })
  return results.violations.map((v) => ({
    id: v.id, impact: v.impact, help: v.help, helpUrl: v.helpUrl,
    nodes: v.nodes.map((n) => ({
      target: n.target, html: n.html, failureSummary: n.failureSummary,
    })),
  }))
}"""


@cache
def _source() -> str:
    return AXE.read_text(encoding="utf-8")


def violations(page: Any, impacts: tuple[str, ...] = SERIOUS) -> list[dict[str, Any]]:
    """axe-core's violations of `page`'s current document whose impact is one of `impacts`."""
    if not page.evaluate("() => typeof window.axe === 'object'"):
        page.evaluate(f"() => {{ {_source()}\n}}")
    found: list[dict[str, Any]] = page.evaluate(_RUN)
    return [v for v in found if v["impact"] in impacts]


def report(found: list[dict[str, Any]]) -> str:
    """Each violation: its rule, impact, help and link; then each element's target and failure."""
    lines: list[str] = []
    for v in found:
        lines.append(f"{v['id']} ({v['impact']}): {v['help']} {v['helpUrl']}")
        for node in v["nodes"]:
            summary = " ".join(str(node.get("failureSummary") or "").split())
            html = " ".join(str(node.get("html") or "").split())
            html = html if len(html) <= 80 else html[:77] + "..."
            lines.append(f"  {' '.join(map(str, node['target']))} {html}: {summary}")
    return "\n".join(lines)


def assert_accessible(page: Any) -> None:
    """Fail, listing them, on serious or critical violations of `page` as it is now."""
    found = violations(page)
    assert not found, f"{page.url}:\n{report(found)}"
