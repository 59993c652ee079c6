"""Tracer specs (`"console"`, `"otel"`, ...) turned into tracers, for `AgentBuilder.observe`."""

from __future__ import annotations

import difflib
from typing import Any

from tidemill.agents.tracing._base import NullTracer, Tracer
from tidemill.agents.tracing._console import ConsoleTracer
from tidemill.agents.tracing._memory import MemoryTracer
from tidemill.agents.tracing._otel import OTelTracer
from tidemill.errors import ConfigurationError

__all__ = ["resolve_tracer"]

_NAMES = ("console", "memory", "otel", "none")


def resolve_tracer(spec: str | Tracer | None = None, /, **config: Any) -> Tracer:
    """Build a tracer from a name; pass a tracer object through.

    Names: `"console"` (the default: lines on standard error, `stream=`),
    `"memory"` (spans kept in a list), `"otel"` or `"opentelemetry"`
    (`tracer_provider=`, needs the `otel` extra), `"none"` (no tracing).
    Every tracer but `"none"` takes `capture_content=`.

    Raises:
        ConfigurationError: For an unknown name or option, or options given with an object.
        MissingDependencyError: For `"otel"` without `opentelemetry-api`.

    Examples:
        >>> type(resolve_tracer("memory", capture_content=True)).__name__
        'MemoryTracer'
        >>> resolve_tracer("consle")
        Traceback (most recent call last):
        ...
        tidemill.errors.ConfigurationError: Unknown tracer 'consle'. Hint: Did you mean ...
    """
    if spec is not None and not isinstance(spec, str):
        if not isinstance(spec, Tracer):
            raise ConfigurationError(
                f"Cannot use {type(spec).__name__} as a tracer.",
                hint="Pass 'console', 'memory', 'otel', 'none', or a Tracer (see BaseTracer).",
            )
        if config:
            raise ConfigurationError(
                "Options were given with a tracer object.",
                hint="Configure the object itself, or pass a tracer name with the options.",
            )
        return spec
    name = spec or "console"
    try:
        if name == "console":
            return ConsoleTracer(**config)
        if name == "memory":
            return MemoryTracer(**config)
        if name in ("otel", "opentelemetry"):
            return OTelTracer(**config)
        if name in ("none", "null", "off"):
            return NullTracer(**config)
    except TypeError as exc:
        raise ConfigurationError(f"Bad option for the {name!r} tracer: {exc}") from None
    close = difflib.get_close_matches(name, _NAMES, n=1)
    raise ConfigurationError(
        f"Unknown tracer {name!r}.",
        hint=(f"Did you mean {close[0]!r}? " if close else "")
        + "Use 'console', 'memory', 'otel' or 'none', or pass a Tracer.",
    )
