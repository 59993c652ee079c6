"""The guardrails and tracing packages export what they define, and their docs pages run."""

from __future__ import annotations

import importlib
import re
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("name", ["tidemill.agents.guardrails", "tidemill.agents.tracing"])
def test_all_is_importable_and_complete(name: str) -> None:
    module = importlib.import_module(name)
    exported = list(module.__all__)
    assert len(set(exported)) == len(exported)
    for symbol in exported:
        assert hasattr(module, symbol), f"{name}.{symbol} is in __all__ but missing"
    public = {
        attr
        for attr, value in vars(module).items()
        if not attr.startswith("_")
        and not isinstance(value, types.ModuleType)
        and str(getattr(value, "__module__", name)).startswith(name)
    }
    assert not public - set(exported)


@pytest.mark.parametrize("page", ["guardrails.md", "tracing.md"])
def test_the_docs_page_examples_run(page: str, capsys: pytest.CaptureFixture[str]) -> None:
    text = (ROOT / "docs" / page).read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL)
    assert blocks
    namespace: dict[str, object] = {"__name__": page}
    for index, block in enumerate(blocks):
        exec(compile(block, f"{page} block {index}", "exec"), namespace)
