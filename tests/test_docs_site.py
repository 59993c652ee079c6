"""Every Python example on the docs site runs, page by page, in order.

Each page's ```python blocks run one after another in one namespace (a later
block may use what an earlier one defined), in a temporary working directory
and with no provider keys set, so examples use the offline model or local
servers they start themselves. A block that cannot run here is not an
example: show it as text, or make it runnable.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parent.parent / "docs"
PAGES = sorted(DOCS.rglob("*.md"))


def python_blocks(markdown: str) -> list[str]:
    """The bodies of the page's ```python fences, in order."""
    return re.findall(r"^```python[^\n]*\n(.*?)^```", markdown, flags=re.DOTALL | re.MULTILINE)


def test_python_blocks_finds_fences_with_titles() -> None:
    text = '```python\na = 1\n```\n\n```python title="x.py"\nb = 2\n```\n```yaml\nc: 3\n```\n'
    assert python_blocks(text) == ["a = 1\n", "b = 2\n"]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(DOCS)))
def test_the_python_examples_of_a_page_run_in_order(
    page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocks = python_blocks(page.read_text())
    if not blocks:
        pytest.skip(f"{page.relative_to(DOCS)} has no Python examples")
    monkeypatch.chdir(tmp_path)
    for name in list(os.environ):
        if name.endswith("_API_KEY"):
            monkeypatch.delenv(name)
    namespace: dict[str, object] = {"__name__": f"docs.{page.stem}"}
    for index, block in enumerate(blocks):
        source = f"docs/{page.relative_to(DOCS)} block {index}"
        try:
            exec(compile(block, source, "exec", dont_inherit=True), namespace)
        except Exception as exc:  # pragma: no cover - the message is the point
            raise AssertionError(f"{source} failed: {exc!r}\n{block}") from exc
