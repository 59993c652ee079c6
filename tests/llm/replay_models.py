"""Models of the Google, Responses, Azure and Vertex adapters wired to a mock transport.

The counterpart of `llm_replay.chat_model` for the adapters that are not
`OpenAIChatModel`/`AnthropicModel`: every factory takes a `Recorder` and
returns a model that talks only to it, with the shared fake key and no retries.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from llm_replay import (
    API_KEY,
    HELLO,
    NO_RETRY,
    Recorder,
    Streamed,
    fixture_bytes,
    sse,
    stream_all,
)

from tidemill.llm import (
    AnthropicVertexModel,
    AzureOpenAIModel,
    GeminiModel,
    HttpModel,
    ModelRequest,
    OpenAIResponsesModel,
    VertexGeminiModel,
)

TOKEN = "ya29.test-token-0123456789SECRET"
"""The fake Vertex AI access token; no error may ever show it."""

Factory = Callable[..., HttpModel]


def gemini_model(recorder: Recorder, **options: Any) -> GeminiModel:
    options.setdefault("retry", NO_RETRY)
    return GeminiModel(
        "gemini-2.5-flash", api_key=API_KEY, http_client=recorder.client(), **options
    )


def vertex_model(recorder: Recorder, **options: Any) -> VertexGeminiModel:
    options.setdefault("retry", NO_RETRY)
    options.setdefault("project", "acme")
    options.setdefault("location", "us-central1")
    return VertexGeminiModel(
        "gemini-2.5-pro", access_token=TOKEN, http_client=recorder.client(), **options
    )


def responses_model(recorder: Recorder, **options: Any) -> OpenAIResponsesModel:
    options.setdefault("retry", NO_RETRY)
    return OpenAIResponsesModel("gpt-5", api_key=API_KEY, http_client=recorder.client(), **options)


def azure_model(recorder: Recorder, **options: Any) -> AzureOpenAIModel:
    options.setdefault("retry", NO_RETRY)
    options.setdefault("base_url", "https://acme.openai.azure.com")
    return AzureOpenAIModel("prod-gpt4o", api_key=API_KEY, http_client=recorder.client(), **options)


def anthropic_vertex_model(recorder: Recorder, **options: Any) -> AnthropicVertexModel:
    options.setdefault("retry", NO_RETRY)
    options.setdefault("project", "acme")
    options.setdefault("location", "us-east5")
    return AnthropicVertexModel(
        "claude-sonnet-4-5@20250929", access_token=TOKEN, http_client=recorder.client(), **options
    )


async def replay(
    factory: Factory, chunks: Sequence[bytes], request: ModelRequest = HELLO, **options: Any
) -> Streamed:
    """Stream `chunks` (one response body) through a model made by `factory`."""
    model = factory(Recorder([sse(b"", chunks=chunks)]), **options)
    try:
        return await stream_all(model, request)
    finally:
        await model.aclose()


async def sent_body(
    factory: Factory, request: ModelRequest, reply: bytes, **options: Any
) -> tuple[dict[str, Any], Any]:
    """The JSON body and the `httpx.Request` a model sends for `request` (streamed)."""
    recorder = Recorder([sse(reply)])
    model = factory(recorder, **options)
    try:
        [_ async for _ in model.stream(request)]
    finally:
        await model.aclose()
    (http_request,) = recorder.requests
    return json.loads(http_request.content), http_request


def array_as_sse(name: str) -> bytes:
    """A `streamGenerateContent` JSON-array body (no `alt=sse`) re-framed as SSE events."""
    elements = json.loads(fixture_bytes(name))
    return "".join(f"data: {json.dumps(element)}\r\n\r\n" for element in elements).encode()
