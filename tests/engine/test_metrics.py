"""Prometheus metrics of AI steps: what they count, their bounded labels, a real scrape."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client import CollectorRegistry

from tidemill.engine import AsyncEngine, Engine
from tidemill.engine._metrics import OTHER, Metrics, serve
from tidemill.engine._models import ModelChoice
from tidemill.errors import AuthenticationError, RunFailed
from tidemill.flows import Flow
from tidemill.llm import Model, ModelRequest, ScriptedModel
from tidemill.types import Message, ModelResponse, ToolCall

pytestmark = pytest.mark.timeout(90)

LOOKUP = (
    "def main(order_id: str) -> dict:\n    return {'order_id': order_id, 'status': 'shipped'}\n"
)
BROKEN = "def main(order_id: str):\n    raise ValueError('no such order')\n"
REFUND = "def main(order_id: str):\n    return f'refunded {order_id}'\n"


def by_step(models: dict[str, Model]) -> Callable[[ModelChoice], Model]:
    def resolve(choice: ModelChoice) -> Model:
        return models[choice.step_id]

    return resolve


def sample(metrics: Metrics, name: str, **labels: str) -> float:
    value = metrics.registry.get_sample_value(name, labels)
    return 0.0 if value is None else value


async def finish(
    engine: AsyncEngine, flow: Flow, models: dict[str, Model], metrics: Metrics
) -> tuple[str, Any]:
    """Run `flow` to its end with a worker counting into `metrics`: its id, result or failure."""
    async with engine.worker(poll=0.1, pool_size=1, models=by_step(models), metrics=metrics):
        run_id = await engine.submit(flow)
        try:
            return run_id, await engine.wait(run_id, timeout=60)
        except RunFailed as failed:
            return run_id, failed


class Refusing(Model):
    """A model whose every call is refused (a bad key)."""

    provider = "openai"
    model_name = "gpt-4o"

    async def request(self, request: ModelRequest) -> ModelResponse:
        raise AuthenticationError("HTTP 401: bad key", provider="openai", status_code=401)


# --- ai_action -------------------------------------------------------------------------------


async def test_ai_action_requests_tokens_and_durations(engine: AsyncEngine) -> None:
    metrics = Metrics(CollectorRegistry())
    schema = {"type": "object", "properties": {"label": {"type": "string"}}, "required": ["label"]}
    flow = Flow.model_validate(
        {"steps": [
            {"id": "greet", "ai_action": {"model": "fake", "prompt": "Say hi."}},
            {"id": "label", "ai_action": {"model": "fake", "prompt": "Label it.",
                                          "output_schema": schema}},
        ]}
    )  # fmt: skip
    models: dict[str, Model] = {
        "greet": ScriptedModel(["Hi!"], model_name="gpt-4o"),
        "label": ScriptedModel(["no json", '{"label": "bug"}'], model_name="gpt-4o"),
    }
    run_id, result = await finish(engine, flow, models, metrics)
    assert result == {"label": "bug"}
    usage = await engine.usage(run_id)
    assert len(usage) == 3
    labels = {"model": "gpt-4o", "provider": "scripted"}
    assert sample(metrics, "tidemill_ai_action_requests_total", **labels, outcome="ok") == 3
    for direction in ("input", "output"):
        counted = sample(metrics, "tidemill_ai_action_tokens_total", **labels, direction=direction)
        assert counted == sum(row[f"{direction}_tokens"] for row in usage) > 0
    total = sum(row["input_tokens"] + row["output_tokens"] for row in usage)
    assert sample(metrics, "tidemill_ai_action_request_tokens_count", **labels) == 3
    assert sample(metrics, "tidemill_ai_action_request_tokens_sum", **labels) == total
    assert sample(metrics, "tidemill_ai_action_duration_seconds_count", **labels) == 3
    assert sample(metrics, "tidemill_ai_action_duration_seconds_bucket", **labels, le="+Inf") == 3

    refused = Flow.model_validate(
        {"steps": [{"id": "greet", "ai_action": {"model": "fake", "prompt": "hi"}}]}
    )
    _, failed = await finish(engine, refused, {"greet": Refusing()}, metrics)
    assert isinstance(failed, RunFailed)
    error = {"model": "gpt-4o", "provider": "openai", "outcome": "error"}
    assert sample(metrics, "tidemill_ai_action_requests_total", **error) == 1


async def test_an_ai_action_timeout_is_its_own_outcome(engine: AsyncEngine) -> None:
    async def slow(request: ModelRequest) -> str:
        await asyncio.sleep(10)
        return "late"

    metrics = Metrics()
    flow = Flow.model_validate(
        {"steps": [{"id": "ask", "ai_action": {"model": "fake", "prompt": "hi"}, "timeout": 0.2}]}
    )
    _, failed = await finish(engine, flow, {"ask": ScriptedModel(handler=slow)}, metrics)
    assert isinstance(failed, RunFailed)
    labels = {"model": "scripted", "provider": "scripted"}
    assert sample(metrics, "tidemill_ai_action_requests_total", **labels, outcome="timeout") == 1
    assert sample(metrics, "tidemill_ai_action_duration_seconds_sum", **labels) >= 0.15


# --- ai_agent --------------------------------------------------------------------------------


def call(name: str, call_id: str, **arguments: Any) -> ToolCall:
    return ToolCall(id=call_id, name=name, arguments=arguments)


def agent_flow(tools: list[dict[str, Any]], **agent: Any) -> Flow:
    body = {"model": "fake", "tools": tools, **agent}
    step = {"id": "agent", "ai_agent": body, "inputs": {"user_message": "Where is A1?"}}
    return Flow.model_validate({"steps": [step]})


async def test_ai_agent_model_calls_tool_calls_and_steps(engine: AsyncEngine) -> None:
    metrics = Metrics(CollectorRegistry())
    model = ScriptedModel(
        ["", "", "A1 has shipped."],
        tool_calls=[[call("lookup", "c1", order_id="A1")], [call("broken", "c2", order_id="A1")]],
        model_name="claude-sonnet-4",
    )
    tools = [{"name": "lookup", "script": LOOKUP}, {"name": "broken", "script": BROKEN}]
    run_id, result = await finish(engine, agent_flow(tools), {"agent": model}, metrics)
    assert result == "A1 has shipped."
    labels = {"model": "claude-sonnet-4", "provider": "scripted"}
    assert sample(metrics, "tidemill_ai_agent_model_calls_total", **labels, outcome="ok") == 3
    usage = await engine.usage(run_id)
    assert sample(metrics, "tidemill_ai_agent_tokens_total", **labels, direction="output") == sum(
        row["output_tokens"] for row in usage
    )
    assert sample(metrics, "tidemill_ai_agent_tool_calls_total", tool="lookup", outcome="ok") == 1
    assert (
        sample(metrics, "tidemill_ai_agent_tool_calls_total", tool="broken", outcome="error") == 1
    )
    assert sample(metrics, "tidemill_ai_agent_steps_total", outcome="ok") == 1
    assert sample(metrics, "tidemill_ai_agent_duration_seconds_count", outcome="ok") == 1
    assert sample(metrics, "tidemill_ai_action_requests_total", **labels, outcome="ok") == 0


@pytest.mark.parametrize(
    ("settings", "bound"),
    [
        ({"max_iterations": 2}, "max_iterations"),
        ({"limits": {"max_tool_calls": 1}}, "max_tool_calls"),
    ],
)
async def test_a_crossed_bound_is_counted_by_name(
    engine: AsyncEngine, settings: dict[str, Any], bound: str
) -> None:
    metrics = Metrics()
    busy = ScriptedModel(
        handler=lambda _: Message.assistant("", tool_calls=(ToolCall(name="noop"),))
    )
    noop = {"name": "noop", "script": "def main():\n    return 'ok'\n"}
    _, failed = await finish(engine, agent_flow([noop], **settings), {"agent": busy}, metrics)
    assert isinstance(failed, RunFailed) and failed.error["limit"] == bound
    assert sample(metrics, "tidemill_ai_agent_bound_exceeded_total", bound=bound) == 1
    assert sample(metrics, "tidemill_ai_agent_steps_total", outcome="limit") == 1
    assert sample(metrics, "tidemill_ai_agent_tool_calls_total", tool="noop", outcome="ok") >= 1


async def test_a_pause_for_approval_is_a_segment_of_its_own(engine: AsyncEngine) -> None:
    metrics = Metrics()
    model = ScriptedModel(["", "Refunded."], tool_calls=[[call("refund", "r1", order_id="A1")], []])
    refund = {"name": "refund", "script": REFUND, "requires_approval": True}
    async with engine.worker(poll=0.1, pool_size=1, models=by_step({"agent": model}),
                             metrics=metrics):  # fmt: skip
        run_id = await engine.submit(agent_flow([refund]))
        for _ in range(1000):
            rows = await engine.approvals(run_id)
            if rows:
                break
            await asyncio.sleep(0.02)
        assert sample(metrics, "tidemill_ai_agent_steps_total", outcome="paused") == 1
        await engine.approve(rows[0].id, actor="alice")
        assert await engine.wait(run_id, timeout=60) == "Refunded."
    assert sample(metrics, "tidemill_ai_agent_steps_total", outcome="ok") == 1
    assert sample(metrics, "tidemill_ai_agent_tool_calls_total", tool="refund", outcome="ok") == 1
    assert sample(metrics, "tidemill_ai_agent_model_calls_total", model="scripted",
                  provider="scripted", outcome="ok") == 2  # fmt: skip


# --- bounded labels --------------------------------------------------------------------------


def label_values(metrics: Metrics, family: str, label: str) -> set[str]:
    (found,) = (f for f in metrics.registry.collect() if f.name == family)
    return {s.labels[label] for s in found.samples if label in s.labels}


def record(model: str, provider: str = "openai") -> dict[str, Any]:
    return {"model": model, "provider": provider, "input_tokens": 5, "output_tokens": 2,
            "latency_ms": 10.0, "error": None}  # fmt: skip


def test_a_thousand_model_and_tool_names_give_a_bounded_set_of_label_values() -> None:
    metrics = Metrics(max_models=50, max_tools=100)
    for i in range(1000):
        metrics.action_request(record(f"model-{i}", provider=f"vendor-{i % 3}"))
        metrics.agent_model_call(record(f"model-{i}"))
        declared = {f"tool-{i}"}
        metrics.tool_call(f"tool-{i}", True, declared)
        metrics.tool_call(f"undeclared-{i}", False, declared)
        metrics.agent_step(None, 0.1)
    models = label_values(metrics, "tidemill_ai_action_requests", "model")
    assert len(models) == 51 and OTHER in models
    assert {f"model-{i}" for i in range(50)} < models
    assert label_values(metrics, "tidemill_ai_action_requests", "provider") == {OTHER}
    assert len(label_values(metrics, "tidemill_ai_agent_model_calls", "model")) == 51
    tools = label_values(metrics, "tidemill_ai_agent_tool_calls", "tool")
    assert len(tools) == 101 and OTHER in tools
    assert (
        sample(metrics, "tidemill_ai_agent_tool_calls_total", tool=OTHER, outcome="error") == 1000
    )
    assert sample(metrics, "tidemill_ai_agent_tool_calls_total", tool=OTHER, outcome="ok") == 900
    assert sample(metrics, "tidemill_ai_action_requests_total", model=OTHER, provider=OTHER,
                  outcome="ok") == 950  # fmt: skip


def test_an_allowlist_and_odd_names() -> None:
    metrics = Metrics(models={"gpt-4o", "claude-sonnet-4"})
    for name in ("gpt-4o", "gpt-4o-2099", "claude-sonnet-4", "x" * 1000):
        metrics.action_request(record(name, provider="anthropic"))
    assert label_values(metrics, "tidemill_ai_action_requests", "model") == {
        "gpt-4o", "claude-sonnet-4", OTHER
    }  # fmt: skip
    capped = Metrics()
    assert capped.models("x" * 1000) == capped.models("bad\nname") == capped.models("") == OTHER
    assert len(capped.models) == 0
    metrics.agent_step(None, 0.0)
    assert sample(metrics, "tidemill_ai_agent_steps_total", outcome="cancelled") == 1


def test_each_metrics_has_its_own_registry() -> None:
    first, second = Metrics(), Metrics()
    first.action_request(record("gpt-4o"))
    labels = {"model": "gpt-4o", "provider": "openai", "outcome": "ok"}
    assert first.registry.get_sample_value("tidemill_ai_action_requests_total", labels) == 1
    assert second.registry.get_sample_value("tidemill_ai_action_requests_total", labels) is None


def test_serve_and_close() -> None:
    metrics = Metrics()
    server = serve(metrics, 0)
    try:
        text = httpx.get(f"http://127.0.0.1:{server.port}/metrics", timeout=10).text
        assert "# TYPE tidemill_ai_agent_tool_calls_total counter" in text
    finally:
        server.close()
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"http://127.0.0.1:{server.port}/metrics", timeout=2)


# --- tidemill worker --metrics-port ----------------------------------------------------------


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


@pytest.mark.slow
def test_tidemill_worker_serves_metrics_and_stops_with_them(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path}/t.db"
    port = free_port()
    flow = Flow.model_validate(
        {"steps": [{"id": "ask", "ai_action": {"model": "fake", "prompt": "hi"}}]}
    )
    env = {k: v for k, v in os.environ.items() if k != "TIDEMILL_DB"}
    with Engine(db, migrate=True) as engine:
        run = engine.submit(flow)
        process = subprocess.Popen(
            [sys.executable, "-m", "tidemill.cli", "worker", "--db", db, "--poll", "0.1",
             "--metrics-port", str(port)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env,
        )  # fmt: skip
        try:
            run.wait(timeout=60)
            url = f"http://127.0.0.1:{port}/metrics"
            deadline = time.monotonic() + 30
            text = ""
            while "tidemill_ai_action_requests_total{" not in text:
                assert time.monotonic() < deadline, text
                try:
                    text = httpx.get(url, timeout=5).text
                except httpx.TransportError:
                    time.sleep(0.1)
            assert "# HELP tidemill_ai_agent_steps_total" in text
            found = re.search(r"tidemill_ai_action_requests_total\{([^}]*)\} (\S+)", text)
            assert found is not None
            assert 'model="scripted"' in found.group(1) and 'outcome="ok"' in found.group(1)
            assert float(found.group(2)) == 1.0
            process.send_signal(signal.SIGTERM)
            _, err = process.communicate(timeout=30)
            assert process.returncode == 0, err
        finally:
            if process.poll() is None:
                process.kill()
                process.communicate()
    assert f"serving metrics at http://127.0.0.1:{port}/metrics" in err
    with pytest.raises(httpx.ConnectError):
        httpx.get(url, timeout=2)
