"""The OpenAI Responses API request body, as `TypedDict`s.

Only what Tidemill sends is described; see
https://platform.openai.com/docs/api-reference/responses/create. Responses
are read with the checked accessors of `tidemill.llm._json`.
"""

from __future__ import annotations

from typing import Literal, NotRequired, Required, TypedDict

from pydantic import JsonValue

__all__ = [
    "ResponsesContentPart",
    "ResponsesFunctionCall",
    "ResponsesFunctionCallOutput",
    "ResponsesFunctionTool",
    "ResponsesInputImage",
    "ResponsesInputItem",
    "ResponsesInputText",
    "ResponsesMessage",
    "ResponsesReasoningItem",
    "ResponsesReasoningParam",
    "ResponsesRequest",
    "ResponsesSummaryText",
    "ResponsesTextFormat",
    "ResponsesTextParam",
]


class ResponsesInputText(TypedDict):
    type: Literal["input_text"]
    text: str


class ResponsesInputImage(TypedDict):
    type: Literal["input_image"]
    image_url: str
    detail: Literal["auto", "low", "high"]


ResponsesContentPart = ResponsesInputText | ResponsesInputImage


class ResponsesMessage(TypedDict):
    role: Literal["system", "developer", "user", "assistant"]
    content: str | list[ResponsesContentPart]


class ResponsesSummaryText(TypedDict):
    type: Literal["summary_text"]
    text: str


class ResponsesReasoningItem(TypedDict):
    type: Literal["reasoning"]
    id: str
    summary: list[ResponsesSummaryText]
    encrypted_content: NotRequired[str]
    """The opaque reasoning, returned verbatim; needed when `store` is false."""


class ResponsesFunctionCall(TypedDict):
    type: Literal["function_call"]
    call_id: str
    name: str
    arguments: str
    """The arguments as JSON text."""


class ResponsesFunctionCallOutput(TypedDict):
    type: Literal["function_call_output"]
    call_id: str
    output: str


ResponsesInputItem = (
    ResponsesMessage | ResponsesReasoningItem | ResponsesFunctionCall | ResponsesFunctionCallOutput
)


class ResponsesFunctionTool(TypedDict):
    type: Literal["function"]
    name: str
    description: NotRequired[str]
    parameters: dict[str, JsonValue]
    strict: bool
    """Sent as `false`: the API defaults to strict schemas, which most tool schemas are not."""


class ResponsesReasoningParam(TypedDict, total=False):
    effort: str
    summary: str


class ResponsesJsonSchemaFormat(TypedDict):
    type: Literal["json_schema"]
    name: str
    description: NotRequired[str]
    schema: dict[str, JsonValue]
    strict: bool


class ResponsesJsonObjectFormat(TypedDict):
    type: Literal["json_object"]


ResponsesTextFormat = ResponsesJsonSchemaFormat | ResponsesJsonObjectFormat


class ResponsesTextParam(TypedDict):
    format: ResponsesTextFormat


class ResponsesRequest(TypedDict, total=False):
    model: Required[str]
    input: Required[list[ResponsesInputItem]]
    tools: list[ResponsesFunctionTool]
    stream: bool
    store: bool
    include: list[str]
    reasoning: ResponsesReasoningParam
    temperature: float
    top_p: float
    max_output_tokens: int
    text: ResponsesTextParam
