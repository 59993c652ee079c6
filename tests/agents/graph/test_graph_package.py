"""The graph package: its public names, and the message when langgraph is missing."""

from __future__ import annotations

import importlib
import sys
import types

import pytest

from tidemill import ConfigurationError, MissingDependencyError


def test_without_langgraph_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(sys.modules):
        if name == "langgraph" or name.startswith(("langgraph.", "tidemill.agents.graph")):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "langgraph", None)  # what a missing package imports as
    with pytest.raises(MissingDependencyError) as info:
        importlib.import_module("tidemill.agents.graph")
    assert isinstance(info.value, ConfigurationError)
    assert info.value.extra == "graph"
    assert "pip install 'tidemill[graph]'" in str(info.value)
    assert "graph runtime" in str(info.value)


def test_all_is_importable_and_complete() -> None:
    module = importlib.import_module("tidemill.agents.graph")
    exported = list(module.__all__)
    assert all(hasattr(module, symbol) for symbol in exported)
    assert len(set(exported)) == len(exported)
    public = {
        attr
        for attr, value in vars(module).items()
        if not attr.startswith("_")
        and not isinstance(value, types.ModuleType)
        and str(getattr(value, "__module__", module.__name__)).startswith(module.__name__)
    }
    assert public <= set(exported)
