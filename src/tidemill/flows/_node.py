"""What the code below the models knows of a step: `StepNode`, the kind keys, the id pattern.

`Flow`, `Step` and the kinds that hold steps refer to each other (a step may
hold steps, or a whole flow), so they live in two modules that import each
other, `_flow` and `_nesting`. Walking a flow (`_scope`), checking it
(`_check`), reading it (`_load`, `_convert`) and its JSON Schema (`_schema`)
are written against this module instead of `Step`, so they sit below the
models, and the models call them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, Self

from tidemill.flows._expr import Expression
from tidemill.flows._problems import Problem

__all__ = ["ID_PATTERN", "KINDS", "StepNode"]

KINDS = (
    "script",
    "flow",
    "branch",
    "parallel",
    "for_each",
    "approval",
    "sleep",
    "wait_for_event",
    "identity",
    "ai_action",
    "ai_agent",
)
"""The kind keys of a step (`Step.KINDS`); a step sets exactly one."""

ID_PATTERN = r"^[A-Za-z_][A-Za-z0-9_-]*$"
"""What a step id looks like."""


class StepNode(Protocol):
    """What walking and checking a flow need of a step; `Step` is the one implementation."""

    @property
    def id(self) -> str:
        """The step's id, unique in the whole flow."""
        ...

    @property
    def needs(self) -> Sequence[str] | None:
        """The steps of the same list it waits for; None: the one before."""
        ...

    @property
    def inputs(self) -> Mapping[str, Any]:
        """Its named inputs."""
        ...

    @property
    def kind(self) -> str:
        """The kind key that is set."""
        ...

    def bodies(self) -> tuple[tuple[str, Sequence[Self]], ...]:
        """The lists of nested steps, each with its field path."""
        ...

    def expressions_by_field(self) -> Mapping[str, Expression]:
        """Its own expressions, keyed by field path."""
        ...

    def templates_by_field(self) -> Mapping[str, str]:
        """Its prompt templates (`{{ ... }}` placeholders), keyed by field path."""
        ...

    def mistakes(self) -> Sequence[Problem]:
        """What its kind's settings tell of it alone: model specs, `main`'s parameters."""
        ...
