"""`OTLPTracer`: spans posted over OTLP/HTTP to one endpoint, the base of the vendor tracers.

Langfuse and LangSmith both ingest OpenTelemetry traces over OTLP/HTTP, so
their tracers are this one with a URL, auth headers and the attributes each
vendor's UI reads. It owns its own OpenTelemetry `TracerProvider` (nothing
global is touched) and a batching processor; `close()`/`aclose()` sends what
is still queued, and an agent built from a name closes it with the agent.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, ClassVar
from urllib.parse import urlsplit

from pydantic import JsonValue

from tidemill.agents.tracing._otel import OTelTracer
from tidemill.errors import ConfigurationError, MissingDependencyError

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider

__all__ = ["OTLPTracer", "setting"]


class OTLPTracer(OTelTracer):
    """Sends spans over OTLP/HTTP (protobuf) to one URL, with headers of its own.

    Use it for any OTLP/HTTP collector; `LangfuseTracer` and `LangSmithTracer`
    are this tracer configured for those vendors. Spans are batched and sent
    from a background thread; `close()` (or `aclose()`) sends what is left and
    stops it. An agent given the tracer by name (`.observe("otlp", url=...)`)
    closes it when the agent is closed. Header values are never shown by
    `repr()` or `describe()`: they often hold keys.

    Needs `pip install 'tidemill[otlp]'` (the OpenTelemetry SDK and its
    OTLP/HTTP exporter).

    Args:
        url: Where spans are posted, the full traces path included
            (`http://collector:4318/v1/traces`).
        headers: Sent with every export, such as an `Authorization` header.
        service_name: The `service.name` resource attribute.
        timeout: Seconds one export may take, retries included.
        capture_content: Record prompts, answers, tool arguments and results.

    Raises:
        ConfigurationError: When `url` is not an http(s) URL.
        MissingDependencyError: When the OTLP exporter is not installed.

    Examples:
        >>> tracer = OTLPTracer("http://127.0.0.1:4318/v1/traces", headers={"x-token": "s3cret"})
        >>> tracer.describe()
        {'type': 'OTLPTracer', 'capture_content': False, 'url': 'http://127.0.0.1:4318/v1/traces'}
        >>> tracer.close()
    """

    extra: ClassVar[str] = "otlp"
    """The `tidemill` extra that installs what this tracer needs."""

    def __init__(
        self,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        service_name: str = "tidemill",
        timeout: float = 10.0,
        capture_content: bool = False,
    ) -> None:
        _check_url(url, type(self).__name__)
        provider = self._provider_for(url, dict(headers or {}), service_name, timeout)
        super().__init__(provider, capture_content=capture_content)
        self.url = url
        """Where spans are posted."""
        self._provider = provider
        self._closed = False

    def flush(self, timeout: float = 30.0) -> bool:
        """Send the spans queued so far; whether they all went within `timeout` seconds."""
        return self._provider.force_flush(int(timeout * 1000))

    def close(self) -> None:
        """Send what is still queued and stop the background thread. Closing twice does nothing.

        Spans that end after this are dropped.
        """
        if self._closed:
            return
        self._closed = True
        self._provider.shutdown()

    async def aclose(self) -> None:
        """`close()` without blocking the event loop (the last export is an HTTP request)."""
        await asyncio.to_thread(self.close)

    def describe(self) -> dict[str, JsonValue]:
        """Return a JSON-safe description; never a header value."""
        return {
            "type": type(self).__name__,
            "capture_content": self.capture_content,
            "url": self.url,
        }

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.url}>"

    def _provider_for(
        self, url: str, headers: dict[str, str], service_name: str, timeout: float
    ) -> TracerProvider:
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
            from opentelemetry.sdk.resources import Resource
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import BatchSpanProcessor
        except ImportError as exc:
            raise MissingDependencyError(
                "opentelemetry-exporter-otlp-proto-http",
                extra=self.extra,
                feature=f"The {type(self).__name__}",
            ) from exc
        provider = TracerProvider(resource=Resource.create({"service.name": service_name}))
        exporter = OTLPSpanExporter(endpoint=url, headers=headers, timeout=timeout)
        provider.add_span_processor(BatchSpanProcessor(exporter))
        return provider


def setting(explicit: str | None, *variables: str) -> str | None:
    """An option's value: the argument if given, else the first environment variable set.

    Blank values count as missing. An argument given as `""` does not fall
    back to the environment.

    Examples:
        >>> setting("pk-1", "LANGFUSE_PUBLIC_KEY")
        'pk-1'
        >>> setting(None, "TIDEMILL_DOCTEST_UNSET_VARIABLE") is None
        True
    """
    if explicit is not None:
        return explicit.strip() or None
    for variable in variables:
        value = os.environ.get(variable, "").strip()
        if value:
            return value
    return None


def _check_url(url: object, owner: str) -> None:
    if not isinstance(url, str) or urlsplit(url).scheme not in ("http", "https"):
        raise ConfigurationError(
            f"{owner} needs an http:// or https:// URL, not {url!r}.",
            hint="Give the full URL, such as 'https://collector.example.com:4318/v1/traces'.",
        )
