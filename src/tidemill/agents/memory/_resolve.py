"""Memory names (`"window"`, `"summary"`, ...) turned into memories."""

from __future__ import annotations

import difflib
from typing import Any

from tidemill.agents.memory._base import Memory
from tidemill.agents.memory._strategies import BufferMemory, NoMemory, WindowMemory
from tidemill.agents.memory._summary import SummaryMemory
from tidemill.errors import ConfigurationError

__all__ = ["resolve_memory"]

_KINDS: dict[str, type[BufferMemory | NoMemory | WindowMemory | SummaryMemory]] = {
    "buffer": BufferMemory,
    "window": WindowMemory,
    "summary": SummaryMemory,
    "off": NoMemory,
}


def resolve_memory(spec: str | Memory, **config: Any) -> Memory:
    """Build a memory from its name and options; pass a `Memory` through.

    Raises:
        ConfigurationError: For an unknown name or option.

    Examples:
        >>> resolve_memory("window", size=4).describe()
        {'kind': 'window', 'size': 4}
    """
    if not isinstance(spec, str):
        if not isinstance(spec, Memory):
            raise ConfigurationError(
                f"Cannot use {type(spec).__name__} as a memory.",
                hint="Pass 'window', 'buffer', 'summary', 'off' or a Memory.",
            )
        if config:
            raise ConfigurationError("Options were given for a memory object.")
        return spec
    kind = _KINDS.get(spec)
    if kind is None:
        close = difflib.get_close_matches(spec, _KINDS, n=1)
        raise ConfigurationError(
            f"Unknown memory {spec!r}.",
            hint=(f"Did you mean {close[0]!r}? " if close else "")
            + "Use 'window', 'buffer', 'summary' or 'off'.",
        )
    try:
        return kind(**config)
    except TypeError as exc:
        raise ConfigurationError(f"Bad option for the {spec!r} memory: {exc}") from None
