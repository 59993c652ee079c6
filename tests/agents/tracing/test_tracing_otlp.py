"""OTLPTracer, the base of the vendor tracers: export, flush, close, names and errors."""

from __future__ import annotations

import sys

import pytest
from otlp_receiver import OTLPReceiver

import tidemill
from tidemill import ToolCall, tool
from tidemill.agents.tracing import LangfuseTracer, LangSmithTracer, OTLPTracer, resolve_tracer
from tidemill.errors import ConfigurationError, MissingDependencyError

EXPORTER = "opentelemetry.exporter.otlp.proto.http.trace_exporter"


@tool
def tide(port: str) -> str:
    """High tide at a port, tomorrow."""
    return "06:12"


def test_a_run_is_posted_to_the_url_with_the_headers(receiver: OTLPReceiver) -> None:
    bot = (
        tidemill.agent()
        .name("harbour")
        .llm(
            "fake",
            responses=["", "At 06:12."],
            tool_calls=[[ToolCall(name="tide", arguments={"port": "Brest"})], []],
        )
        .tool(tide)
        .observe(
            "otlp",
            url=receiver.url + "/v1/traces",
            headers={"x-token": "s3cret"},
            service_name="harbour-svc",
        )
    )
    bot.run("High tide in Brest?", thread_id="t-1")
    bot.close()

    export = receiver.exports[0]  # the spans may come in more than one batch
    assert (export.path, export.headers["x-token"]) == ("/v1/traces", "s3cret")
    run = receiver.one("invoke_agent harbour")
    assert run.resource["service.name"] == "harbour-svc"
    assert run.attributes["gen_ai.conversation.id"] == "t-1"
    assert len(receiver.spans()) == 4
    for span in receiver.spans():  # the plain conventions, no vendor's attributes
        assert not [key for key in span.attributes if key.startswith(("langfuse.", "langsmith."))]
    assert "s3cret" not in repr(bot.runtime.tracer) + str(bot.describe())


def test_flush_sends_what_is_queued_and_close_is_idempotent(receiver: OTLPReceiver) -> None:
    tracer = OTLPTracer(receiver.url + "/v1/traces")
    with tracer.agent_span("bot"):
        pass
    assert tracer.flush(timeout=10)
    assert [span.name for span in receiver.spans()] == ["invoke_agent bot"]
    tracer.close()
    tracer.close()
    assert len(receiver.exports) == 1


def test_describe_and_repr_show_the_url_only() -> None:
    tracer = OTLPTracer("http://127.0.0.1:4318/v1/traces", headers={"authorization": "Bearer t0k"})
    assert tracer.describe() == {
        "type": "OTLPTracer",
        "capture_content": False,
        "url": "http://127.0.0.1:4318/v1/traces",
    }
    assert repr(tracer) == "<OTLPTracer http://127.0.0.1:4318/v1/traces>"
    tracer.close()


@pytest.mark.parametrize("url", ["collector:4318/v1/traces", "ftp://collector/v1/traces", ""])
def test_a_url_that_is_not_http_is_refused(url: str) -> None:
    with pytest.raises(ConfigurationError, match="http:// or https:// URL"):
        OTLPTracer(url)


def test_a_langfuse_host_that_is_not_http_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="LangfuseTracer needs an http"):
        LangfuseTracer(public_key="pk", secret_key="sk", host="cloud.langfuse.com")


@pytest.mark.parametrize(
    ("make", "extra"),
    [
        (lambda: OTLPTracer("http://127.0.0.1:4318/v1/traces"), "otlp"),
        (lambda: LangfuseTracer(public_key="pk", secret_key="sk"), "langfuse"),
        (lambda: LangSmithTracer(api_key="lsv2"), "langsmith"),
    ],
)
def test_without_the_exporter_the_error_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, make: object, extra: str
) -> None:
    monkeypatch.setitem(sys.modules, EXPORTER, None)
    with pytest.raises(MissingDependencyError) as caught:
        make()  # type: ignore[operator]
    error = caught.value
    assert (error.package, error.extra) == ("opentelemetry-exporter-otlp-proto-http", extra)
    assert f"pip install 'tidemill[{extra}]'" in str(error)
    assert isinstance(error.__cause__, ImportError)


def test_the_names_resolve_and_a_near_miss_is_suggested() -> None:
    tracer = resolve_tracer("langsmith", api_key="lsv2", capture_content=True)
    assert isinstance(tracer, LangSmithTracer) and tracer.capture_content
    tracer.close()
    with pytest.raises(ConfigurationError) as caught:
        resolve_tracer("langfus")
    assert "Did you mean 'langfuse'?" in str(caught.value)
    assert "'langsmith'" in str(caught.value) and "'otlp'" in str(caught.value)
    with pytest.raises(ConfigurationError, match="Bad option for the 'langfuse' tracer"):
        resolve_tracer("langfuse", public_key="pk", secret_key="sk", project="p")
