"""`Concurrency`: how many runs of a flow may be active at once."""

from __future__ import annotations

from pydantic import Field

from tidemill.flows._base import ExpressionText, FlowModel
from tidemill.flows._expr import Expression, compile_expression

__all__ = ["Concurrency"]


class Concurrency(FlowModel):
    """How many runs of the flow may be active at once.

    Examples:
        >>> Concurrency(limit=2, key="flow_input.customer").key_expression
        Expression('flow_input.customer')
    """

    limit: int = Field(ge=1)
    """The most runs active at the same time (per key, when `key` is set)."""

    key: ExpressionText | None = None
    """An expression over `flow_input`; runs with different keys do not limit each other."""

    @property
    def key_expression(self) -> Expression | None:
        """`key`, compiled."""
        return None if self.key is None else compile_expression(self.key)
