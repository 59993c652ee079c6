"""`AzureOpenAIModel`: deployment URLs, the `api-key` header, OpenAI's body and parser.

There is no recording of Azure OpenAI traffic in a permissively licensed
source, so the replies used here are HAND-MADE FROM DOCUMENTATION
(`fixtures/providers/handmade/azure-*`, listed under "Hand-made from
documentation" in MANIFEST.md). They check URL, header and body handling,
not Azure's real behaviour.
"""

from __future__ import annotations

import pytest
from llm_replay import API_KEY, HELLO, Recorder, ReplayServer, Reply, fixture_bytes, json_reply
from replay_models import azure_model, replay, sent_body

from tidemill.errors import ConfigurationError
from tidemill.llm import AzureOpenAIModel, ModelRequest, ModelSettings, resolve_model
from tidemill.llm.openai._chat import build_chat_request
from tidemill.types import Message, ToolCall, ToolDefinition, ToolResult

STREAM = "handmade/azure-chat-stream.sse"  # hand-made from documentation, not a recording
TOOL_CALL = "handmade/azure-tool-call.json"  # hand-made from documentation, not a recording


async def test_the_deployment_url_headers_and_body() -> None:
    request = ModelRequest(
        [
            Message.system("Be brief."),
            Message.user("Weather in Paris?"),
            Message.assistant(tool_calls=(ToolCall(id="call_1", name="w", arguments={"c": "P"}),)),
            Message.tool(ToolResult(call_id="call_1", name="w", content="18C")),
        ],
        tools=[ToolDefinition(name="w")],
        settings=ModelSettings(max_tokens=50),
    )
    body, http_request = await sent_body(
        azure_model, request, fixture_bytes(STREAM), api_version="2025-01-01-preview"
    )
    assert str(http_request.url) == (
        "https://acme.openai.azure.com/openai/deployments/prod-gpt4o/chat/completions"
        "?api-version=2025-01-01-preview"
    )
    assert http_request.headers["api-key"] == API_KEY
    assert "authorization" not in http_request.headers
    # The body is OpenAI's, from the shared builder.
    assert body == build_chat_request("prod-gpt4o", request, stream=True)
    assert body["messages"][2]["tool_calls"][0]["id"] == "call_1"
    assert body["max_completion_tokens"] == 50


async def test_the_handmade_stream_parses_with_the_openai_parser() -> None:
    streamed = await replay(azure_model, [fixture_bytes(STREAM)])
    response = streamed.response
    assert response.message.content == "Paris is the capital."
    assert (response.response_id, response.model) == (
        "chatcmpl-handmade-azure-1",
        "gpt-4o-2024-11-20",
    )
    assert (response.usage.input_tokens, response.usage.output_tokens) == (21, 5)
    assert response.finish_reason == "stop" and response.provider == "azure"


async def test_the_handmade_tool_call_over_a_real_server(server: ReplayServer) -> None:
    server.replies.append(Reply(fixture_bytes(TOOL_CALL), content_type="application/json"))
    model = AzureOpenAIModel("my deployment", api_key=API_KEY, base_url=server.url + "/openai/")
    try:
        response = await model.request(HELLO)
    finally:
        await model.aclose()
    (call,) = response.message.tool_calls
    assert (call.id, call.name, call.arguments) == (
        "call_handmadeAzure01",
        "get_weather",
        {"city": "Paris"},
    )
    (seen,) = server.seen
    assert (
        seen.path == "/openai/deployments/my%20deployment/chat/completions?api-version=2024-10-21"
    )
    assert seen.headers["api-key"] == API_KEY
    assert seen.body["stream"] is False


async def test_an_entra_id_token_replaces_the_key() -> None:
    recorder = Recorder([json_reply(fixture_bytes(TOOL_CALL))])
    model = AzureOpenAIModel(
        "d",
        azure_ad_token="eyJ-token",
        base_url="https://acme.openai.azure.com",
        http_client=recorder.client(),
    )
    await model.request(HELLO)
    (sent,) = recorder.requests
    assert sent.headers["authorization"] == "Bearer eyJ-token"
    assert "api-key" not in sent.headers
    assert "eyJ-token" in model.credentials.secrets()


def test_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", "azure-key")
    monkeypatch.setenv("AZURE_OPENAI_ENDPOINT", "https://env.openai.azure.com/")
    monkeypatch.setenv("OPENAI_API_VERSION", "2024-06-01")
    model = resolve_model("azure:prod")
    assert isinstance(model, AzureOpenAIModel)
    assert (model.deployment, model.api_version, model.credentials.api_key) == (
        "prod",
        "2024-06-01",
        "azure-key",
    )
    assert model.credentials.base_url == "https://env.openai.azure.com"
    assert model.describe()["api_version"] == "2024-06-01"


def test_missing_endpoint_or_key() -> None:
    with pytest.raises(ConfigurationError, match="AZURE_OPENAI_ENDPOINT"):
        AzureOpenAIModel("d", api_key="k")
    with pytest.raises(ConfigurationError, match="AZURE_OPENAI_API_KEY"):
        AzureOpenAIModel("d", base_url="https://acme.openai.azure.com")
