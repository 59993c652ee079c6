"""The Gemini `generateContent` request body, as `TypedDict`s.

The same body serves the Gemini API and Vertex AI's Gemini endpoint. Only
what Tidemill sends is described; see
https://ai.google.dev/api/generate-content. Responses are read with the
checked accessors of `tidemill.llm._json`.
"""

from __future__ import annotations

from typing import Literal, NotRequired, Required, TypedDict

from pydantic import JsonValue

__all__ = [
    "GeminiBlob",
    "GeminiContent",
    "GeminiFileData",
    "GeminiFunctionCall",
    "GeminiFunctionCallingConfig",
    "GeminiFunctionDeclaration",
    "GeminiFunctionResponse",
    "GeminiGenerationConfig",
    "GeminiPart",
    "GeminiRequest",
    "GeminiSystemInstruction",
    "GeminiThinkingConfig",
    "GeminiTool",
    "GeminiToolConfig",
]


class GeminiBlob(TypedDict):
    mimeType: str
    data: str
    """Base64 bytes."""


class GeminiFileData(TypedDict):
    mimeType: str
    fileUri: str


class GeminiFunctionCall(TypedDict):
    name: str
    args: dict[str, JsonValue]
    id: NotRequired[str]
    """Only an id Gemini itself gave; Tidemill's generated ids are not sent."""


class GeminiFunctionResponse(TypedDict):
    name: str
    response: dict[str, JsonValue]
    id: NotRequired[str]


class GeminiPart(TypedDict, total=False):
    text: str
    thought: bool
    thoughtSignature: str
    inlineData: GeminiBlob
    fileData: GeminiFileData
    functionCall: GeminiFunctionCall
    functionResponse: GeminiFunctionResponse


class GeminiContent(TypedDict):
    role: Literal["user", "model"]
    parts: list[GeminiPart]


class GeminiSystemInstruction(TypedDict):
    parts: list[GeminiPart]


class GeminiFunctionDeclaration(TypedDict):
    name: str
    description: NotRequired[str]
    parameters: NotRequired[dict[str, JsonValue]]
    """Gemini's OpenAPI-style schema; left out for a tool without arguments."""


class GeminiTool(TypedDict):
    functionDeclarations: list[GeminiFunctionDeclaration]


class GeminiFunctionCallingConfig(TypedDict, total=False):
    mode: Literal["AUTO", "ANY", "NONE"]
    allowedFunctionNames: list[str]
    """With mode `ANY`: the only functions the model may call."""


class GeminiToolConfig(TypedDict):
    functionCallingConfig: GeminiFunctionCallingConfig


class GeminiThinkingConfig(TypedDict, total=False):
    includeThoughts: bool
    thinkingBudget: int
    thinkingLevel: str


class GeminiGenerationConfig(TypedDict, total=False):
    temperature: float
    topP: float
    maxOutputTokens: int
    stopSequences: list[str]
    seed: int
    presencePenalty: float
    frequencyPenalty: float
    thinkingConfig: GeminiThinkingConfig
    responseMimeType: str
    responseSchema: dict[str, JsonValue]
    """Gemini's OpenAPI-style schema (see `_schema`), not JSON Schema."""


class GeminiRequest(TypedDict, total=False):
    contents: Required[list[GeminiContent]]
    systemInstruction: GeminiSystemInstruction
    tools: list[GeminiTool]
    toolConfig: GeminiToolConfig
    generationConfig: GeminiGenerationConfig
