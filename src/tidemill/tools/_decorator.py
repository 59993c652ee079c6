"""`@tool`: turn a function into a tool."""

from __future__ import annotations

from collections.abc import Callable
from typing import ParamSpec, TypeVar, overload

from tidemill.tools._tool import FunctionTool

__all__ = ["tool"]

P = ParamSpec("P")
R = TypeVar("R")


@overload
def tool(function: Callable[P, R], /) -> FunctionTool[P, R]: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    requires_approval: bool = False,
) -> Callable[[Callable[P, R]], FunctionTool[P, R]]: ...


def tool(
    function: Callable[P, R] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    requires_approval: bool = False,
) -> FunctionTool[P, R] | Callable[[Callable[P, R]], FunctionTool[P, R]]:
    """Make a function into a tool, bare or with options.

    The argument schema comes from the type hints, argument descriptions from
    the docstring's `Args:` section, and the description from its summary.
    The function stays callable as before.

    Args:
        function: The function, when used bare (`@tool`).
        name: The name the model sees; the function's name by default.
        description: Overrides the docstring's summary.
        requires_approval: Pause the run for a human decision before each call.

    Examples:
        >>> @tool
        ... def add(a: int, b: int = 0) -> int:
        ...     '''Add two numbers.
        ...
        ...     Args:
        ...         a: The first number.
        ...         b: The second number.
        ...     '''
        ...     return a + b
        >>> add(2, 3)
        5
        >>> add.parameters["properties"]["a"]
        {'description': 'The first number.', 'type': 'integer'}
        >>> @tool(requires_approval=True)
        ... def deploy(env: str) -> str:
        ...     '''Deploy to an environment.'''
        ...     return f"deployed to {env}"
        >>> deploy.requires_approval
        True
    """

    def wrap(fn: Callable[P, R]) -> FunctionTool[P, R]:
        return FunctionTool(
            fn, name=name, description=description, requires_approval=requires_approval
        )

    if function is not None:
        return wrap(function)
    return wrap
