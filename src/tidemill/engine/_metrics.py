"""Prometheus metrics of a worker's AI steps and background work, with bounded labels.

A `Metrics` holds its own `prometheus_client.CollectorRegistry` (never the
process-wide default one); a worker hands it to the AI step executors
through `StepEnv.metrics`, and `serve` exposes it over HTTP at `/metrics`.
`prometheus_client` is imported only when a `Metrics` is made: without one,
nothing is recorded and nothing is imported (`pip install 'tidemill[metrics]'`).

Every label value comes from a set of bounded size, so a flow that names a
thousand models or tools cannot add a thousand series:

- `provider`: one of `tidemill.llm.KNOWN_PROVIDERS`, `scripted` or
  `fallback`, else `other`;
- `model`: with an allowlist (`models=`), a name in it, else `other`;
  without one, the first `max_models` (50) distinct names this worker sees,
  then `other`;
- `tool`: a tool declared by the step, among the first `max_tools` (100)
  distinct names this worker sees, else `other`;
- `bound`: one of `BOUNDS`, else `other`; `outcome`, `direction`: fixed sets;
- `status` of a schedule fire: one of `FIRE_STATUSES`.

Besides the AI steps, a worker counts its background work: the schedule
fires its schedulers recorded, the waits its sweeps ended, and the runs its
retention deleted.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tidemill.engine._outcome import Outcome
from tidemill.errors import ConfigurationError
from tidemill.llm import KNOWN_PROVIDERS

if TYPE_CHECKING:
    from wsgiref.simple_server import WSGIServer

    from prometheus_client import CollectorRegistry

__all__ = [
    "BOUNDS",
    "FIRE_STATUSES",
    "OTHER",
    "PROVIDERS",
    "Capped",
    "Metrics",
    "MetricsServer",
    "serve",
]

OTHER = "other"
"""The label value of everything outside a closed set."""

PROVIDERS: frozenset[str] = KNOWN_PROVIDERS | {"scripted", "fallback"}
"""Provider label values besides `other`: the provider layer's, its offline and fallback models."""

BOUNDS: frozenset[str] = frozenset(
    {
        "max_iterations",
        "max_tool_calls",
        "max_requests",
        "max_input_tokens",
        "max_output_tokens",
        "max_total_tokens",
        "max_duration",
    }
)
"""The bounds of an `ai_agent` step, as `bound` label values."""

FIRE_STATUSES: frozenset[str] = frozenset({"started", "skipped", "failed"})
"""What becomes of a schedule fire, as `status` label values."""

_MAX_LABEL = 128
"""Longer names (or ones with control characters) are `other`."""

_SECONDS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
_STEP_SECONDS = (0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0)
_TOKENS = (64.0, 256.0, 1024.0, 4096.0, 16384.0, 65536.0, 262144.0, 1048576.0)
_TIMEOUTS = frozenset({"TimeoutError", "ProviderTimeout"})


def _usable(name: str) -> bool:
    return 0 < len(name) <= _MAX_LABEL and name.isprintable()


class Capped:
    """A label whose values are the first `limit` distinct names seen, then `other`.

    Args:
        limit: Distinct names kept.
        allowed: When given, only these names are kept (and `limit` is ignored).

    Examples:
        >>> label = Capped(2)
        >>> [label("a"), label("b"), label("c"), label("a")]
        ['a', 'b', 'other', 'a']
        >>> Capped(5, allowed={"gpt-4o"})("gpt-5")
        'other'
    """

    def __init__(self, limit: int, allowed: Collection[str] | None = None) -> None:
        self.limit = limit
        self.allowed = None if allowed is None else frozenset(allowed)
        self._seen: set[str] = set()
        self._lock = threading.Lock()

    def __call__(self, name: str) -> str:
        if self.allowed is not None:
            return name if name in self.allowed else OTHER
        if name in self._seen:
            return name
        if not _usable(name):
            return OTHER
        with self._lock:
            if len(self._seen) >= self.limit:
                return OTHER
            self._seen.add(name)
        return name

    def __len__(self) -> int:
        return len(self._seen) if self.allowed is None else len(self.allowed)


def provider_label(provider: str) -> str:
    """`provider` if the provider layer knows it, else `other`.

    Examples:
        >>> provider_label("anthropic"), provider_label("acme-llm")
        ('anthropic', 'other')
    """
    return provider if provider in PROVIDERS else OTHER


def bound_label(bound: str) -> str:
    """`bound` if it is one of an agent step's bounds, else `other`.

    Examples:
        >>> bound_label("max_tool_calls"), bound_label("tool_calls")
        ('max_tool_calls', 'other')
    """
    return bound if bound in BOUNDS else OTHER


def _call_outcome(record: Mapping[str, Any]) -> str:
    """`ok`, `timeout`, `cancelled` or `error`, from a usage record's `error` ("Type: message")."""
    error = record.get("error")
    if error is None:
        return "ok"
    kind = str(error).split(":", 1)[0]
    if kind in _TIMEOUTS:
        return "timeout"
    return "cancelled" if kind == "CancelledError" else "error"


def _step_outcome(result: object) -> tuple[str, str | None]:
    """An agent step's `outcome` label, and the bound it crossed if any."""
    if result is None:
        return "cancelled", None
    if not isinstance(result, Outcome):
        return "paused", None
    if result.status != "failed":
        return "ok", None
    error = result.error or {}
    kind = error.get("type")
    if kind == "LimitExceeded":
        return "limit", bound_label(str(error.get("limit")))
    return ("timeout" if kind == "Timeout" else "error"), None


class Metrics:
    """The metrics of one worker's AI steps, in a registry of its own.

    Args:
        registry: Where the metrics are registered (default: a new one).
        models: An allowlist of model names; others are `other`. Without it,
            the first `max_models` distinct names are kept.
        max_models: Distinct model names kept without an allowlist.
        max_tools: Distinct tool names kept.

    Raises:
        ConfigurationError: `prometheus_client` is not installed.

    Examples:
        >>> metrics = Metrics()
        >>> metrics.action_request({"model": "gpt-4o", "provider": "openai", "input_tokens": 12,
        ...                         "output_tokens": 3, "latency_ms": 250.0, "error": None})
        >>> labels = {"model": "gpt-4o", "provider": "openai"}
        >>> metrics.registry.get_sample_value(
        ...     "tidemill_ai_action_requests_total", {**labels, "outcome": "ok"})
        1.0
        >>> metrics.registry.get_sample_value(
        ...     "tidemill_ai_action_tokens_total", {**labels, "direction": "input"})
        12.0
    """

    def __init__(
        self,
        registry: CollectorRegistry | None = None,
        *,
        models: Collection[str] | None = None,
        max_models: int = 50,
        max_tools: int = 100,
    ) -> None:
        try:
            from prometheus_client import CollectorRegistry, Counter, Histogram
        except ImportError as exc:  # pragma: no cover - the extra is part of `dev`
            raise ConfigurationError(
                "Metrics need the prometheus_client package.",
                hint="pip install 'tidemill[metrics]'",
            ) from exc
        self.registry = registry if registry is not None else CollectorRegistry()
        self.models = Capped(max_models, models)
        self.tools = Capped(max_tools)
        model = ("model", "provider")
        reg = self.registry
        self._requests = Counter(
            "tidemill_ai_action_requests", "Model requests of ai_action steps.",
            [*model, "outcome"], registry=reg,
        )  # fmt: skip
        self._tokens = Counter(
            "tidemill_ai_action_tokens", "Tokens of ai_action steps' model requests.",
            [*model, "direction"], registry=reg,
        )  # fmt: skip
        self._request_tokens = Histogram(
            "tidemill_ai_action_request_tokens",
            "Tokens (input and output) of one ai_action model request.",
            model, buckets=_TOKENS, registry=reg,
        )  # fmt: skip
        self._duration = Histogram(
            "tidemill_ai_action_duration_seconds",
            "Seconds one ai_action model request took, failed ones included.",
            model, buckets=_SECONDS, registry=reg,
        )  # fmt: skip
        self._model_calls = Counter(
            "tidemill_ai_agent_model_calls", "Model calls of ai_agent steps.",
            [*model, "outcome"], registry=reg,
        )  # fmt: skip
        self._agent_tokens = Counter(
            "tidemill_ai_agent_tokens", "Tokens of ai_agent steps' model calls.",
            [*model, "direction"], registry=reg,
        )  # fmt: skip
        self._tool_calls = Counter(
            "tidemill_ai_agent_tool_calls", "Tool calls of ai_agent steps.",
            ["tool", "outcome"], registry=reg,
        )  # fmt: skip
        self._bounds = Counter(
            "tidemill_ai_agent_bound_exceeded", "ai_agent steps stopped at one of their bounds.",
            ["bound"], registry=reg,
        )  # fmt: skip
        self._steps = Counter(
            "tidemill_ai_agent_steps",
            "ai_agent step segments (an attempt, or its part up to a pause) by how they ended.",
            ["outcome"], registry=reg,
        )  # fmt: skip
        self._step_seconds = Histogram(
            "tidemill_ai_agent_duration_seconds",
            "Seconds one ai_agent step segment (an attempt, or its part up to a pause) took.",
            ["outcome"], buckets=_STEP_SECONDS, registry=reg,
        )  # fmt: skip
        self._fires = Counter(
            "tidemill_schedule_fires",
            "Schedule fires this process recorded, by what became of them.",
            ["status"], registry=reg,
        )  # fmt: skip
        self._woken = Counter(
            "tidemill_waits_woken",
            "Waiting steps (sleeps, event waits at their deadline) this worker's sweeps ended.",
            registry=reg,
        )
        self._pruned = Counter(
            "tidemill_runs_pruned",
            "Top-level runs this worker's retention deleted (each with the runs under it).",
            registry=reg,
        )

    def schedule_fires(self, status: str, count: int = 1) -> None:
        """Count fires recorded `started`, `skipped` or `failed` (anything else: `other`)."""
        if count > 0:
            label = status if status in FIRE_STATUSES else OTHER
            self._fires.labels(status=label).inc(count)

    def waits_woken(self, count: int) -> None:
        """Count waits a sweep ended."""
        if count > 0:
            self._woken.inc(count)

    def runs_pruned(self, count: int) -> None:
        """Count top-level runs retention deleted."""
        if count > 0:
            self._pruned.inc(count)

    def labels(self, record: Mapping[str, Any]) -> tuple[str, str]:
        """The `model` and `provider` label values of a usage record."""
        return self.models(str(record.get("model") or "")), provider_label(
            str(record.get("provider") or "")
        )

    def tool_label(self, name: str, declared: Collection[str]) -> str:
        """`name` if the step declares the tool and the cap has room for it, else `other`.

        Examples:
            >>> Metrics().tool_label("lookup", {"lookup"}), Metrics().tool_label("rm", {"lookup"})
            ('lookup', 'other')
        """
        return self.tools(name) if name in declared else OTHER

    def action_request(self, record: Mapping[str, Any]) -> None:
        """Count one model request of an `ai_action` step, from its usage record."""
        model, provider = self.labels(record)
        inputs, outputs = (
            int(record.get("input_tokens") or 0),
            int(record.get("output_tokens") or 0),
        )
        self._requests.labels(model, provider, _call_outcome(record)).inc()
        self._tokens.labels(model, provider, "input").inc(inputs)
        self._tokens.labels(model, provider, "output").inc(outputs)
        self._request_tokens.labels(model, provider).observe(inputs + outputs)
        self._duration.labels(model, provider).observe(float(record.get("latency_ms") or 0) / 1000)

    def agent_model_call(self, record: Mapping[str, Any]) -> None:
        """Count one model call of an `ai_agent` step, from its usage record."""
        model, provider = self.labels(record)
        self._model_calls.labels(model, provider, _call_outcome(record)).inc()
        self._agent_tokens.labels(model, provider, "input").inc(
            int(record.get("input_tokens") or 0)
        )
        self._agent_tokens.labels(model, provider, "output").inc(
            int(record.get("output_tokens") or 0)
        )

    def tool_call(self, name: str, ok: bool, declared: Collection[str]) -> None:
        """Count one tool call of an `ai_agent` step (`outcome` `ok` or `error`)."""
        self._tool_calls.labels(self.tool_label(name, declared), "ok" if ok else "error").inc()

    def tool_observer(self, declared: Collection[str]) -> Callable[[str, bool], None]:
        """`tool_call` for the tools one step declares, as `ToolSite.on_call`."""
        names = frozenset(declared)

        def observe(name: str, ok: bool) -> None:
            self.tool_call(name, ok, names)

        return observe

    def agent_step(self, result: object, seconds: float) -> None:
        """Count one segment of an `ai_agent` step and how it ended.

        `result` is its `Outcome` or `AgentPause`, or None when it was cut off
        (the worker lost its lease or stopped). Outcomes: `ok`, `error`,
        `timeout`, `limit` (also counted by `bound`), `paused`, `cancelled`.
        """
        outcome, bound = _step_outcome(result)
        if bound is not None:
            self._bounds.labels(bound).inc()
        self._steps.labels(outcome).inc()
        self._step_seconds.labels(outcome).observe(seconds)


@dataclass
class MetricsServer:
    """`/metrics` served over HTTP from a thread; `close` stops it."""

    host: str
    """The address it listens on."""
    port: int
    """The port it listens on (the one picked when asked for 0)."""
    _server: WSGIServer
    _thread: threading.Thread

    def close(self) -> None:
        """Stop serving and wait for the server's thread."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


def serve(metrics: Metrics, port: int, host: str = "127.0.0.1") -> MetricsServer:
    """Serve `metrics` at `http://host:port/metrics` until the returned server is closed.

    Examples:
        >>> import httpx
        >>> server = serve(Metrics(), 0)
        >>> "tidemill_ai_agent_steps_total" in httpx.get(
        ...     f"http://127.0.0.1:{server.port}/metrics").text
        True
        >>> server.close()
    """
    from prometheus_client import start_http_server

    server, thread = start_http_server(port, host, registry=metrics.registry)
    return MetricsServer(host, int(server.server_port), server, thread)
