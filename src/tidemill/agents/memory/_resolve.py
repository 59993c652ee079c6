"""Memory names (`"window"`, `"summary"`, ...) turned into memories."""

from __future__ import annotations

import difflib
from collections.abc import Callable
from typing import Any

from tidemill.agents.memory._base import Memory
from tidemill.agents.memory._composite import CompositeMemory
from tidemill.agents.memory._strategies import BufferMemory, NoMemory, WindowMemory
from tidemill.agents.memory._summary import SummaryMemory
from tidemill.agents.memory._vector import VectorMemory
from tidemill.errors import ConfigurationError

__all__ = ["resolve_memory"]

_KINDS: dict[str, Callable[..., Memory]] = {
    "buffer": BufferMemory,
    "window": WindowMemory,
    "summary": SummaryMemory,
    "vector": VectorMemory,
    "composite": CompositeMemory,
    "off": NoMemory,
}
_NAMES = "'window', 'buffer', 'summary', 'vector', 'composite' or 'off'"


def resolve_memory(spec: str | Memory, **config: Any) -> Memory:
    """Build a memory from its name and options; pass a `Memory` through.

    Raises:
        ConfigurationError: For an unknown name or option.

    Examples:
        >>> resolve_memory("window", size=4).describe()
        {'kind': 'window', 'size': 4}
        >>> resolve_memory("vector", embedder="fake", k=2).describe()["kind"]
        'vector'
        >>> resolve_memory("vectr")
        Traceback (most recent call last):
        ...
        tidemill.errors.ConfigurationError: Unknown memory 'vectr'. Hint: Did you mean 'vector'? ...
    """
    if not isinstance(spec, str):
        if not isinstance(spec, Memory):
            raise ConfigurationError(
                f"Cannot use {type(spec).__name__} as a memory.",
                hint=f"Pass {_NAMES} or a Memory.",
            )
        if config:
            raise ConfigurationError("Options were given for a memory object.")
        return spec
    kind = _KINDS.get(spec)
    if kind is None:
        close = difflib.get_close_matches(spec, _KINDS, n=1)
        raise ConfigurationError(
            f"Unknown memory {spec!r}.",
            hint=(f"Did you mean {close[0]!r}? " if close else "") + f"Use {_NAMES}.",
        )
    try:
        return kind(**config)
    except TypeError as exc:
        raise ConfigurationError(
            f"Bad option for the {spec!r} memory: {exc}",
            hint=f"See the options of the {spec!r} memory in docs/agents/memory.md.",
        ) from None
