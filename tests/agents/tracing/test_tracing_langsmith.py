"""LangSmithTracer: a real agent run exported to a local OTLP/HTTP receiver, decoded."""

from __future__ import annotations

import json
import logging

import pytest
from otlp_receiver import OTLPReceiver

import tidemill
from tidemill import ToolCall, tool
from tidemill.agents import AgentBuilder
from tidemill.agents.tracing import LangSmithTracer
from tidemill.errors import MissingCredentialsError

KEY = "lsv2_pt_secret_0003"
VARIABLES = (
    "LANGSMITH_API_KEY",
    "LANGCHAIN_API_KEY",
    "LANGSMITH_ENDPOINT",
    "LANGCHAIN_ENDPOINT",
    "LANGSMITH_PROJECT",
    "LANGCHAIN_PROJECT",
)


@pytest.fixture(autouse=True)
def _no_langsmith_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in VARIABLES:
        monkeypatch.delenv(name, raising=False)


@tool
def tide(port: str) -> str:
    """High tide at a port, tomorrow."""
    return "06:12"


def harbour() -> AgentBuilder:
    return (
        tidemill.agent()
        .name("harbour")
        .llm(
            "fake",
            responses=["", "At 06:12."],
            tool_calls=[[ToolCall(name="tide", arguments={"port": "Brest"})], []],
        )
        .tool(tide)
    )


def test_a_run_arrives_as_a_chain_run_with_llm_and_tool_runs(receiver: OTLPReceiver) -> None:
    bot = harbour().observe(
        "langsmith",
        endpoint=receiver.url,
        api_key=KEY,
        project="harbour-dev",
        user_id="ann",
        tags=["harbour", "tides"],
        metadata={"region": "brittany"},
    )
    bot.run("High tide in Brest?", thread_id="t-1")
    bot.close()  # sends what the batch processor still holds

    export = receiver.exports[0]  # the spans may come in more than one batch
    assert export.path == "/otel/v1/traces"
    assert export.headers["x-api-key"] == KEY
    assert export.headers["langsmith-project"] == "harbour-dev"
    run = receiver.one("invoke_agent harbour")
    chats = receiver.named("chat scripted")
    call = receiver.one("execute_tool tide")
    assert len(chats) == 2
    assert run.parent_span_id == ""
    for child in [*chats, call]:
        assert child.parent_span_id == run.span_id
        assert child.trace_id == run.trace_id

    assert run.attributes["langsmith.span.kind"] == "chain"
    assert run.attributes["langsmith.span.tags"] == "harbour,tides"
    assert run.attributes["langsmith.metadata.region"] == "brittany"
    assert run.attributes["langsmith.metadata.user_id"] == "ann"
    assert run.attributes["langsmith.metadata.run_id"] == run.attributes["tidemill.run.id"]
    assert str(run.attributes["tidemill.run.id"]).startswith("run_")
    for span in receiver.spans():  # LangSmith groups a thread by metadata on every run
        assert span.attributes["langsmith.metadata.thread_id"] == "t-1"
    assert chats[0].attributes["langsmith.span.kind"] == "llm"
    assert chats[0].attributes["gen_ai.system"] == "scripted"  # LangSmith's ls_provider
    assert chats[0].attributes["gen_ai.request.model"] == "scripted"
    assert chats[0].attributes["gen_ai.usage.input_tokens"] == 5
    assert chats[0].attributes["gen_ai.usage.total_tokens"] == 10
    assert "langsmith.span.tags" not in chats[0].attributes  # the root run only
    assert call.attributes["langsmith.span.kind"] == "tool"
    assert call.attributes["gen_ai.tool.name"] == "tide"
    for span in receiver.spans():  # off by default: prompts may hold secrets
        assert "gen_ai.prompt" not in span.attributes
        assert "gen_ai.completion" not in span.attributes


def test_captured_content_is_each_run_s_inputs_and_outputs(receiver: OTLPReceiver) -> None:
    bot = harbour().observe("langsmith", endpoint=receiver.url, api_key=KEY, capture_content=True)
    bot.run("High tide in Brest?")
    bot.close()

    def field(name: str, key: str, index: int = 0) -> object:
        return json.loads(str(receiver.named(name)[index].attributes[key]))

    assert field("invoke_agent harbour", "gen_ai.prompt") == {"input": "High tide in Brest?"}
    assert field("invoke_agent harbour", "gen_ai.completion") == {"output": "At 06:12."}
    assert field("chat scripted", "gen_ai.prompt") == {
        "messages": [{"role": "user", "content": "High tide in Brest?"}]
    }
    asked = field("chat scripted", "gen_ai.completion")
    assert isinstance(asked, dict)
    assert asked["messages"][0]["tool_calls"][0]["function"]["name"] == "tide"
    assert field("chat scripted", "gen_ai.completion", 1) == {
        "messages": [{"role": "assistant", "content": "At 06:12."}]
    }
    assert field("execute_tool tide", "gen_ai.prompt") == {"port": "Brest"}
    assert field("execute_tool tide", "gen_ai.completion") == {"output": "06:12"}


def test_key_endpoint_and_project_come_from_the_environment(
    receiver: OTLPReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LANGSMITH_API_KEY", "lsv2-from-env")
    monkeypatch.setenv("LANGSMITH_ENDPOINT", receiver.url + "/")
    monkeypatch.setenv("LANGSMITH_PROJECT", "from-env")
    bot = harbour().observe("langsmith")
    bot.run("High tide in Brest?")
    bot.close()

    export = receiver.exports[0]  # the spans may come in more than one batch
    assert export.path == "/otel/v1/traces"
    assert (export.headers["x-api-key"], export.headers["langsmith-project"]) == (
        "lsv2-from-env",
        "from-env",
    )


def test_without_a_project_no_project_header_is_sent(
    receiver: OTLPReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LANGCHAIN_API_KEY", "lsv2-legacy")  # the older name still works
    bot = harbour().observe("langsmith", endpoint=receiver.url)
    bot.run("High tide in Brest?")
    bot.close()
    export = receiver.exports[0]  # the spans may come in more than one batch
    assert export.headers["x-api-key"] == "lsv2-legacy"
    assert "langsmith-project" not in export.headers


def test_arguments_override_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LANGSMITH_API_KEY", "lsv2-from-env")
    monkeypatch.setenv("LANGSMITH_ENDPOINT", "https://eu.api.smith.langchain.com")
    monkeypatch.setenv("LANGSMITH_PROJECT", "from-env")
    tracer = LangSmithTracer(endpoint="https://smith.internal", project="mine")
    assert tracer.url == "https://smith.internal/otel/v1/traces"
    assert tracer.project == "mine"
    tracer.close()
    tracer = LangSmithTracer()
    assert tracer.url == "https://eu.api.smith.langchain.com/otel/v1/traces"
    tracer.close()
    monkeypatch.delenv("LANGSMITH_ENDPOINT")
    tracer = LangSmithTracer()
    assert tracer.endpoint == "https://api.smith.langchain.com"
    tracer.close()


def test_a_missing_key_names_the_variable_to_set() -> None:
    with pytest.raises(MissingCredentialsError) as caught:
        tidemill.agent().observe("langsmith", project="harbour-dev")
    error = caught.value
    assert "LANGSMITH_API_KEY" in str(error)
    assert error.context["env"] == ["LANGSMITH_API_KEY", "LANGCHAIN_API_KEY"]


def test_the_key_never_shows_in_repr_describe_or_logs(
    receiver: OTLPReceiver, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    bot = harbour().observe("langsmith", endpoint=receiver.url, api_key=KEY, project="p")
    tracer = bot.runtime.tracer
    assert isinstance(tracer, LangSmithTracer)
    assert tracer.describe() == {
        "type": "LangSmithTracer",
        "capture_content": False,
        "url": f"{receiver.url}/otel/v1/traces",
        "endpoint": receiver.url,
        "project": "p",
    }
    bot.run("High tide in Brest?")
    bot.close()
    for text in (repr(tracer), str(tracer), json.dumps(bot.describe()), caplog.text):
        assert KEY not in text


def test_recorded_answers_and_raw_tool_arguments_become_outputs_and_inputs(
    receiver: OTLPReceiver,
) -> None:
    tracer = LangSmithTracer(endpoint=receiver.url, api_key=KEY, capture_content=True)
    with tracer.agent_span("bot") as run:
        with tracer.tool_span(ToolCall(name="echo", raw_arguments="not json")):
            pass
        run.record_output("Done.")
    tracer.close()
    assert json.loads(str(receiver.one("invoke_agent bot").attributes["gen_ai.completion"])) == {
        "output": "Done."
    }
    assert json.loads(str(receiver.one("execute_tool echo").attributes["gen_ai.prompt"])) == {
        "input": "not json"
    }
