"""Helpers for the flow tests: parse a flow and collect its problems."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tidemill.errors import FlowValidationError
from tidemill.flows import Flow, Problem

EXAMPLES = Path(__file__).parent / "examples"

Problems = Callable[..., list[Problem]]


def _problems(text: str, **kwargs: Any) -> list[Problem]:
    with pytest.raises(FlowValidationError) as info:
        Flow.parse(text, **kwargs)
    problems = info.value.problems
    assert problems, "a FlowValidationError must carry at least one problem"
    return [Problem(p.step, p.field, p.message) for p in problems]


@pytest.fixture
def problems() -> Problems:
    """Parse YAML text that must be invalid; return its problems."""
    return _problems


@pytest.fixture
def examples() -> Path:
    """The directory of example flows."""
    return EXAMPLES
