"""Checkpointer specs (`"memory"`, `"sqlite"`, URLs) turned into checkpointers."""

from __future__ import annotations

import difflib
from typing import Any

from tidemill.agents.checkpoint._base import Checkpointer
from tidemill.agents.checkpoint._memory import MemoryCheckpointer
from tidemill.agents.checkpoint._postgres import PostgresCheckpointer
from tidemill.agents.checkpoint._sqlite import SQLiteCheckpointer
from tidemill.errors import ConfigurationError

__all__ = ["resolve_checkpointer"]

_NAMES = ("memory", "sqlite", "postgres")


def resolve_checkpointer(spec: str | Checkpointer | None = None, **config: Any) -> Checkpointer:
    """Build a checkpointer from a name or URL; pass a checkpointer through.

    Accepts `None` or `"memory"`; `"sqlite"` (with `path=`) or
    `"sqlite:///path/to.db"`; `"postgres"` (with `url=`, `schema=`) or a
    `postgresql://` URL (with `schema=`).

    Raises:
        ConfigurationError: For an unknown name or a bad option.

    Examples:
        >>> type(resolve_checkpointer("memory")).__name__
        'MemoryCheckpointer'
        >>> resolve_checkpointer("sqlite:///:memory:").path
        ':memory:'
    """
    if spec is not None and not isinstance(spec, str):
        if not isinstance(spec, Checkpointer):
            raise ConfigurationError(
                f"Cannot use {type(spec).__name__} as a checkpointer.",
                hint="Pass 'memory', 'sqlite', 'postgres', a URL, or a Checkpointer.",
            )
        if config:
            raise ConfigurationError("Options were given for a checkpointer object.")
        return spec
    name = spec or "memory"
    try:
        if name == "memory":
            return MemoryCheckpointer(**config)
        if name == "sqlite":
            return SQLiteCheckpointer(**config)
        if name.startswith("sqlite:///"):
            return SQLiteCheckpointer(name.removeprefix("sqlite:///"), **config)
        if name in ("postgres", "postgresql"):
            return PostgresCheckpointer(**config)
        if name.startswith(("postgres://", "postgresql://")):
            return PostgresCheckpointer(name, **config)
    except TypeError as exc:
        raise ConfigurationError(f"Bad option for the {name!r} checkpointer: {exc}") from None
    close = difflib.get_close_matches(name, _NAMES, n=1)
    raise ConfigurationError(
        f"Unknown checkpointer {name!r}.",
        hint=(f"Did you mean {close[0]!r}? " if close else "")
        + "Use 'memory', 'sqlite', 'postgres', 'sqlite:///path' or 'postgresql://...'.",
    )
