"""The benchmarks' own arithmetic: how `agent_loop.py` judges its targets."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


@pytest.fixture(scope="module")
def agent_loop() -> ModuleType:
    spec = importlib.util.spec_from_file_location("agent_loop", BENCHMARKS / "agent_loop.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["agent_loop"] = module  # dataclasses look their module up by name
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules["agent_loop"]
    return module


def results(module: ModuleType, us: dict[str, dict[int, float]]) -> list[object]:
    rows = {row.label: row for row in module.ROWS}
    return [module.Result(rows[label], us=dict(cells)) for label, cells in us.items()]


def test_targets_scale_with_langgraphs_speed_at_each_size(agent_loop: ModuleType) -> None:
    # LangGraph at 2.8 ms is twice the 1.4 ms the targets were set beside: 100 us may pass.
    measured = results(
        agent_loop,
        {
            "LangGraph, no checkpointer": {10: 2800.0, 50: 1400.0},
            "Tidemill, memory": {10: 99.0, 50: 45.0},
            "Tidemill, memory + features": {10: 99.0, 50: 51.0},  # over at N=50
            "Tidemill, SQLite": {10: 310.0, 50: 100.0},  # over at N=10
        },
    )
    checks, factors = agent_loop.scaled_checks(measured)
    assert factors == {10: 2.0, 50: 1.0}
    verdicts = {check.label: check.passed for check in checks}
    assert verdicts == {
        "Tidemill, memory": True,
        "Tidemill, memory + features": False,
        "Tidemill, SQLite": False,
    }
    sqlite = next(c for c in checks if c.label == "Tidemill, SQLite")
    assert sqlite.measured == "worst 310 us at N=10 against 300 us"


def test_without_langgraph_nothing_is_scaled(agent_loop: ModuleType) -> None:
    measured = results(agent_loop, {"Tidemill, memory": {10: 30.0}})
    assert agent_loop.scaled_checks(measured) == ([], {})
    skipped = results(agent_loop, {"LangGraph, no checkpointer": {}, "Tidemill, memory": {10: 1}})
    assert agent_loop.scaled_checks(skipped) == ([], {})
