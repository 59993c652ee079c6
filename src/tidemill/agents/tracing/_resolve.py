"""Tracer specs (`"console"`, `"otel"`, ...) turned into tracers, for `AgentBuilder.observe`."""

from __future__ import annotations

import difflib
from collections.abc import Callable
from typing import Any

from tidemill.agents.tracing._base import NullTracer, Tracer
from tidemill.agents.tracing._console import ConsoleTracer
from tidemill.agents.tracing._langfuse import LangfuseTracer
from tidemill.agents.tracing._langsmith import LangSmithTracer
from tidemill.agents.tracing._memory import MemoryTracer
from tidemill.agents.tracing._otel import OTelTracer
from tidemill.agents.tracing._otlp import OTLPTracer
from tidemill.errors import ConfigurationError

__all__ = ["resolve_tracer"]

_FACTORIES: dict[str, Callable[..., Tracer]] = {
    "console": ConsoleTracer,
    "memory": MemoryTracer,
    "otel": OTelTracer,
    "opentelemetry": OTelTracer,
    "otlp": OTLPTracer,
    "langfuse": LangfuseTracer,
    "langsmith": LangSmithTracer,
    "none": NullTracer,
    "null": NullTracer,
    "off": NullTracer,
}
_NAMES = ("console", "memory", "otel", "otlp", "langfuse", "langsmith", "none")
_HINT = (
    "Use 'console', 'memory', 'otel', 'otlp', 'langfuse', 'langsmith' or 'none', or pass a Tracer."
)


def resolve_tracer(spec: str | Tracer | None = None, /, **config: Any) -> Tracer:
    """Build a tracer from a name; pass a tracer object through.

    Names: `"console"` (the default: lines on standard error, `stream=`),
    `"memory"` (spans kept in a list), `"otel"` or `"opentelemetry"`
    (`tracer_provider=`, needs the `otel` extra), `"otlp"` (OTLP/HTTP to
    `url=` with `headers=`), `"langfuse"` (`public_key=`, `secret_key=`,
    `host=`, else `LANGFUSE_*` variables), `"langsmith"` (`api_key=`,
    `endpoint=`, `project=`, else `LANGSMITH_*` variables), `"none"` (no
    tracing). The last three need the `otlp`, `langfuse` or `langsmith`
    extra. Every tracer but `"none"` takes `capture_content=`.

    Raises:
        ConfigurationError: For an unknown name or option, or options given with an object.
        MissingCredentialsError: For `"langfuse"` or `"langsmith"` without keys.
        MissingDependencyError: For `"otel"` without `opentelemetry-api`, or
            `"otlp"`, `"langfuse"`, `"langsmith"` without the OTLP exporter.

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
                hint=_HINT + " A tracer of your own subclasses BaseTracer.",
            )
        if config:
            raise ConfigurationError(
                "Options were given with a tracer object.",
                hint="Configure the object itself, or pass a tracer name with the options.",
            )
        return spec
    name = spec or "console"
    factory = _FACTORIES.get(name)
    if factory is not None:
        try:
            return factory(**config)
        except TypeError as exc:
            raise ConfigurationError(f"Bad option for the {name!r} tracer: {exc}") from None
    close = difflib.get_close_matches(name, _NAMES, n=1)
    raise ConfigurationError(
        f"Unknown tracer {name!r}.",
        hint=(f"Did you mean {close[0]!r}? " if close else "") + _HINT,
    )
