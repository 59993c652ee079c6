"""`GeminiModel` and `VertexGeminiModel`: requests, credentials, signatures sent back verbatim."""

from __future__ import annotations

from typing import Any

import pytest
from llm_replay import API_KEY, fixture_bytes
from replay_models import TOKEN, gemini_model, replay, sent_body, vertex_model

from tidemill.errors import ConfigurationError
from tidemill.llm import GeminiModel, ModelRequest, ModelSettings, VertexGeminiModel, resolve_model
from tidemill.llm.google._gemini import SKIP_SIGNATURE
from tidemill.types import ImageRef, Message, Reasoning, ToolCall, ToolDefinition, ToolResult

DONE = (
    b'data: {"candidates": [{"content": {"parts": [{"text": "ok"}]}, "finishReason": "STOP"}]}\n\n'
)

WEATHER = ToolDefinition(
    name="get_weather",
    description="Current weather.",
    parameters={
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "city": {"type": "string", "title": "City"},
            "unit": {"anyOf": [{"enum": ["c", "f"]}, {"type": "null"}], "default": None},
        },
        "required": ["city"],
    },
)
NOW = ToolDefinition(name="now", description="The time.")


def conversation() -> ModelRequest:
    return ModelRequest(
        [
            Message.system("You are terse."),
            Message.user(
                "What is in these pictures, and the weather there?",
                images=(
                    ImageRef(url="data:image/png;base64,iVBORw0KGgo="),
                    ImageRef(url="https://example.com/cat.jpg"),
                ),
            ),
            Message.assistant(
                "Let me check.",
                tool_calls=(
                    ToolCall(
                        id="gemini-call-r1-0",
                        name="get_weather",
                        arguments={"city": "Paris"},
                        signature="call-sig==",
                    ),
                    ToolCall(id="fc-given", name="now"),
                ),
                reasoning=(
                    Reasoning(text="Looks like Paris.", signature="thought-sig", provider="gemini"),
                    Reasoning(text="unsigned summary", provider="gemini"),
                    Reasoning(text="", signature="text-sig", provider="gemini"),
                    Reasoning(text="Claude's", signature="anthropic-sig", provider="anthropic"),
                ),
            ),
            Message.tool(ToolResult(call_id="gemini-call-r1-0", name="get_weather", content="18C")),
            Message.tool(ToolResult(call_id="fc-given", name="now", content="boom", is_error=True)),
            Message.user("Thanks!"),
        ],
        tools=[WEATHER, NOW],
        settings=ModelSettings(temperature=0.2, top_p=0.9, max_tokens=100, stop=["END"], seed=7),
    )


async def test_the_exact_gemini_request() -> None:
    body, http_request = await sent_body(
        gemini_model, conversation(), DONE, thinking_budget=512, include_thoughts=True
    )
    assert body == {
        "contents": [
            {
                "role": "user",
                "parts": [
                    {"text": "What is in these pictures, and the weather there?"},
                    {"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}},
                    {
                        "fileData": {
                            "mimeType": "image/jpeg",
                            "fileUri": "https://example.com/cat.jpg",
                        }
                    },
                ],
            },
            {
                "role": "model",
                "parts": [
                    {
                        "text": "Looks like Paris.",
                        "thought": True,
                        "thoughtSignature": "thought-sig",
                    },
                    {"text": "Let me check.", "thoughtSignature": "text-sig"},
                    {
                        "functionCall": {"name": "get_weather", "args": {"city": "Paris"}},
                        "thoughtSignature": "call-sig==",
                    },
                    {"functionCall": {"name": "now", "args": {}, "id": "fc-given"}},
                ],
            },
            {
                "role": "user",
                "parts": [
                    {"functionResponse": {"name": "get_weather", "response": {"result": "18C"}}},
                    {
                        "functionResponse": {
                            "name": "now",
                            "response": {"error": "boom"},
                            "id": "fc-given",
                        }
                    },
                    {"text": "Thanks!"},
                ],
            },
        ],
        "systemInstruction": {"parts": [{"text": "You are terse."}]},
        "tools": [
            {
                "functionDeclarations": [
                    {
                        "name": "get_weather",
                        "description": "Current weather.",
                        "parameters": {
                            "type": "OBJECT",
                            "properties": {
                                "city": {"type": "STRING"},
                                "unit": {"type": "STRING", "enum": ["c", "f"], "nullable": True},
                            },
                            "required": ["city"],
                        },
                    },
                    {"name": "now", "description": "The time."},
                ]
            }
        ],
        "generationConfig": {
            "temperature": 0.2,
            "topP": 0.9,
            "maxOutputTokens": 100,
            "stopSequences": ["END"],
            "seed": 7,
            "thinkingConfig": {"thinkingBudget": 512, "includeThoughts": True},
        },
    }
    assert str(http_request.url) == (
        "https://generativelanguage.googleapis.com/v1beta/models/"
        "gemini-2.5-flash:streamGenerateContent?alt=sse"
    )
    assert http_request.headers["x-goog-api-key"] == API_KEY
    assert "authorization" not in http_request.headers
    assert http_request.headers["accept"] == "text/event-stream"


async def test_a_result_without_a_tool_name_is_named_after_its_call() -> None:
    request = ModelRequest(
        [
            Message.user("Go"),
            Message.assistant(tool_calls=(ToolCall(id="gemini-call-x-0", name="look"),)),
            Message(role="tool", content="found", tool_call_id="gemini-call-x-0"),
        ]
    )
    body, _ = await sent_body(gemini_model, request, DONE)
    assert body["contents"][2] == {
        "role": "user",
        "parts": [{"functionResponse": {"name": "look", "response": {"result": "found"}}}],
    }


async def test_unsigned_calls_get_the_documented_stand_in_on_gemini_3_only() -> None:
    request = ModelRequest(
        [
            Message.user("Two calls"),
            Message.assistant(
                tool_calls=(
                    ToolCall(id="call_from_openai", name="f"),
                    ToolCall(id="call_other", name="g", raw_arguments="[1]"),
                )
            ),
            Message.tool(ToolResult(call_id="call_from_openai", name="f", content="1")),
            Message.tool(ToolResult(call_id="call_other", name="g", content="2")),
        ]
    )
    old, _ = await sent_body(gemini_model, request, DONE)
    assert old["contents"][1]["parts"] == [
        {"functionCall": {"name": "f", "args": {}, "id": "call_from_openai"}},
        {"functionCall": {"name": "g", "args": {}, "id": "call_other"}},
    ]

    def gemini_3(recorder: Any, **options: Any) -> GeminiModel:
        return GeminiModel(
            "gemini-3-pro-preview", api_key=API_KEY, http_client=recorder.client(), **options
        )

    new, _ = await sent_body(gemini_3, request, DONE)
    assert new["contents"][1]["parts"][0]["thoughtSignature"] == SKIP_SIGNATURE
    assert "thoughtSignature" not in new["contents"][1]["parts"][1]


async def test_a_recorded_thought_signature_goes_back_on_its_call() -> None:
    first = await replay(gemini_model, [fixture_bytes("gemini/function-call-stream.sse")])
    (call,) = first.response.message.tool_calls
    request = ModelRequest(
        [
            Message.user("What is the capital of the user country? Call the tool"),
            first.response.message,
            Message.tool(ToolResult(call_id=call.id, name=call.name, content="France")),
        ]
    )
    body, _ = await sent_body(gemini_model, request, DONE)
    assert body["contents"][1:] == [
        {
            "role": "model",
            "parts": [
                {
                    "functionCall": {"name": "get_country", "args": {}},
                    "thoughtSignature": call.signature,
                }
            ],
        },
        {
            "role": "user",
            "parts": [
                {"functionResponse": {"name": "get_country", "response": {"result": "France"}}}
            ],
        },
    ]
    assert call.signature is not None and call.signature.startswith("EpwICpkIAXLI2nxlU6gs")


async def test_a_whole_request_goes_to_generate_content() -> None:
    from llm_replay import Recorder, json_reply

    recorder = Recorder([json_reply(fixture_bytes("gemini/text.json"))])
    model = gemini_model(recorder)
    await model.request(ModelRequest([Message.user("4200 + 42?")]))
    (sent,) = recorder.requests
    assert sent.url.path == "/v1beta/models/gemini-2.5-flash:generateContent"
    assert sent.url.query == b""


async def test_the_vertex_request() -> None:
    request = ModelRequest([Message.system("Be brief."), Message.user("Hi")])
    body, http_request = await sent_body(
        vertex_model, request, DONE, location="global", thinking_level="low"
    )
    assert str(http_request.url) == (
        "https://aiplatform.googleapis.com/v1/projects/acme/locations/global/"
        "publishers/google/models/gemini-2.5-pro:streamGenerateContent?alt=sse"
    )
    assert http_request.headers["authorization"] == f"Bearer {TOKEN}"
    assert "x-goog-api-key" not in http_request.headers
    assert body == {
        "contents": [{"role": "user", "parts": [{"text": "Hi"}]}],
        "systemInstruction": {"parts": [{"text": "Be brief."}]},
        "generationConfig": {"thinkingConfig": {"thinkingLevel": "low"}},
    }


# -- credentials -------------------------------------------------------------------------------


def test_the_key_comes_from_gemini_api_key_then_google_api_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("GOOGLE_API_KEY", "google-key")
    assert GeminiModel("gemini-2.5-flash").credentials.api_key == "google-key"
    monkeypatch.setenv("GEMINI_API_KEY", "gemini-key")
    assert GeminiModel("gemini-2.5-flash").credentials.api_key == "gemini-key"
    assert GeminiModel("gemini-2.5-flash", api_key="arg").credentials.api_key == "arg"


def test_a_missing_gemini_key_names_both_variables() -> None:
    with pytest.raises(ConfigurationError, match="No API key for the gemini") as caught:
        GeminiModel("gemini-2.5-flash")
    assert "GEMINI_API_KEY" in str(caught.value) and "GOOGLE_API_KEY" in str(caught.value)


def test_vertex_reads_project_location_and_token_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "env-project")
    monkeypatch.setenv("GOOGLE_CLOUD_LOCATION", "europe-west4")
    monkeypatch.setenv("GOOGLE_OAUTH_ACCESS_TOKEN", "ya29.env")
    model = VertexGeminiModel("gemini-2.5-pro")
    assert (model.project, model.location, model.credentials.api_key) == (
        "env-project",
        "europe-west4",
        "ya29.env",
    )
    assert model.credentials.base_url == "https://europe-west4-aiplatform.googleapis.com"
    assert model.describe()["location"] == "europe-west4"
    assert "ya29" not in repr(model.credentials)
    given = VertexGeminiModel("gemini-2.5-pro", project="p", location="global", api_key="tok")
    assert (given.project, given.location, given.credentials.api_key) == ("p", "global", "tok")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"access_token": "t"}, "GOOGLE_CLOUD_PROJECT"),
        ({"project": "p"}, "GOOGLE_OAUTH_ACCESS_TOKEN"),
    ],
)
def test_vertex_without_a_project_or_token(options: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        VertexGeminiModel("gemini-2.5-pro", **options)


async def test_specs_resolve_to_the_google_adapters() -> None:
    gemini = resolve_model("gemini:gemini-2.5-flash", api_key="k", temperature=0.0)
    assert isinstance(gemini, GeminiModel) and gemini.settings == {"temperature": 0.0}
    assert isinstance(resolve_model("gemini-2.5-pro", api_key="k"), GeminiModel)
    vertex = resolve_model("vertex:gemini-2.5-pro", project="p", access_token="t")
    assert isinstance(vertex, VertexGeminiModel) and vertex.provider == "vertex"
    with pytest.raises(ConfigurationError, match="Did you mean 'project'"):
        resolve_model("vertex:gemini-2.5-pro", projekt="p", access_token="t")
    await gemini.aclose()
    await vertex.aclose()
