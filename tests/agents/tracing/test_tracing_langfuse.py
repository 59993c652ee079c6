"""LangfuseTracer: a real agent run exported to a local OTLP/HTTP receiver, decoded."""

from __future__ import annotations

import base64
import json
import logging

import pytest
from otlp_receiver import OTLPReceiver

import tidemill
from tidemill import ToolCall, tool
from tidemill.agents import AgentBuilder
from tidemill.agents.tracing import LangfuseTracer
from tidemill.errors import MissingCredentialsError
from tidemill.tools import Tool

PUBLIC, SECRET = "pk-lf-public-0001", "sk-lf-secret-0002"
CONTENT = {
    "langfuse.observation.input",
    "langfuse.observation.output",
    "langfuse.trace.input",
    "langfuse.trace.output",
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.tool.call.arguments",
    "gen_ai.tool.call.result",
}
VARIABLES = (
    "LANGFUSE_PUBLIC_KEY",
    "LANGFUSE_SECRET_KEY",
    "LANGFUSE_HOST",
    "LANGFUSE_BASE_URL",
    "LANGFUSE_TRACING_ENVIRONMENT",
)


@pytest.fixture(autouse=True)
def _no_langfuse_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in VARIABLES:
        monkeypatch.delenv(name, raising=False)


@tool
def tide(port: str) -> str:
    """High tide at a port, tomorrow."""
    return "06:12"


@tool
def broken(port: str) -> str:
    """Always fails."""
    raise RuntimeError("gauge offline")


def harbour(use: Tool = tide) -> AgentBuilder:
    """An agent that calls `use` once, then answers."""
    return (
        tidemill.agent()
        .name("harbour")
        .llm(
            "fake",
            responses=["", "At 06:12."],
            tool_calls=[[ToolCall(name=use.name, arguments={"port": "Brest"})], []],
        )
        .tool(use)
    )


def basic(public: str, secret: str) -> str:
    return "Basic " + base64.b64encode(f"{public}:{secret}".encode()).decode()


def test_a_run_arrives_as_a_trace_of_agent_generation_and_tool_observations(
    receiver: OTLPReceiver,
) -> None:
    bot = harbour().observe(
        "langfuse",
        host=receiver.url,
        public_key=PUBLIC,
        secret_key=SECRET,
        user_id="ann",
        tags=["harbour", "tides"],
        metadata={"region": "brittany"},
    )
    bot.run("High tide in Brest?", thread_id="t-1")
    bot.close()  # sends what the batch processor still holds

    export = receiver.exports[0]  # the spans may come in more than one batch
    assert export.path == "/api/public/otel/v1/traces"
    assert export.headers["authorization"] == basic(PUBLIC, SECRET)
    assert export.headers["content-type"] == "application/x-protobuf"
    assert sorted(span.name for span in receiver.spans()) == [
        "chat scripted",
        "chat scripted",
        "execute_tool tide",
        "invoke_agent harbour",
    ]
    run = receiver.one("invoke_agent harbour")
    assert run.parent_span_id == ""
    for child in [*receiver.named("chat scripted"), receiver.one("execute_tool tide")]:
        assert child.parent_span_id == run.span_id
        assert child.trace_id == run.trace_id
    assert run.resource["service.name"] == "tidemill"

    assert run.attributes["langfuse.observation.type"] == "agent"
    assert run.attributes["langfuse.trace.name"] == "harbour"
    assert run.attributes["langfuse.trace.tags"] == ["harbour", "tides"]
    assert run.attributes["langfuse.trace.metadata.region"] == "brittany"
    for span in receiver.spans():
        assert span.attributes["session.id"] == "t-1"
        assert span.attributes["user.id"] == "ann"
    chat = receiver.named("chat scripted")[0]
    assert chat.attributes["langfuse.observation.type"] == "generation"
    assert chat.attributes["gen_ai.request.model"] == "scripted"
    assert chat.attributes["gen_ai.usage.input_tokens"] == 5
    assert "langfuse.trace.name" not in chat.attributes  # trace-level: the root only
    # The run's totals would be counted a second time on top of its generations'.
    assert not [key for key in run.attributes if key.startswith("gen_ai.usage.")]
    call = receiver.one("execute_tool tide")
    assert call.attributes["langfuse.observation.type"] == "tool"
    assert call.attributes["gen_ai.tool.name"] == "tide"
    # Off by default: prompts may hold secrets.
    for span in receiver.spans():
        assert not CONTENT & set(span.attributes)


def test_captured_content_is_each_observation_s_input_and_output(receiver: OTLPReceiver) -> None:
    bot = harbour().observe(
        "langfuse",
        host=receiver.url,
        public_key=PUBLIC,
        secret_key=SECRET,
        capture_content=True,
    )
    bot.run("High tide in Brest?")
    bot.close()

    run = receiver.one("invoke_agent harbour")
    assert run.attributes["langfuse.observation.input"] == "High tide in Brest?"
    assert run.attributes["langfuse.trace.input"] == "High tide in Brest?"
    assert run.attributes["langfuse.observation.output"] == "At 06:12."
    assert run.attributes["langfuse.trace.output"] == "At 06:12."
    first, second = receiver.named("chat scripted")
    assert json.loads(str(first.attributes["langfuse.observation.input"])) == [
        {"role": "user", "content": "High tide in Brest?"}
    ]
    asked = json.loads(str(first.attributes["langfuse.observation.output"]))
    assert asked["role"] == "assistant"
    assert asked["tool_calls"][0]["function"] == {"name": "tide", "arguments": '{"port":"Brest"}'}
    transcript = json.loads(str(second.attributes["langfuse.observation.input"]))
    assert [message["role"] for message in transcript] == ["user", "assistant", "tool"]
    assert transcript[2]["content"] == "06:12"
    assert json.loads(str(second.attributes["langfuse.observation.output"])) == {
        "role": "assistant",
        "content": "At 06:12.",
    }
    call = receiver.one("execute_tool tide")
    assert call.attributes["langfuse.observation.input"] == '{"port":"Brest"}'
    assert call.attributes["langfuse.observation.output"] == "06:12"


def test_a_failed_tool_call_is_an_error_level_observation(receiver: OTLPReceiver) -> None:
    bot = harbour(broken).observe(
        "langfuse", host=receiver.url, public_key=PUBLIC, secret_key=SECRET
    )
    bot.run("High tide in Brest?")
    bot.close()

    call = receiver.one("execute_tool broken")
    assert call.attributes["langfuse.observation.level"] == "ERROR"
    assert call.attributes["langfuse.observation.status_message"] == "gauge offline"
    assert call.status_code == 2  # STATUS_CODE_ERROR
    assert "langfuse.observation.level" not in receiver.one("invoke_agent harbour").attributes


async def test_aclose_flushes_the_spans_of_an_async_run(receiver: OTLPReceiver) -> None:
    bot = harbour().observe("langfuse", host=receiver.url, public_key=PUBLIC, secret_key=SECRET)
    await bot.arun("High tide in Brest?")
    await bot.aclose()
    assert len(receiver.spans()) == 4


def test_keys_host_and_environment_come_from_the_environment(
    receiver: OTLPReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LANGFUSE_PUBLIC_KEY", "pk-lf-from-env")
    monkeypatch.setenv("LANGFUSE_SECRET_KEY", "sk-lf-from-env")
    monkeypatch.setenv("LANGFUSE_HOST", receiver.url + "/")
    monkeypatch.setenv("LANGFUSE_TRACING_ENVIRONMENT", "staging")
    bot = harbour().observe("langfuse")
    bot.run("High tide in Brest?")
    bot.close()

    export = receiver.exports[0]  # the spans may come in more than one batch
    assert export.path == "/api/public/otel/v1/traces"
    assert export.headers["authorization"] == basic("pk-lf-from-env", "sk-lf-from-env")
    assert receiver.one("invoke_agent harbour").attributes["langfuse.environment"] == "staging"


def test_base_url_wins_over_host_and_arguments_over_both(monkeypatch: pytest.MonkeyPatch) -> None:
    def tracer_for(host: str | None = None) -> LangfuseTracer:
        return LangfuseTracer(public_key=PUBLIC, secret_key=SECRET, host=host)

    tracer = tracer_for()
    assert tracer.url == "https://cloud.langfuse.com/api/public/otel/v1/traces"
    tracer.close()
    monkeypatch.setenv("LANGFUSE_HOST", "https://us.cloud.langfuse.com")
    tracer = tracer_for()
    assert tracer.host == "https://us.cloud.langfuse.com"
    tracer.close()
    monkeypatch.setenv("LANGFUSE_BASE_URL", "https://langfuse.internal")
    tracer = tracer_for()
    assert tracer.url == "https://langfuse.internal/api/public/otel/v1/traces"
    tracer.close()
    tracer = tracer_for("https://eu.example.org")
    assert tracer.host == "https://eu.example.org"
    tracer.close()


def test_explicit_keys_override_the_environment(
    receiver: OTLPReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LANGFUSE_PUBLIC_KEY", "pk-lf-from-env")
    monkeypatch.setenv("LANGFUSE_SECRET_KEY", "sk-lf-from-env")
    bot = harbour().observe("langfuse", host=receiver.url, public_key=PUBLIC, secret_key=SECRET)
    bot.run("High tide in Brest?")
    bot.close()
    assert receiver.exports[0].headers["authorization"] == basic(PUBLIC, SECRET)


def test_missing_keys_name_the_variables_to_set(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(MissingCredentialsError) as caught:
        tidemill.agent().observe("langfuse")
    error = caught.value
    assert error.context["env"] == ["LANGFUSE_PUBLIC_KEY", "LANGFUSE_SECRET_KEY"]
    assert "LANGFUSE_PUBLIC_KEY and LANGFUSE_SECRET_KEY" in str(error)

    monkeypatch.setenv("LANGFUSE_PUBLIC_KEY", PUBLIC)
    with pytest.raises(MissingCredentialsError) as caught:
        LangfuseTracer()
    error = caught.value
    assert error.context["env"] == ["LANGFUSE_SECRET_KEY"]
    assert "LANGFUSE_SECRET_KEY" in str(error) and "LANGFUSE_PUBLIC_KEY" not in str(error)
    assert PUBLIC not in str(error) and PUBLIC not in repr(error)
    with pytest.raises(MissingCredentialsError):
        LangfuseTracer(secret_key="  ")  # blank is missing


def test_keys_never_show_in_repr_describe_or_logs(
    receiver: OTLPReceiver, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    bot = harbour().observe("langfuse", host=receiver.url, public_key=PUBLIC, secret_key=SECRET)
    token = basic(PUBLIC, SECRET).split()[1]
    tracer = bot.runtime.tracer
    assert isinstance(tracer, LangfuseTracer)
    assert tracer.describe() == {
        "type": "LangfuseTracer",
        "capture_content": False,
        "url": f"{receiver.url}/api/public/otel/v1/traces",
        "host": receiver.url,
    }
    bot.run("High tide in Brest?")
    bot.close()
    shown = [repr(tracer), str(tracer), json.dumps(bot.describe()), caplog.text]
    for text in shown:
        for secret in (PUBLIC, SECRET, token):
            assert secret not in text


def test_an_answer_recorded_on_the_run_is_its_output(receiver: OTLPReceiver) -> None:
    tracer = LangfuseTracer(
        host=receiver.url, public_key=PUBLIC, secret_key=SECRET, capture_content=True
    )
    with tracer.agent_span("bot") as run:
        run.record_output("Done.")
    tracer.close()
    sent = receiver.one("invoke_agent bot").attributes
    assert (sent["langfuse.observation.output"], sent["langfuse.trace.output"]) == (
        "Done.",
        "Done.",
    )
