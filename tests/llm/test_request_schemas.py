"""Each adapter's request bodies, checked against the vendor's own published request types.

The official SDKs ship their APIs' request schemas as typed definitions (the
`openai` and `anthropic` packages' `*CreateParams`, botocore's service model
for Bedrock). A body that breaks one of them would be refused by the vendor,
so every adapter's body for a rich conversation is validated here, streamed
and not. Gemini has no such offline schema; its bodies are pinned by the
exact-body tests in test_gemini.py.
"""

from __future__ import annotations

import base64
import json
from typing import Any, get_type_hints

import pydantic
import pytest

from tidemill.llm import ModelRequest, ModelSettings
from tidemill.llm._anthropic import AnthropicModel
from tidemill.llm._bedrock import BedrockModel
from tidemill.llm._openai_chat import OpenAIChatModel
from tidemill.llm._openai_responses import OpenAIResponsesModel
from tidemill.types import ImageRef, Message, Reasoning, ToolCall, ToolDefinition, ToolResult

PNG = "data:image/png;base64," + base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"0" * 16).decode()

WEATHER = ToolDefinition(
    name="get_weather",
    description="Current weather.",
    parameters={
        "type": "object",
        "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
        "required": ["city"],
    },
)


def conversation(provider: str, image: str = "https://example.com/cat.png") -> ModelRequest:
    return ModelRequest(
        [
            Message.system("You are terse."),
            Message.user("What is in this picture?", images=(ImageRef(url=image),)),
            Message.assistant(
                "Let me check.",
                tool_calls=(
                    ToolCall(id="call_1", name="get_weather", arguments={"city": "Paris"}),
                ),
                reasoning=(Reasoning(text="Paris.", signature="sig-1", provider=provider),),
            ),
            Message.tool(ToolResult(call_id="call_1", name="get_weather", content="18C, sunny")),
            Message.user("Thanks!"),
        ],
        tools=[WEATHER],
        settings=ModelSettings(temperature=0.2, max_tokens=100, stop=["END"], top_p=0.9),
    )


def check_typed_dict(params: Any, body: dict[str, Any]) -> None:
    """Validate `body` against an SDK TypedDict: value types, and no keys it does not know."""
    unknown = set(body) - set(get_type_hints(params, include_extras=True))
    assert not unknown, f"keys the API does not define: {sorted(unknown)}"
    pydantic.TypeAdapter(params).validate_python(json.loads(json.dumps(body)))


@pytest.mark.parametrize("stream", [False, True])
def test_openai_chat_bodies_fit_the_sdk_types(stream: bool) -> None:
    from openai.types.chat import completion_create_params as params

    model = OpenAIChatModel("gpt-4o-mini", api_key="k")
    body = dict(model.build_call(conversation("openai"), stream=stream).body)
    typed = (
        params.CompletionCreateParamsStreaming
        if stream
        else (params.CompletionCreateParamsNonStreaming)
    )
    check_typed_dict(typed, body)


@pytest.mark.parametrize("stream", [False, True])
def test_openai_responses_bodies_fit_the_sdk_types(stream: bool) -> None:
    from openai.types.responses import response_create_params as params

    model = OpenAIResponsesModel("gpt-4.1-mini", api_key="k")
    body = dict(model.build_call(conversation("openai-responses"), stream=stream).body)
    typed = (
        params.ResponseCreateParamsStreaming
        if stream
        else (params.ResponseCreateParamsNonStreaming)
    )
    check_typed_dict(typed, body)


@pytest.mark.parametrize("stream", [False, True])
def test_anthropic_bodies_fit_the_sdk_types(stream: bool) -> None:
    """The SDK's types follow API version 2026-10-21, which has no sampling settings.

    Tidemill sends 2023-06-01, where models before Opus 4.7 and the 5 family
    still take `temperature` and `top_p`; for the newer ones the adapter
    leaves them out, and the whole body fits the current types.
    """
    from anthropic.types import message_create_params as params

    typed = (
        params.MessageCreateParamsStreaming if stream else params.MessageCreateParamsNonStreaming
    )
    newer = AnthropicModel("claude-sonnet-5-5", api_key="k")
    check_typed_dict(typed, dict(newer.build_call(conversation("anthropic"), stream=stream).body))
    older = AnthropicModel("claude-sonnet-4-5", api_key="k")
    body = dict(older.build_call(conversation("anthropic"), stream=stream).body)
    assert (body.pop("temperature"), body.pop("top_p")) == (0.2, 0.9)
    check_typed_dict(typed, body)


def test_a_broken_body_is_caught() -> None:
    """The check is not vacuous: a wrong type and an unknown key both fail it."""
    from anthropic.types import message_create_params as params

    model = AnthropicModel("claude-sonnet-5-5", api_key="k")
    body = dict(model.build_call(conversation("anthropic"), stream=False).body)
    with pytest.raises(pydantic.ValidationError):
        check_typed_dict(params.MessageCreateParamsNonStreaming, {**body, "max_tokens": "many"})
    with pytest.raises(AssertionError, match="temprature"):
        check_typed_dict(params.MessageCreateParamsNonStreaming, {**body, "temprature": 1})


def test_bedrock_converse_bodies_fit_the_service_model() -> None:
    botocore_session = pytest.importorskip("botocore.session")
    from botocore.validate import ParamValidator

    service = botocore_session.get_session().get_service_model("bedrock-runtime")
    model = BedrockModel("anthropic.claude-sonnet-4-5", region="us-east-1", api_key="bedrock-key")
    for stream, operation in ((False, "Converse"), (True, "ConverseStream")):
        body = json.loads(
            json.dumps(model.build_call(conversation("bedrock", image=PNG), stream=stream).body)
        )
        # On the wire blobs are base64 text; the service model speaks bytes.
        for message in body["messages"]:
            for block in message["content"]:
                if "image" in block:
                    block["image"]["source"]["bytes"] = base64.b64decode(
                        block["image"]["source"]["bytes"]
                    )
        shape = service.operation_model(operation).input_shape
        report = ParamValidator().validate({"modelId": "m", **body}, shape)
        assert not report.has_errors(), report.generate_report()
