"""`TidemillError`, the base of every error, and the errors of a wrong setup.

A `ConfigurationError` says the code or config is wrong: fix it and retry.
Its subclasses here say what is missing: an optional extra, or credentials.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = [
    "ConfigurationError",
    "InvalidOption",
    "MissingCredentialsError",
    "MissingDependencyError",
    "TidemillError",
]


class TidemillError(Exception):
    """Base class of every error Tidemill raises.

    Args:
        message: What happened.
        hint: What to do about it, shown after the message.
        context: JSON-safe facts that help diagnose the error.

    Examples:
        >>> err = TidemillError("No such thread.", hint="List threads with threads().")
        >>> str(err)
        'No such thread. Hint: List threads with threads().'
    """

    def __init__(
        self,
        message: str,
        *,
        hint: str | None = None,
        context: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.context: dict[str, Any] = dict(context or {})

    def __str__(self) -> str:
        if self.hint:
            return f"{self.message} Hint: {self.hint}"
        return self.message


class ConfigurationError(TidemillError):
    """The agent, tool or component was set up wrongly.

    Raised while configuring or building, before anything runs or is stored.
    """


class InvalidOption(ConfigurationError, ValueError):
    """An option was given a value it cannot take, such as `max_iterations(0)`.

    Also a `ValueError`, so code written against the standard exception catches it.

    Examples:
        >>> from tidemill import agent
        >>> try:
        ...     agent().max_iterations(0)
        ... except ValueError as exc:
        ...     print(type(exc).__name__)
        InvalidOption
    """


class MissingDependencyError(ConfigurationError):
    """An optional dependency is not installed.

    Args:
        package: The importable package that is missing.
        extra: The `tidemill` extra that installs it.
        feature: What needs it, for the message.
    """

    def __init__(self, package: str, *, extra: str, feature: str) -> None:
        super().__init__(
            f"{feature} needs the {package!r} package, which is not installed.",
            hint=f"Install it with: pip install 'tidemill[{extra}]'",
            context={"package": package, "extra": extra},
        )
        self.package = package
        self.extra = extra


class MissingCredentialsError(ConfigurationError):
    """A provider needs a key, a token, a project or a region that was not given.

    The message names what is missing; `context["env"]`, when present, names
    the environment variable(s) that would supply it.
    """
