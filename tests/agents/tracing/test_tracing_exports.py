"""The guardrails and tracing packages export what they define.

Their docs pages run in tests/test_docs_site.py.
"""

from __future__ import annotations

import importlib
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
