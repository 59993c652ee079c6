"""`Identity`: a step that passes data through."""

from __future__ import annotations

from tidemill.flows._base import StepKind

__all__ = ["Identity"]


class Identity(StepKind):
    """A step whose result is its evaluated inputs, or the previous result when it has none.

    Useful as a join point (`needs: [a, b]`) or to reshape data with `inputs`.
    In YAML, `identity: {}`, `identity:` and `identity: true` all mean the same.

    Examples:
        >>> Identity()
        Identity()
    """
